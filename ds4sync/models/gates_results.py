"""Result values of the gate tier: one :class:`GateResult` per gate, one :class:`TierResult` per tier.

Cheap to import (pydantic only), so every gate kind (pytest, command, static, kernel,
serving, perf) builds the same result. The status words and what is green are defined once,
in :mod:`ds4sync.models.gates_status`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, model_validator

from ds4sync.core.model import FrozenModel
from ds4sync.models.gates_details import AnyGateDetails, GateKind, migrate_details
from ds4sync.models.gates_status import GateStatus, TierStatus, gate_blocking, gate_green, tier_status

_KINDS = get_args(GateKind)

#: 2: ``GateResult.details`` typed per kind (:mod:`ds4sync.models.gates_details`); 1: a free dict.
RESULT_SCHEMA_VERSION = 2


class TestCounts(FrozenModel):
    """Per-test counts of one gate run.

    One logical test counts once: a test that fails and then errors in teardown is one
    failure (the error attached to it), a test rerun until it passed is one ``flaky``.
    ``failed`` and ``errors`` hold only real failures; a failure matched by an
    environment-only rule counts in ``env_only`` instead, a test that failed and then
    passed on rerun counts in ``flaky`` (not in ``passed``). ``xfailed`` and ``xpassed`` are
    pytest's expected failures that failed / passed (a strict xpass is ``failed``).
    ``deselected`` and ``xpassed`` come from pytest's own summary line (JUnit marks neither).
    """

    __test__ = False  # not a pytest test class

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    deselected: int = 0
    env_only: int = 0
    flaky: int = 0
    xfailed: int = 0
    xpassed: int = 0

    @property
    def tests(self) -> int:
        """Logical tests that ran (deselected ones did not)."""
        return (
            self.passed + self.failed + self.errors + self.skipped + self.env_only + self.flaky + self.xfailed
        ) + self.xpassed

    def summary(self) -> str:
        """pytest-style text such as ``309 passed, 25 deselected`` (zeros left out)."""
        words = [
            ("passed", self.passed),
            ("failed", self.failed),
            ("errors", self.errors),
            ("skipped", self.skipped),
            ("xfailed", self.xfailed),
            ("xpassed", self.xpassed),
            ("deselected", self.deselected),
            ("env-only", self.env_only),
            ("flaky", self.flaky),
        ]
        return ", ".join(f"{n} {w}" for w, n in words if n) or "no tests"


class TestFailure(FrozenModel):
    """One failing test (or one failed check) of a gate.

    ``node_id`` is pytest's node id (``tests/x.py::TestA::test_b[p]``) or a check name;
    ``env_category`` is set when an environment-only rule matched (e.g. ``gated-model-403``),
    with the rule's name in ``env_rule``.
    """

    __test__ = False

    node_id: str
    kind: Literal["failure", "error"] = "failure"
    message: str = ""
    env_category: str | None = None
    env_rule: str | None = None
    duration_s: float = 0.0


class GateResult(FrozenModel):
    """What one gate ended with: status, counts, failures, and how it was run.

    ``command`` is the exact argv run (first run), ``env_overrides`` the variables set on
    top of the inherited environment (secrets never appear: only the gate's own ``env`` and
    ``CUDA_VISIBLE_DEVICES``). ``commit`` and ``tree`` say what it proved: the checkout's HEAD
    and the tree id of its tracked files as they were (equal to ``commit``'s tree when nothing
    tracked was changed); promote accepts a gate only for the exact commit it promotes.
    ``details`` holds what the kind records besides (JUnit path, slowest tests, kernel suite, serving
    probes): the kind's own model, see :mod:`ds4sync.models.gates_details`. Durations are in seconds.
    A schema-1 result (details a free dict) is migrated when read.
    """

    schema_version: int = RESULT_SCHEMA_VERSION
    name: str
    tier: str
    kind: GateKind
    status: GateStatus
    required: bool = True
    reason: str = ""
    counts: TestCounts = TestCounts()
    failures: tuple[TestFailure, ...] = ()
    flaky: tuple[str, ...] = ()
    duration_s: float = 0.0
    command: tuple[str, ...] = ()
    cwd: str = ""
    env_overrides: dict[str, str] = Field(default_factory=dict)
    devices: tuple[str, ...] = ()
    log_path: str | None = None
    cache_key: str | None = None
    commit: str | None = Field(default=None, description="HEAD of the checkout the gate ran in")
    tree: str | None = Field(default=None, description="git tree id of the tracked files it ran on")
    details: AnyGateDetails = Field(default=None)  # type: ignore[assignment]  # _typed_details fills it by kind

    @model_validator(mode="before")
    @classmethod
    def _typed_details(cls, data: Any) -> Any:
        """Details given as a dict (or not at all) take the gate's ``kind``; schema-1 details are migrated.

        Raises:
            ValueError: the result is from a newer ds4sync (``schema_version`` above ours).
        """
        if not isinstance(data, dict):
            return data
        version = data.get("schema_version", RESULT_SCHEMA_VERSION)  # a result built in code is current
        if not isinstance(version, int) or version > RESULT_SCHEMA_VERSION:
            newest = RESULT_SCHEMA_VERSION
            raise ValueError(f"gate result schema {version!r} is newer than this ds4sync reads ({newest})")
        details, kind = data.get("details"), data.get("kind")
        if details is None:
            details = {}
        if isinstance(details, dict) and isinstance(kind, str):
            if version < RESULT_SCHEMA_VERSION:
                details = migrate_details(kind, details) if kind in _KINDS else details
            details = {"kind": kind, **details}
        return {**data, "schema_version": RESULT_SCHEMA_VERSION, "details": details}

    @model_validator(mode="after")
    def _details_of_its_kind(self) -> GateResult:
        if self.details.kind != self.kind:
            raise ValueError(f"details are of a {self.details.kind} gate, the gate is {self.kind}")
        return self

    def __bool__(self) -> bool:
        return gate_green(self.status)

    @property
    def blocking(self) -> bool:
        """Whether this result keeps its tier from being green (a required gate that is not green)."""
        return gate_blocking(self)

    @property
    def env_categories(self) -> tuple[str, ...]:
        """The distinct environment-only categories among the failures, in order seen."""
        seen = dict.fromkeys(f.env_category for f in self.failures if f.env_category)
        return tuple(seen)


class TierResult(FrozenModel):
    """All gates of one tier as run once; stored at ``record.results.gates[tier]``."""

    schema_version: int = RESULT_SCHEMA_VERSION
    tier: str
    repo: str
    head: str | None = None
    tree: str | None = None
    untracked: tuple[str, ...] = Field(
        default=(), description="files git neither tracked nor ignored when the tier ran: in `tree`, not in `head`"
    )
    started_at: str
    duration_s: float
    changed_since: str | None = None
    changed_files: int | None = None
    run_all_reason: str | None = None
    python: str | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    gates: tuple[GateResult, ...] = ()

    def __bool__(self) -> bool:
        return self.status == "passed"

    @property
    def status(self) -> TierStatus:
        """The tier's status by :func:`ds4sync.models.gates_status.tier_status`: ``passed``, ``failed``,
        ``incomplete`` or ``not-run`` (no gate ran: never green)."""
        return tier_status(self.gates)

    def line(self) -> str:
        """The tier in one line, the same wherever it is shown (phase message, demo, report).

        ``passed: 3 gates (3 passed); tests: 2 passed``: the tier's status, its gates by
        status, then the tests summed over them (a gate with no tests, e.g. a diff check,
        adds a gate and no test).
        """
        by_status: dict[str, int] = {}
        for gate in self.gates:
            by_status[gate.status] = by_status.get(gate.status, 0) + 1
        gates = ", ".join(f"{n} {s}" for s, n in by_status.items())
        count = len(self.gates)
        line = f"{self.status}: {count} gate{'s' * (count != 1)} ({gates or 'none'}); tests: {self.totals().summary()}"
        if self.untracked:  # what the gates saw is not a commit: say so wherever the tier is shown
            shown = ", ".join(self.untracked[:3]) + (", ..." if len(self.untracked) > 3 else "")
            line += f"; with untracked files no commit has ({shown})"
        return line

    def totals(self) -> TestCounts:
        """Counts summed over every gate (cached gates count what they counted when they ran)."""
        fields = TestCounts.model_fields
        return TestCounts(**{name: sum(getattr(g.counts, name) for g in self.gates) for name in fields})


_CAUSE_RE = re.compile(r"(Error\b|Exception\b|No module named|error:|^E\s|assert|FAILED|Killed|Segmentation fault)")


def cause_line(text: str) -> str:
    """The line of a command's output that says why it failed: the last error-looking line, else the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    hits = [line for line in lines if _CAUSE_RE.search(line)]
    return (hits or lines or [""])[-1][:200]


def failure_cause(gate: GateResult) -> str:
    """One line saying why ``gate`` is not green: its reason plus the cause its output or log names.

    The cause is the last error-looking line (``AssertionError: ...``, ``No module named pytest``)
    of the first failure's message, else of the gate's log; '' for a green gate.
    """
    if gate_green(gate.status):
        return ""
    text = gate.failures[0].message if gate.failures else ""
    if len(text.strip().splitlines()) < 2 and gate.log_path:
        from ds4sync.core.files import tail_lines

        text = "\n".join((text, *tail_lines(Path(gate.log_path), 40)))
    line = cause_line(text)
    reason = gate.reason or gate.status
    if not line or line in reason:
        return reason
    return f"{reason}: {line}"
