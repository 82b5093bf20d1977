"""The one status vocabulary of gates, tiers and runs, and the one rule for what is green.

A green is a proof: a gate is green only when its tests ran (now, or on identical inputs
before: ``cached``); a tier is green only when at least one gate ran green and every
required gate is green. "Nothing failed because nothing ran" is ``not-run``, never green.
The run record (:class:`~ds4sync.models.gates_results.TierResult`), the report and ``summary.json``,
the nightly notice, promote and every ``--json`` read these functions; no other module keeps
a set of green words.

Gate statuses:

- ``passed``: its tests ran and passed; ``cached``: the same inputs passed before.
- ``failed``: a test (or check) failed; ``error``: the gate could not say (timeout, crash,
  malformed JUnit).
- ``incomplete``: only environment-only failures (a gated model, too few GPUs, the time
  budget): never counted as passing.
- ``skipped``: not selected (``--changed-since``) and no passed result on identical inputs.
- ``not-run``: selected, but nothing of it could run (e.g. none of its test paths is in the tree).

Tier statuses: ``passed``, ``failed`` (a required gate failed or errored), ``incomplete``
(a required gate is not green, or no gate is green though some ran) and ``not-run`` (no gate
ran at all: every one skipped or not-run, or the tier has none).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, Protocol

GateStatus = Literal["passed", "cached", "failed", "error", "incomplete", "skipped", "not-run"]
TierStatus = Literal["passed", "failed", "incomplete", "not-run"]

GATE_STATUSES: tuple[GateStatus, ...] = ("passed", "cached", "failed", "error", "incomplete", "skipped", "not-run")
TIER_STATUSES: tuple[TierStatus, ...] = ("passed", "failed", "incomplete", "not-run")


class _Gate(Protocol):
    @property
    def status(self) -> str: ...  # a GateStatus

    @property
    def required(self) -> bool: ...


def gate_green(status: str) -> bool:
    """Whether a gate with ``status`` proves its tests pass: ``passed`` or ``cached`` only."""
    return status in ("passed", "cached")


def gate_ran(status: str) -> bool:
    """Whether a gate with ``status`` ran something that answered (green, failed, error or incomplete)."""
    return status not in ("skipped", "not-run")


def gate_blocking(gate: _Gate) -> bool:
    """Whether ``gate`` keeps its tier from being green: a required gate that is not green."""
    return gate.required and not gate_green(gate.status)


def tier_status(gates: Iterable[_Gate]) -> TierStatus:
    """The status of a tier made of ``gates`` (see the module docstring); an empty tier is ``not-run``.

    Optional gates never fail a tier, and never make it green alone: a tier whose required gates
    did not run is ``incomplete`` however many optional gates passed.
    """
    gates = list(gates)
    blocking = [g for g in gates if gate_blocking(g)]
    if any(g.status in ("failed", "error") for g in blocking):
        return "failed"
    if not any(gate_green(g.status) for g in gates):  # nothing proven: nothing ran, or nothing that counts
        return "incomplete" if any(gate_ran(g.status) for g in gates) else "not-run"
    return "incomplete" if blocking else "passed"


def tier_green(gates: Iterable[_Gate]) -> bool:
    """Whether a tier made of ``gates`` is green (its :func:`tier_status` is ``passed``)."""
    return tier_status(gates) == "passed"


def run_green(phases: Mapping[str, str], tiers: Mapping[str, Iterable[_Gate]], *, required: Iterable[str]) -> bool:
    """Whether a run is green: every phase ``done`` or ``skipped`` and every ``required`` tier green.

    ``phases`` maps phase name to its status, ``tiers`` tier name to its gate results (a
    required tier that has no results is not green).
    """
    if any(status not in ("done", "skipped") for status in phases.values()):
        return False
    return all(name in tiers and tier_green(tiers[name]) for name in required)
