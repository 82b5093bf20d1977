"""Rich rendering of the semantic check's findings (``plan``), beside the conflicts."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ds4sync.models.semantic_results import SemanticResult

MAX_ROWS = 40


def semantic_findings(console: Console, result: SemanticResult | None) -> None:
    """A table of findings (blockers first) with their upstream culprit, or one line saying none were found."""
    if result is None:
        return
    head = (
        f"semantic check: {len(result.blockers())} break(s), {len(result.warnings())} warning(s) in "
        f"{result.files_checked} fork-touched Python files ({len(result.unknown)} conflicted paths not read, "
        f"{result.seconds:.1f}s)"
    )
    console.print(head)
    if not result.findings:
        return
    table = Table(title="Semantic conflicts (merged cleanly, broken)")
    for column in ("where", "kind", "finding", "upstream change"):
        table.add_column(column)
    ranked = sorted(result.findings, key=lambda f: (not f.blocking(), f.path, f.line))
    for f in ranked[:MAX_ROWS]:
        culprit = f.culprit.label() if f.culprit else f.origin
        kind = f.kind if f.blocking() else f"{f.kind} ({'acknowledged' if f.acknowledged else f.severity})"
        table.add_row(f"{f.path}:{f.line}", kind, f.message, culprit)
    if len(ranked) > MAX_ROWS:
        table.caption = f"{len(ranked) - MAX_ROWS} more in --json"
    console.print(table)
