"""`report --compare`: what changed between two runs (counts, statuses, timings)."""

from __future__ import annotations

from ds4sync.report import report_view
from ds4sync.report.compare import NOT_RUN, compare_views
from tests.report.records import failing_record, rich_record


def _changes(a: dict, b: dict) -> dict[tuple[str, str], tuple]:
    cmp = compare_views(report_view(a), report_view(b))
    return {(c.section, c.item): (c.before, c.after, c.delta) for c in cmp.changed}


def test_counts_statuses_and_timings_that_changed() -> None:
    changes = _changes(rich_record(), failing_record())
    assert changes[("run", "status")] == ("done", "failed", None)
    assert changes[("gate focused-unit", "passed")] == (309, 301, -8)
    assert changes[("gate focused-unit", "failed")] == (0, 1, 1)
    assert changes[("gate focused-unit", "duration (s)")] == (212.6, 98.0, -114.6)
    assert changes[("build", "op schemas")] == ("4/4", "3/4", None)
    assert changes[("patch-sets", "ds4-graph-default")] == ("reapplied", "needs-adaptation", None)


def test_a_gate_in_one_run_only_is_one_status_row() -> None:
    changes = _changes(rich_record(), failing_record())
    assert changes[("gate hash-routing", "status")] == ("passed", NOT_RUN, None)
    assert not any(section == "gate hash-routing" and item != "status" for section, item in changes)
    assert changes[("serving: KV cache tokens", "status")] == ("passed", NOT_RUN, None)


def test_identical_runs_have_no_changes() -> None:
    cmp = compare_views(report_view(rich_record()), report_view(rich_record()))
    assert cmp.changed == () and len(cmp.unchanged) == len(cmp.changes) > 0


def test_probe_values_and_ab_deltas_are_compared() -> None:
    later = rich_record()
    later["results"]["serving"]["probes"][4]["value"] = 1700000
    later["results"]["perf"]["ab"][0].update(delta_pct=1.04, verdict="improvement")
    changes = _changes(rich_record(), later)
    assert changes[("serving: KV cache tokens", "value")] == ("1,778,916 tokens", "1,700,000 tokens", None)
    assert changes[("perf: decode tok/s (3x2048, C=1)", "delta %")][:2] == (-2.07, 1.04)
    assert changes[("perf: decode tok/s (3x2048, C=1)", "status")] == ("inconclusive", "improvement", None)
