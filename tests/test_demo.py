"""`ds4sync demo` runs the real scenario end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DemoRun

pytestmark = pytest.mark.slow  # compiles, builds or runs a whole pipeline: seconds to minutes


def test_demo_runs_both_syncs(demo_run: DemoRun) -> None:
    assert demo_run.code == 0
    out = demo_run.out
    if "build: 1/1 imports" in out:  # the build ran: its steps were shown as they went, in both syncs
        # Whole lines: a step that outlasts the progress clock (a loaded machine) adds "<step>, N s" lines.
        lines = demo_run.err.splitlines()
        assert lines.count("· build: install") == 2 and lines.count("· build: proof: 2 op schemas") == 2
    records = sorted((demo_run.workdir / "fork" / ".git" / "ds4sync" / "runs").glob("*/record.json"))
    assert len(records) == 2
    by_upstream = {}
    for path in records:
        record = json.loads(path.read_text())
        assert record["status"] in ("done", "paused")
        by_upstream[record["results"]["merge"]["upstream_commits"]] = record["results"]["merge"]
    first, second = by_upstream[2], by_upstream[6]
    assert [(c["path"], c["resolution"]) for c in first["conflicts"]] == [("vllm/envs.py", "person")]
    resolutions = {c["path"]: (c["kind"], c["resolution"]) for c in second["conflicts"]}
    assert resolutions == {
        "vllm/envs.py": ("content", "recorded"),
        "docs/install.md": ("content", "rule"),
        "vllm/legacy/eager_scratch.py": ("modify/delete", "rule"),
    }
    assert [o["path"] for o in second["overlaps"]] == ["vllm/models/deepseek_v4/attention.py"]
    assert "record:" in out and "untouched" in out
    second_record = next(
        json.loads(p.read_text())
        for p in records
        if json.loads(p.read_text())["results"]["merge"]["upstream_commits"] == 6
    )
    replay = {e["id"]: e["status"] for e in second_record["results"]["replay"]["entries"]}
    assert replay == {
        "flashinfer-0-6-18": "landed-upstream",
        "larger-scratch-pool": "landed-upstream",
        "sm120-sparse-decode": "retained",
        "sm120-attention-logging": "adapted",
    }
    assert second_record["results"]["verify"]["totals"]["violated"] == 0
    gates = second_record["results"]["gates"]["unit"]["gates"]
    assert [(g["name"], g["status"]) for g in gates] == [
        ("compileall", "passed"),
        ("envs-kept", "passed"),
        ("diff-check", "passed"),
    ]
    report = Path(second_record["results"]["report"]["path"]) if "report" in second_record["results"] else None
    assert "report:" in out and (report is None or report.is_file())
    assert second_record["upstream"]["branch"] == "main"  # asked by SHA; the report names the branch
    if report is not None:
        assert report.read_text().startswith("# Sync demo/fork:ds4-sm120 with demo/upstream main")
