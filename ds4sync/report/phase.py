"""The report phase: write the PR description and the JSON summary into the run folder."""

from __future__ import annotations

from ds4sync.core.model import updated
from ds4sync.record import ReportResult
from ds4sync.report.files import write_report
from ds4sync.runner import Phase, PhaseOutcome, RunContext


def report(ctx: RunContext) -> PhaseOutcome:
    """Render ``report.md`` and ``summary.json`` next to the run record (secrets redacted).

    The report is the last phase, so it renders the run as it ends: ``done`` once every other
    phase is done or skipped (the record still says ``running`` while this phase runs).
    """
    record = ctx.record
    others = [state.status for name, state in record.phases.items() if name != "report"]
    if all(status in ("done", "skipped") for status in others):
        record = updated(record, status="done")
    path = write_report(ctx.ws.store, record, ctx.ws.profile)
    return PhaseOutcome(
        "done",
        f"report written to {path}",
        result=ReportResult(path=str(path), summary=str(path.with_name("summary.json"))),
    )


def rewrite(ctx: RunContext) -> None:
    """After the run stopped: render the report again, so that it states the run's final status."""
    write_report(ctx.ws.store, ctx.record, ctx.ws.profile)


REPORT_PHASES = (Phase("report", report, after_run=rewrite),)
