"""The ``gate`` phase of the sync pipeline: run the tiers named in ds4sync.yaml (``gates.tiers``).

Results go to ``record.results.gates[tier]`` (the same place `ds4sync gate` writes inside a
run). The phase is done when every tier passed, needs a person when only environment-only
failures stand in the way (fix the host, then `ds4sync resume`) or a tier ran no test at all
(``not-run``: nothing proven), and failed otherwise.
"""

from __future__ import annotations

from ds4sync.gates.runner import TierOptions, run_tier
from ds4sync.models.gates_results import GateResult, failure_cause
from ds4sync.runner import Phase, PhaseOutcome, RunContext


def run_gate_phase(ctx: RunContext) -> PhaseOutcome:
    """Run each configured tier in the run's worktree and record it."""
    lines, statuses, stopped = [], [], []
    blocking: list[GateResult] = []
    if not ctx.ws.config.gates.tiers:
        return PhaseOutcome("skipped", "no gate tiers configured (gates.tiers in ds4sync.yaml)")
    for tier in ctx.ws.config.gates.tiers:
        ctx.progress(f"gates: tier {tier}")
        result = run_tier(ctx.ws, TierOptions(tier=tier, deadline=ctx.deadline), record=ctx.record)
        ctx.record.results.gates[tier] = result
        blocking += [gate for gate in result.gates if gate.blocking]
        statuses.append(result.status)
        stopped += [
            f"{tier}/{g.name}" for g in result.gates if any(f.env_category == "time-budget" for f in g.failures)
        ]
        lines.append(f"tier {tier}: {result.line()}")
    if "failed" in statuses:
        return PhaseOutcome(
            "failed",
            _first_blocking(blocking) or "a required gate failed",
            details=tuple(lines),
            next_steps=("see `ds4sync status`; rerun one tier with `ds4sync gate --tier TIER`",),
        )
    if stopped:
        return PhaseOutcome(
            "needs-person",
            f"time budget reached: {len(stopped)} gate(s) stopped or not started, recorded incomplete",
            details=(*lines, *stopped),
            next_steps=("`ds4sync resume` runs them again (raise nightly.budget_s if this recurs)",),
        )
    if "incomplete" in statuses:
        return PhaseOutcome(
            "needs-person",
            "gates hit environment-only failures (not counted as passing)",
            details=tuple(lines),
            next_steps=("fix the environment, then `ds4sync resume`",),
        )
    unproven = [t for t, s in zip(ctx.ws.config.gates.tiers, statuses, strict=True) if s == "not-run"]
    if unproven:
        return PhaseOutcome(
            "needs-person",
            f"no test ran in tier(s) {', '.join(unproven)}: nothing proven (never counted as passing)",
            details=tuple(lines),
            next_steps=("check the tier's gate definitions and test paths, then `ds4sync resume`",),
        )
    return PhaseOutcome("done", "; ".join(lines) or "no tiers configured", details=tuple(lines))


def _first_blocking(blocking: list[GateResult]) -> str:
    """``required gate unit/envs-kept failed: <cause> (log: <path>)`` for the first gate that blocks."""
    if not blocking:
        return ""
    gate = blocking[0]
    more = f" (and {len(blocking) - 1} more)" if len(blocking) > 1 else ""
    log = f" (log: {gate.log_path})" if gate.log_path else ""
    return f"required gate {gate.tier}/{gate.name} {gate.status}: {failure_cause(gate)}{log}{more}"


GATE_PHASES = (Phase("gate", run_gate_phase),)
