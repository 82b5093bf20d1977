"""The whole run in one screen: the sync's phases, in the order a run goes through them.

    merge (prepare, merge, resolve, commit) → replay → verify → semantic → build → gate → report → publish

Each phase is a :class:`ds4sync.runner.Phase`; ``ds4sync.runner.run_phases`` runs them, saving the
run record after each, and ``resume`` starts at the first one not finished. ``promote`` is not a
phase: it is the one command that moves the fork branch, after a person or the nightly job says so.
"""

from __future__ import annotations

from ds4sync.gates.phase import GATE_PHASES
from ds4sync.merge.phases import MERGE_PHASES
from ds4sync.native.phase import BUILD_PHASES
from ds4sync.patchsets.replay import PATCHSET_PHASES
from ds4sync.publish.phase import PUBLISH_PHASES
from ds4sync.report.files import report_files, templates_dir
from ds4sync.runner import Phase, PhaseOutcome, RunContext
from ds4sync.semantic.phase import SEMANTIC_PHASES


def report(ctx: RunContext) -> PhaseOutcome:
    """The report phase: name where the PR description and the JSON summary go (``report.md``,
    ``summary.json`` in the run folder).

    The runner writes them once the run stops (an always-run step of :func:`ds4sync.runner.run_phases`),
    so that they state the status the run ended with; this phase checks first that the profile has the
    report templates (a ConfigError fails it, naming the folder).
    """
    templates_dir(ctx.ws.profile)
    files = report_files(ctx.ws.store, ctx.record.run_id)
    return PhaseOutcome("done", f"report written to {files.path}", result=files)


REPORT_PHASES = (Phase("report", report),)

PHASES: tuple[Phase, ...] = (
    MERGE_PHASES  # prepare, merge, resolve, commit
    + PATCHSET_PHASES  # replay, verify
    + SEMANTIC_PHASES  # semantic
    + BUILD_PHASES  # build
    + GATE_PHASES  # gate
    + REPORT_PHASES  # report
    + PUBLISH_PHASES  # publish
)

#: The last phase ``ds4sync merge`` runs before handing over to ``resume`` (build, gates, report).
MERGE_STOP_PHASE = "semantic"
