"""The report view reads phase results defensively: other shapes, wrong types, missing phases."""

from __future__ import annotations

from pathlib import Path

from ds4sync.report import render_report, report_view
from tests.report.records import base_record, merge_summary, rich_record


def _record(**results) -> dict:
    record = base_record()
    record.results = dict(results)
    return record.model_dump(mode="json")


def test_every_section_says_not_run_when_only_the_record_exists(templates: Path) -> None:
    text = render_report(_record(), templates_dir=templates)
    for line in (
        "The merge has not run yet",
        "Not run: there is no merge yet.",
        "Patch-sets: not run",
        "Duplicate-work check\n\nNot run:",
        "Native build: not run.",
        "No commands recorded",
        "Gate tiers not run: static, unit, gpu, kernel, serving, perf.",
    ):
        assert line in text
    view = report_view(_record())
    assert view.merge is None and view.duplicate is None and view.validation.build is None
    assert [i.text for i in view.remaining][:2] == ["merge: not run", "patch-set replay and verify: not run"]


def test_gates_as_a_flat_list_with_top_level_counts() -> None:
    gates = [
        {
            "name": "a",
            "tier": "gpu",
            "status": "passed",
            "passed": "12",
            "deselected": 3.0,
            "duration": "4.5",
            "command": "pytest -q tests/a",
            "env_overrides": ["CUDA_VISIBLE_DEVICES=1", "junk"],
        },
        {"gate": "b", "status": "error", "error": 1, "message": "timed out after the gate's timeout"},
        "not a gate",
        42,
    ]
    view = report_view(_record(gates=gates))
    tiers = {t.tier: t for t in view.validation.tiers}
    a = tiers["gpu"].gates[0]
    assert (a.passed, a.deselected, a.duration_s) == (12, 3, 4.5)
    assert a.command is not None and a.command.text == "CUDA_VISIBLE_DEVICES=1 pytest -q tests/a"
    b = tiers["unit"].gates[0]
    assert (b.name, b.status, b.errors, b.reason) == ("b", "error", 1, "timed out after the gate's timeout")
    assert tiers["unit"].status == "error"
    assert "b (unit): error (timed out after the gate's timeout)" in [i.text for i in view.remaining]


def test_gates_nested_under_tiers_and_gates_keys() -> None:
    data = {
        "tiers": {
            "unit": {"gates": [{"name": "u", "status": "failed", "counts": {"failed": 2, "passed": 1}}]},
            "perf": "garbage",
        }
    }
    view = report_view(_record(gates=data))
    assert [(t.tier, [g.name for g in t.gates]) for t in view.validation.tiers] == [("unit", ["u"])]
    assert view.validation.tiers[0].gates[0].failed == 2
    assert "perf" in view.validation.tiers_not_run


def test_patchsets_keyed_by_id_and_verify_results_joined() -> None:
    replay = {
        "alpha": {
            "status": "retained",
            "meta": {"title": "Alpha", "rationale": "why alpha", "upstream": {"pr": "vllm-project/vllm#1"}},
        },
        "beta": {"outcome": "needs-adaptation"},
    }
    verify = [
        {
            "id": "alpha",
            "status": "passed",
            "invariants": [{"description": "symbol x", "ok": True}, {"name": "pattern y", "status": "broken"}],
        }
    ]
    view = report_view(_record(replay=replay, verify=verify))
    alpha, beta = view.integration.patchsets
    assert (alpha.title, alpha.status, alpha.rationale, alpha.upstream) == (
        "Alpha",
        "retained",
        "why alpha",
        "vllm-project/vllm#1",
    )
    assert [(i.name, i.status) for i in alpha.invariants] == [("symbol x", "held"), ("pattern y", "broken")]
    assert alpha.invariants_held == 1
    assert beta.status == "needs-adaptation"
    texts = [i.text for i in view.remaining]
    assert "patch-set alpha: invariants held 1/2" in texts
    assert "patch-set beta: needs adaptation before the sync can go on" in texts


def test_build_checks_from_a_summary_string_and_item_lists() -> None:
    view = report_view(_record(build={"ok": True, "summary": "7/7 imports, 3/4 op schemas"}))
    build = view.validation.build
    assert build is not None and build.status == "passed"
    assert [(c.name, c.passed, c.total) for c in build.checks] == [("imports", 7, 7), ("op schemas", 3, 4)]
    items = {"checks": {"imports": [{"module": "m1", "status": "passed"}, {"module": "m2", "status": "failed"}]}}
    checks = report_view(_record(build=items)).validation.build.checks  # type: ignore[union-attr]
    assert [(c.name, c.passed, c.total, c.failed) for c in checks] == [("imports", 1, 2, ("m2",))]


def test_wrong_types_are_ignored_not_fatal(templates: Path) -> None:
    record = _record(
        merge={"conflicts": "nope", "overlaps": [None, {"path": "p", "fork_lines": "x"}], "upstream_commits": "many"},
        build=["not", "a", "mapping"],
        gates=7,
        serving={"probes": [{"value": 1.5}]},
        publish=[],
    )
    record["followups"] = ["junk", {"title": "later", "items": ["one more gate"], "results": {"gates": {}}}]
    text = render_report(record, templates_dir=templates)
    view = report_view(record)
    assert view.merge is not None and view.merge.upstream_commits is None and len(view.merge.overlaps) == 1
    assert view.validation.build is None
    assert view.validation.probes[0].probes[0].value == "1.5"
    assert "follow-up: later" in text and "- one more gate" in text


def test_followups_render_newest_last_with_dates(templates: Path) -> None:
    record = rich_record()
    record["followups"].insert(0, {"date": "2026-09-14", "title": "more gates"})
    record["followups"].append({"date": "2026-09-11", "title": "first build"})
    text = render_report(record, templates_dir=templates)
    order = [text.index(f"## {d} follow-up") for d in ("2026-09-11", "2026-09-12", "2026-09-14")]
    assert order == sorted(order)


def test_merge_counts_and_kinds_in_the_summary(templates: Path) -> None:
    text = render_report(_record(merge=merge_summary().model_dump(mode="json")), templates_dir=templates)
    assert (
        "It brings in 266 upstream commits on top of 41 fork-only commits. The merge required resolving "
        "8 conflicted files (6 content, 1 modify/delete, 1 rename/modify; resolutions: recorded 3, person 3, "
        "rule 2), plus 3 semantic overlaps in automatically merged files."
    ) in text


def test_a_tier_run_by_a_later_followup_is_no_longer_remaining() -> None:
    record = rich_record()
    assert "kernel tier: not run" in [i.text for i in report_view(record).remaining]
    record["followups"].append(
        {
            "date": "2026-09-13",
            "title": "kernel checks",
            "results": {"kernels": {"status": "passed", "probes": [{"name": "sparse_mla_decode", "status": "passed"}]}},
        }
    )
    texts = [i.text for i in report_view(record).remaining]
    assert "kernel tier: not run" not in texts
    assert "sparse-attention (gpu): incomplete (only environment-only failures)" in texts
