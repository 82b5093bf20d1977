"""What a stopped night hands to a person: the files waiting for them, in the nightly output and in status."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair

BASE = {"a.py": lines("a"), "pkg/b.py": lines("b"), "c.py": lines("c")}
UPSTREAM = [{"a.py": lines("a", "up"), "pkg/b.py": lines("b", "up"), "c.py": lines("c", "up")}]
FORK = [{"a.py": lines("a", "fork"), "pkg/b.py": lines("b", "fork")}]  # c.py merges clean


@pytest.fixture
def stopped(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A night stopped for a person on two conflicted files (one in a folder), a third file merged clean."""
    pair = make_pair(tmp_path, BASE, UPSTREAM, FORK)
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump({"fork": {"branch": BRANCH}}))
    capsys.readouterr()
    return pair


def test_a_night_that_stops_for_a_person_names_its_files(stopped, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nightly", "--repo", str(stopped.repo), "--ref", "main"]) == 4
    out = " ".join(capsys.readouterr().out.split())
    assert "waiting for a person: a.py, pkg/b.py" in out
    assert "c.py" not in out.split("waiting for a person:")[1].split("worktree:")[0]
    assert main(["status", "--repo", str(stopped.repo)]) == 0
    status = " ".join(capsys.readouterr().out.split())
    assert "waiting for a person: a.py, pkg/b.py" in status
    assert main(["status", "--repo", str(stopped.repo), "--json"]) == 0
    data = cli_data(capsys.readouterr().out)
    assert data["waiting_for_person"] == ["a.py", "pkg/b.py"]
    assert data["uncommitted"] == [] and data["promote_blockers"] == []


def test_the_json_night_names_them_and_a_resolved_file_leaves_the_list(
    stopped, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["nightly", "--repo", str(stopped.repo), "--ref", "main", "--json"]) == 4
    data = cli_data(capsys.readouterr().out)
    assert data["waiting_for_person"] == ["a.py", "pkg/b.py"]
    worktree = Path(data["record"]).parent  # the run folder; the worktree is in the record
    assert worktree.is_dir()
    assert main(["status", "--repo", str(stopped.repo), "--json"]) == 0
    record = cli_data(capsys.readouterr().out)
    for name, stem in (("a.py", "a"), ("pkg/b.py", "b")):
        (Path(record["worktree"]) / name).write_text(lines(stem, "fork", "up"))
    assert main(["resume", "--repo", str(stopped.repo)]) == 0
    capsys.readouterr()
    assert main(["status", "--repo", str(stopped.repo), "--json"]) == 0
    assert cli_data(capsys.readouterr().out)["waiting_for_person"] == []
