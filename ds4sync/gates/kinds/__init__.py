"""Gate kinds: a registry from kind name to the module that runs it.

A kind module defines two names:

- ``Spec``: a pydantic model (use :class:`ds4sync.models.config.FrozenModel`) for the gate's
  ``run:`` section; validated when the tier file is loaded.
- ``run_gate(gate: Gate, ctx: GateContext) -> GateResult``: runs one gate and returns
  its result; it never raises for an expected failure (a failed test, a timeout, bad
  JUnit are results with a status), only for bugs.

To add a kind (kernel, serving, perf, ...), add ``ds4sync/gates/kinds/<name>.py`` and one
entry below. Modules are imported only when a tier file names them.
"""

from __future__ import annotations

import importlib
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from ds4sync.core import proc
from ds4sync.core.errors import ToolMissingError

if TYPE_CHECKING:
    from ds4sync.gates.definition import Gate
    from ds4sync.models.gates_details import AnyGateDetails
    from ds4sync.models.gates_results import GateResult, TestCounts, TestFailure
    from ds4sync.models.gates_status import GateStatus

KIND_MODULES: dict[str, str] = {
    "pytest": "ds4sync.gates.kinds.pytest_kind",
    "command": "ds4sync.gates.kinds.command_kind",
    "static": "ds4sync.gates.kinds.static_kind",
    "serving": "ds4sync.gates.kinds.serving",
    "kernel": "ds4sync.gates.kinds.kernel",
}


class GateRunner(Protocol):
    """The signature every kind's ``run_gate`` has."""

    def __call__(self, gate: Gate, ctx: GateContext) -> GateResult: ...


def kind_module(name: str) -> ModuleType:
    """The module implementing kind ``name`` (imported on first use).

    Raises:
        KeyError: no such kind in :data:`KIND_MODULES`.
    """
    return importlib.import_module(KIND_MODULES[name])


def runner_for(name: str) -> GateRunner:
    """The ``run_gate`` function of kind ``name``."""
    return kind_module(name).run_gate


