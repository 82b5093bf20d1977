"""What changed between two runs: counts, statuses and timings, side by side.

Both runs go through the same report view, so the comparison reads only normalised
values and never a phase's raw JSON.
"""

from __future__ import annotations

from typing import Any

from ds4sync.report.view import COUNT_KEYS, ReportView, View

Value = str | int | float | None
NOT_RUN = "not run"


class Change(View):
    """One compared item: its section, name, value in run A and run B, and the difference."""

    section: str
    item: str
    before: Value = None
    after: Value = None
    delta: float | None = None

    @property
    def changed(self) -> bool:
        """Whether the two runs differ on this item."""
        return self.before != self.after


class Comparison(View):
    """Run A against run B: every item compared, in report order."""

    run_a: str
    run_b: str
    changes: tuple[Change, ...]

    @property
    def changed(self) -> tuple[Change, ...]:
        """Only the items that differ."""
        return tuple(c for c in self.changes if c.changed)

    @property
    def unchanged(self) -> tuple[Change, ...]:
        """The items equal in both runs."""
        return tuple(c for c in self.changes if not c.changed)


def compare_views(a: ReportView, b: ReportView) -> Comparison:
    """Compare two report views item by item.

    A gate, build or probe that ran in one run only gives one row, its status against
    ``not run``; its counts are not listed item by item.
    """
    left, right = _items(a), _items(b)
    keys = list(left) + [k for k in right if k not in left]
    changes = []
    for section, item in keys:
        status = (section, "status")
        one_sided = status not in left or status not in right
        if item != "status" and one_sided and (status in left or status in right):
            continue
        before = left.get((section, item), NOT_RUN)
        after = right.get((section, item), NOT_RUN)
        delta = after - before if _numeric(before) and _numeric(after) else None  # type: ignore[operator]
        changes.append(
            Change(
                section=section,
                item=item,
                before=before,
                after=after,
                delta=round(delta, 6) if delta is not None else None,
            )
        )
    return Comparison(run_a=a.run.run_id, run_b=b.run.run_id, changes=tuple(changes))


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _items(view: ReportView) -> dict[tuple[str, str], Value]:
    items: dict[tuple[str, str], Value] = {
        ("run", "status"): view.run.status,
        ("run", "upstream SHA"): view.upstream.sha,
        ("run", "fork SHA"): view.fork.sha,
    }
    if view.merge:
        m = view.merge
        items.update(
            {
                ("merge", "merge commit"): m.merge_commit,
                ("merge", "upstream commits"): m.upstream_commits,
                ("merge", "fork-only commits"): m.fork_commits,
                ("merge", "conflicted files"): len(m.conflicts),
                ("merge", "semantic overlaps"): len(m.overlaps),
            }
        )
        items.update({("merge", f"resolved: {t.label}"): t.count for t in m.resolutions})
    for p in view.integration.patchsets:
        items[("patch-sets", p.id)] = p.status
    build = view.validation.build
    if build:
        items.update({("build", "status"): build.status, ("build", "duration (s)"): build.duration_s})
        items.update({("build", c.name): f"{c.passed}/{c.total}" for c in build.checks})
    for g in view.validation.gates:
        section = f"gate {g.name}"
        items[(section, "status")] = g.status
        items.update({(section, key): getattr(g, key) for key in COUNT_KEYS})
        items[(section, "duration (s)")] = g.duration_s
    for group in view.validation.probes:
        for probe in group.probes:
            items[(f"{group.name}: {probe.name}", "status")] = probe.status
            items[(f"{group.name}: {probe.name}", "value")] = f"{probe.value} {probe.unit}".strip()
        for row in group.ab:
            items[(f"{group.name}: {row.metric}", "status")] = row.verdict
            items[(f"{group.name}: {row.metric}", "delta %")] = row.delta_pct
    return items
