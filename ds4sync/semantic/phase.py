"""The ``semantic`` phase: the semantic check on the resolved sync worktree, after verify and before the build.

A blocker fails the run unless the profile acknowledges it, with a reason, in
``patches/semantic.yaml``::

    acknowledged:
      - finding: "call-contract:vllm/x.py:vllm.y.Foo"   # SemanticFinding.key: <kind>:<path>:<symbol>
        reason: "Foo is only built by the CPU path, which this fork does not ship"

The report shows each acknowledged finding with its reason.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ds4sync.core.errors import ConfigError
from ds4sync.core.model import FrozenModel, read_yaml, updated, validate
from ds4sync.models.semantic_results import SemanticResult
from ds4sync.runner import Phase, PhaseOutcome, RunContext

#: The profile's acknowledgements, beside the patch-sets.
ACK_FILE = "semantic.yaml"


class Acknowledgement(FrozenModel):
    """One finding the fork accepts: its :attr:`SemanticFinding.key` and why it is no break."""

    finding: str = Field(min_length=3)
    reason: str = Field(min_length=1)


class SemanticSettings(FrozenModel):
    """``patches/semantic.yaml``: findings acknowledged with a reason."""

    acknowledged: tuple[Acknowledgement, ...] = ()


def load_settings(patches: Path) -> SemanticSettings:
    """The acknowledgements in ``patches/semantic.yaml``; none when the file is absent.

    Raises:
        ConfigError: the file is not valid (its path, the key and what was expected).
    """
    path = patches / ACK_FILE
    if not path.is_file():
        return SemanticSettings()
    return validate(SemanticSettings, read_yaml(path) or {}, source=path)


def acknowledge(result: SemanticResult, settings: SemanticSettings) -> SemanticResult:
    """``result`` with the acknowledged findings marked (their reason set); the rest unchanged."""
    reasons = {a.finding: a.reason for a in settings.acknowledged}
    findings = [updated(f, acknowledged=reasons[f.key]) if f.key in reasons else f for f in result.findings]
    return updated(result, findings=findings)


def semantic(ctx: RunContext) -> PhaseOutcome:
    """The semantic check of the sync worktree as it is (resolved, patch-sets replayed) against both sides."""
    from ds4sync.patchsets.model import load_catalogue
    from ds4sync.semantic.check import check_merge
    from ds4sync.semantic.coverage import patchset_coverage

    patches = ctx.ws.profile / "patches"
    try:
        settings = load_settings(patches)
        patchsets = load_catalogue(patches)[1] if patches.is_dir() else []
    except ConfigError as exc:
        return PhaseOutcome("needs-person", exc.one_line(), next_steps=("fix the file, then `ds4sync resume`",))
    wt = ctx.worktree
    tree, _untracked = wt.worktree_tree(untracked=False)
    ctx.progress("semantic check: imports, removed definitions, call contracts, lint, fork wiring")
    result = check_merge(
        wt,
        fork=ctx.record.fork.head_before,
        upstream=ctx.record.upstream.sha,
        merged=tree,
        coverage=patchset_coverage(wt, patchsets),
    )
    result = acknowledge(result, settings)
    message = semantic_message(result)
    if result.ok:
        return PhaseOutcome("done", message, result=result)
    return PhaseOutcome(
        "failed",
        message,
        result=result,
        details=tuple(f.line_text() for f in result.blockers()),
        next_steps=(
            "fix each break in the sync worktree, commit, and `ds4sync resume`",
            f"or acknowledge a finding with a reason in {patches / ACK_FILE} (finding: <kind>:<path>:<symbol>)",
        ),
    )


def semantic_message(result: SemanticResult) -> str:
    """One line: blockers, acknowledged, warnings, and what was read."""
    acked = sum(1 for f in result.findings if f.acknowledged)
    warnings = sum(1 for f in result.findings if f.severity == "warning")
    return (
        f"{len(result.blockers())} semantic break(s), {acked} acknowledged, {warnings} warning(s) "
        f"in {result.files_checked} fork-touched Python files ({result.seconds:.1f}s)"
    )


SEMANTIC_PHASES = (Phase("semantic", semantic),)