@dataclass(frozen=True)
class GateContext:
    """What a kind gets besides its gate: where to run, with which python, on which devices.

    ``cwd`` is the checkout (sync worktree or --repo); ``python`` the target environment's
    interpreter; ``devices`` the GPU ids given to this gate (CUDA_VISIBLE_DEVICES);
    ``base_ref`` the upstream commit the fork's delta is measured against (static kind);
    ``on_line`` receives each output line (progress); ``on_start`` each child's process
    group id, so the runner can stop it on Ctrl-C.
    """

    cwd: Path
    python: str
    log_dir: Path
    devices: tuple[str, ...] = ()
    base_ref: str | None = None
    on_line: Callable[[str], None] | None = None
    on_start: Callable[[int], None] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def env_overrides(self, gate: Gate) -> dict[str, str]:
        """The gate's ``env`` plus CUDA_VISIBLE_DEVICES for the devices given (empty string for none on GPU gates)."""
        env = dict(gate.definition.env)
        if self.devices or gate.definition.devices:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.devices)
        return env

    def log_path(self, gate: Gate, suffix: str = "log") -> Path:
        """Where a gate's output goes: ``<log_dir>/<tier>-<name>.<suffix>`` (truncated first)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"{gate.tier}-{gate.name}.{suffix}"
        path.unlink(missing_ok=True)
        return path

    def start(
        self,
        gate: Gate,
        kind: str,
        argv: Sequence[str] = (),
        *,
        log_path: Path | None = None,
        display: str | None = None,
    ) -> GateRun:
        """What the gate's result will say about how it ran: ``argv`` in ``cwd`` with the gate's environment
        overrides and devices, output to ``log_path``; ``display`` is the command shown to a person
        (``argv`` joined when not given). A kind that picks its command later starts with no ``argv``
        and sets it with :meth:`GateRun.ran`."""
        from ds4sync.models.gates_details import details_for

        run = GateRun(
            gate=gate,
            kind=kind,
            command=(),
            cwd=str(self.cwd),
            env_overrides=self.env_overrides(gate),
            devices=self.devices,
            log_path=None,
            details=details_for(kind),
        )
        if argv or display is not None:
            run.ran(argv, log_path, display=display)
        return run

    def run(
        self,
        argv: list[str],
        *,
        gate: Gate,
        log_path: Path,
        env_overrides: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> proc.ProcResult:
        """Run one child for ``gate`` through :func:`ds4sync.core.proc.run` in ``cwd``, streaming to ``log_path``."""
        overrides = self.env_overrides(gate) if env_overrides is None else dict(env_overrides)
        return proc.run(
            argv,
            cwd=self.cwd,
            env_overrides=overrides,
            log_path=log_path,
            timeout_s=timeout_s if timeout_s is not None else gate.definition.timeout,
            on_line=self.on_line,
            on_start=self.on_start,
        )

    def run_child(self, run: GateRun, argv: list[str], *, log_path: Path) -> proc.ProcResult | GateResult:
        """Run ``argv``, the command of ``run``, with the run's environment overrides (:meth:`run`).

        Returns the child's result, or the gate's ``error`` result when the program is missing, or the child
        timed out (:meth:`GateRun.ended`).
        """
        try:
            res = self.run(argv, gate=run.gate, log_path=log_path, env_overrides=run.env_overrides)
        except ToolMissingError as exc:
            return run.result("error", exc.one_line())
        return run.ended(res) or res


@dataclass
class GateRun:
    """How one gate is being run, the part of its result every kind records the same way.

    Made by :meth:`GateContext.start`; a kind adds to ``details`` (its own model from
    :mod:`ds4sync.models.gates_details`: JUnit path, kernel suite, serving run) with :meth:`note` and sets
    ``duration_s`` (seconds) once its child ended, then ends the run with :meth:`result`, which builds the
    :class:`~ds4sync.models.gates_results.GateResult` with typed arguments only.
    """

    gate: Gate
    kind: str
    command: tuple[str, ...]
    cwd: str
    env_overrides: dict[str, str]
    devices: tuple[str, ...]
    log_path: str | None
    details: AnyGateDetails
    duration_s: float = 0.0

    def note(self, **fields: Any) -> None:
        """Sets fields of the kind's details, validated now.

        Raises:
            ValueError: a field the kind's details lack, or a value of the wrong type (``<Model>.<field>: ...``).
        """
        from ds4sync.core.model import updated

        self.details = updated(self.details, **fields)

    def result(
        self,
        status: GateStatus,
        reason: str,
        *,
        counts: TestCounts | None = None,
        failures: Sequence[TestFailure] = (),
        flaky: Sequence[str] = (),
        details: Mapping[str, Any] | None = None,
    ) -> GateResult:
        """The gate's result: ``status`` and ``reason``, with ``details`` (fields of the kind's details model)
        added to the run's own."""
        from ds4sync.models.gates_results import GateResult, TestCounts

        if details:
            self.note(**details)
        return GateResult(
            name=self.gate.name,
            tier=self.gate.tier,
            kind=self.kind,
            status=status,
            required=self.gate.definition.required,
            reason=reason,
            counts=counts if counts is not None else TestCounts(),
            failures=tuple(failures),
            flaky=tuple(flaky),
            duration_s=self.duration_s,
            command=self.command,
            cwd=self.cwd,
            env_overrides=self.env_overrides,
            devices=self.devices,
            log_path=self.log_path,
            details=self.details,
        )

    def ran(self, argv: Sequence[str], log_path: Path | None, *, display: str | None = None) -> None:
        """The command the gate runs (``argv``), where its output goes, and how it is shown to a person
        (``details.display_command``: ``display``, else ``argv`` joined)."""
        self.command = tuple(argv)
        self.log_path = str(log_path) if log_path is not None else None
        self.note(display_command=display if display is not None else shlex.join(argv))

    def ended(self, res: proc.ProcResult) -> GateResult | None:
        """Records the child's duration; an ``error`` result when it timed out, else None."""
        self.duration_s = res.duration_s
        if res.timed_out:
            return self.result("error", f"timed out after {self.gate.definition.timeout:g}s")
        return None
