"""Gate kinds: a registry from kind name to the module that runs it.

A kind module defines two names:

- ``Spec``: a pydantic model (use :class:`ds4sync.config.FrozenModel`) for the gate's
  ``run:`` section; validated when the tier file is loaded.
- ``run_gate(gate: Gate, ctx: GateContext) -> GateResult``: runs one gate and returns
  its result; it never raises for an expected failure (a failed test, a timeout, bad
  JUnit are results with a status), only for bugs.

To add a kind (kernel, serving, perf, ...), add ``ds4sync/gates/kinds/<name>.py`` and one
entry below. Modules are imported only when a tier file names them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from ds4sync.core import proc

if TYPE_CHECKING:
    from ds4sync.gates.definition import Gate
    from ds4sync.gates.model import GateResult

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
