"""`ds4sync backport` carries a commit; `ds4sync backport evaluate` measures one: argument errors are one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from tests.scenarios import BRANCH, lines, make_pair


@pytest.fixture
def pair(tmp_path: Path):
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [])
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump({"fork": {"branch": BRANCH}}))
    return pair


def test_backport_needs_an_id(pair, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backport", "upstream/main", "--repo", str(pair.repo)]) == 2
    assert "--id" in capsys.readouterr().err


def test_backport_evaluate_needs_a_ref(pair, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backport", "evaluate", "--repo", str(pair.repo)]) == 2
    assert "needs the upstream commit" in capsys.readouterr().err


def test_backport_evaluate_without_a_run_or_branch(pair, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    serving = tmp_path / "serving.yaml"
    serving.write_text(yaml.safe_dump({"serving": {}}))
    code = main(["backport", "evaluate", "upstream/main", "--serving-config", str(serving), "--repo", str(pair.repo)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no active run" in err and "--onto" in err
