"""``ds4sync merge`` runs the semantic check after verify: a break fails the run; an acknowledged one does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4sync.cli import main
from ds4sync.models.record import RecordStore
from ds4sync.report.render import render_report
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, Pair, make_pair

BASE = {
    "pkg/__init__.py": "",
    "pkg/helpers.py": "def keep():\n    return 1\n\n\ndef gone():\n    return 2\n",
}
UPSTREAM = [{"pkg/helpers.py": "def keep():\n    return 1\n"}]
FORK = [{"pkg/fork.py": "from pkg.helpers import gone, keep\n\n\ndef f():\n    return gone() + keep()\n"}]
pytestmark = pytest.mark.slow  # three real `ds4sync merge` runs

TEMPLATES = Path(__file__).resolve().parents[2] / "reports"
KEY = "unresolved-import:pkg/fork.py:pkg.helpers.gone"


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    return make_pair(tmp_path, BASE, UPSTREAM, FORK)


def _merge(pair: Pair, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    code = main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json", *extra])
    return code, cli_data(capsys.readouterr().out)


def test_a_break_fails_the_merge_with_its_finding_recorded(pair: Pair, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = _merge(pair, capsys)
    assert code != 0
    record = RecordStore(Path(data["record"]).parent.parent.parent).load(data["run_id"])
    assert record.phase("semantic").status == "failed"
    result = record.results.semantic
    assert result is not None
    assert [(f.key, f.severity, f.origin) for f in result.findings] == [(KEY, "blocker", "upstream")]
    assert record.phase("build").status == "pending"
    report = render_report(record, templates_dir=TEMPLATES)
    section = report.split("## Semantic conflicts (merged cleanly, broken)", 1)[1].split("\n## ", 1)[0]
    assert "`pkg/fork.py:1` | unresolved-import |" in section
    assert "upstream change 0" in section and "1 break," in section


def test_an_acknowledged_break_passes_and_keeps_its_reason(
    pair: Pair, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    profile = tmp_path / "profile"
    (profile / "patches").mkdir(parents=True)
    (profile / "patches" / "semantic.yaml").write_text(
        f'acknowledged:\n  - finding: "{KEY}"\n    reason: "gone is vendored back by the build"\n'
    )
    code, data = _merge(pair, capsys, "--profile", str(profile))
    assert code == 0, data
    record = RecordStore(Path(data["record"]).parent.parent.parent).load(data["run_id"])
    result = record.results.semantic
    assert result is not None and result.ok
    assert [(f.key, f.acknowledged) for f in result.findings] == [(KEY, "gone is vendored back by the build")]
    report = render_report(record, templates_dir=TEMPLATES)
    assert "unresolved-import (acknowledged: gone is vendored back by the build)" in report
    assert "0 breaks, 1 acknowledged" in report


def test_a_bad_acknowledgement_file_names_the_key(
    pair: Pair, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    profile = tmp_path / "profile"
    (profile / "patches").mkdir(parents=True)
    (profile / "patches" / "semantic.yaml").write_text('acknowledged:\n  - finding: "x:y:z"\n')
    code, data = _merge(pair, capsys, "--profile", str(profile))
    assert code != 0
    record = RecordStore(Path(data["record"]).parent.parent.parent).load(data["run_id"])
    assert record.phase("semantic").status == "needs-person"
    assert "reason" in record.phase("semantic").message


def test_plan_lists_findings_beside_the_conflicts(pair: Pair, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json"]) == 0
    data = cli_data(capsys.readouterr().out)
    assert data["conflicts"] == []
    (finding,) = data["semantic"]["findings"]
    assert (finding["kind"], finding["path"], finding["symbol"]) == (
        "unresolved-import",
        "pkg/fork.py",
        "pkg.helpers.gone",
    )
    assert finding["culprit"]["subject"] == "upstream change 0"
    assert main(["plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Semantic conflicts (merged cleanly, broken)" in text and "pkg/fork.py:1" in text


def test_plan_without_the_semantic_check_predicts_the_same_merge(
    pair: Pair, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json"]
    assert main(argv) == 0
    full = cli_data(capsys.readouterr().out)
    assert main([*argv, "--no-semantic"]) == 0
    quick = cli_data(capsys.readouterr().out)
    assert full["semantic"]["findings"] and quick.get("semantic") is None
    drop = ("semantic", "plan_seconds")
    assert {k: v for k, v in quick.items() if k not in drop} == {k: v for k, v in full.items() if k not in drop}
    assert main([*argv[:-1], "--no-semantic"]) == 0
    assert "Semantic conflicts" not in capsys.readouterr().out
