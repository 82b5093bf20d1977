"""Rich rendering of patch-set listings and check reports (pure: console in, nothing else)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ds4sync.models.patchsets_results import CheckReport
from ds4sync.patchsets.model import PatchSet

_STYLE = {
    "holds": "green",
    "violated": "red",
    "advisory-violations": "yellow",
    "landed-upstream": "cyan",
    "not-carried": "blue",
    "not-applicable": "dim",
}


def patchset_table(console: Console, patchsets: list[PatchSet]) -> None:
    """One row per patch-set: id, kind, invariants (advisory), patch files, dependencies, title."""
    table = Table(title=f"{len(patchsets)} patch-sets (dependency order)")
    for column in ("id", "kind", "invariants", "patches", "depends on", "title"):
        table.add_column(column, no_wrap=column in ("id", "kind"))
    for ps in patchsets:
        advisory = sum(inv.severity == "advisory" for inv in ps.invariants)
        table.add_row(
            ps.id,
            ps.kind,
            f"{len(ps.invariants)}" + (f" ({advisory} advisory)" if advisory else ""),
            str(len(ps.patches)) if ps.patches else "metadata only",
            ", ".join(ps.depends_on),
            ps.title,
        )
    console.print(table)


def check_report(console: Console, report: CheckReport, *, verbose: bool = False) -> None:
    """Per patch-set status, every violation (blocking and advisory), and the totals."""
    if not report.applicable:
        console.print(Text(report.applies_detail, style="dim"))
    scope = f" (branch {report.carry.branch})" if report.carry.branch else ""
    table = Table(title=f"patch-sets on {report.tree}{scope}")
    for column in ("patch-set", "status", "invariants held", "tests"):
        table.add_column(column, no_wrap=True)
    for ps in report.patchsets:
        held = sum(r.status == "holds" for r in ps.invariants)
        checked = sum(r.status != "deferred" for r in ps.invariants)
        table.add_row(ps.id, Text(ps.status, style=_STYLE[ps.status]), f"{held}/{checked}", str(len(ps.tests)))
    console.print(table)
    for ps in report.patchsets:
        if ps.status in ("not-carried", "landed-upstream"):
            console.print(Text.assemble((ps.status, _STYLE[ps.status]), f" {ps.id}: {ps.detail}"), highlight=False)
            if not verbose:
                continue
        for r in ps.invariants:
            if r.status == "violated" or (verbose and r.status == "holds"):
                tag = (
                    ("violated", "red")
                    if r.blocking_violation and ps.status == "violated"
                    else ("advisory", "yellow")
                    if r.status == "violated" and ps.status in ("violated", "advisory-violations")
                    else (f"{r.status} ({ps.status})", "dim")
                    if ps.status not in ("holds", "violated", "advisory-violations")
                    else ("holds", "green")
                )
                console.print(Text.assemble(tag, f" {r.line()}"), highlight=False)
    c = report.counts()
    by_status = ", ".join(
        f"{c['patchsets_' + s.replace('-', '_')]} {s}"
        for s in ("holds", "violated", "advisory-violations", "landed-upstream", "not-carried", "not-applicable")
        if c["patchsets_" + s.replace("-", "_")]
    )
    console.print(f"{c['patchsets']} patch-sets: {by_status or 'none'}")
    console.print(
        f"{c['invariants']} invariants: {c['holds']} hold, {c['violated']} violated, {c['advisory']} advisory "
        f"violations, {c['deferred']} deferred to gates, {c['not_counted']} not counted (patch-sets not carried, "
        f"landed or not applicable) ({report.duration_s:.2f} s)"
    )
