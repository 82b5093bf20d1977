"""The demo's loop part: two nights against the local GitHub stand-in (ds4sync.demo.forge_standin)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ds4sync.core.errors import ExitCode
from ds4sync.demo.loop import run_loop_demo


@pytest.mark.slow
def test_loop_demo_opens_then_updates_one_draft_pr_and_notifies_each_night(tmp_path: Path) -> None:
    result = run_loop_demo(tmp_path / "loop")
    assert result.exit_code == ExitCode.OK, result.lines
    opened = result.files["pr_opened"].read_text()
    updated = result.files["pr_updated"].read_text()
    for body in (opened, updated):
        assert "## Duplicate-work check" in body and "#44 deepseek_v4" in body and "@contributor-b" in body
        assert "phase publish is running" not in body  # described as the phase ends, not mid-way
    assert "#51 is this sync's own PR" in updated
    comment = result.files["comment"].read_text()
    assert "What changed since the last push" in comment and "| merge | upstream commits | 1 | 2 | +1 |" in comment
    notes = json.loads(result.files["notifications"].read_text())
    assert len(notes) == 2 and all(n["type"] == "success" for n in notes)
    assert "PR #51 opened" in notes[0]["message"] and "Promoted ds4-sm120" in notes[1]["message"]
    assert result.skip_s is not None and any(line.startswith("loop skip: nothing moved") for line in result.lines)
    assert result.files["trend"].stat().st_size > 1_000_000  # plotly.js inlined
