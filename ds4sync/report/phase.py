"""The report phase: the report's place in the run, after the gates and before publish."""

from __future__ import annotations

from ds4sync.report.files import report_files, templates_dir
from ds4sync.runner import Phase, PhaseOutcome, RunContext


def report(ctx: RunContext) -> PhaseOutcome:
    """Name where the PR description and the JSON summary go (``report.md``, ``summary.json`` in the run folder).

    The runner writes them once the run stops (an always-run step of :func:`ds4sync.runner.run_phases`),
    so that they state the status the run ended with; this phase checks first that the profile has the
    report templates (a ConfigError fails it, naming the folder).
    """
    templates_dir(ctx.ws.profile)
    files = report_files(ctx.ws.store, ctx.record.run_id)
    return PhaseOutcome("done", f"report written to {files.path}", result=files)


REPORT_PHASES = (Phase("report", report),)
