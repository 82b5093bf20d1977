"""Rich rendering of patch-set listings and check reports (pure: console in, nothing else)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ds4sync.patchsets.model import PatchSet
from ds4sync.patchsets.results import CheckReport

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
        console.print(f"[dim]{report.applies_detail}[/]")
    scope = f" (branch {report.carry.branch})" if report.carry.branch else ""
    table = Table(title=f"patch-sets on {report.tree}{scope}")
    for column in ("patch-set", "status", "invariants held", "tests"):
        table.add_column(column, no_wrap=True)
    for ps in report.patchsets:
        held = sum(r.status == "holds" for r in ps.invariants)
        checked = sum(r.status != "deferred" for r in ps.invariants)
        table.add_row(ps.id, f"[{_STYLE[ps.status]}]{ps.status}[/]", f"{held}/{checked}", str(len(ps.tests)))
    console.print(table)
    for ps in report.patchsets:
        if ps.status in ("not-carried", "landed-upstream"):
            console.print(f"[{_STYLE[ps.status]}]{ps.status}[/] {escape(ps.id)}: {escape(ps.detail)}", highlight=False)
            if not verbose:
                continue
        for r in ps.invariants:
            if r.status == "violated" or (verbose and r.status == "holds"):
                tag = (
                    "[red]violated[/]"
                    if r.blocking_violation and ps.status == "violated"
                    else "[yellow]advisory[/]"
                    if r.status == "violated" and ps.status in ("violated", "advisory-violations")
                    else f"[dim]{r.status} ({ps.status})[/]"
                    if ps.status not in ("holds", "violated", "advisory-violations")
                    else "[green]holds[/]"
                )
                console.print(f"{tag} {escape(r.line())}", highlight=False)
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
