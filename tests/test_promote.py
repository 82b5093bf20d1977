"""Promote moves the fork branch forward only when the run is green and the fork did not move."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ds4sync.cli import main
from ds4sync.gates.model import GateResult, TierResult
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair


@pytest.fixture
def merged(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json"]) == 0
    return pair, cli_data(capsys.readouterr().out)


def test_promote_fast_forwards_and_keeps_rollback(merged, capsys: pytest.CaptureFixture[str]) -> None:
    pair, data = merged
    old = pair.fork.repo.commit(BRANCH).hexsha
    assert main(["promote", "--repo", str(pair.repo)]) == 0
    assert pair.fork.repo.commit(BRANCH).hexsha == data["merge_commit"]
    assert pair.fork.repo.git.rev_parse(f"refs/ds4sync/rollback/{data['run_id']}") == old
    record = json.loads(Path(data["record"]).read_text())
    assert record["results"]["promote"]["new_head"] == data["merge_commit"]


def test_promote_refuses_when_fork_moved(merged, capsys: pytest.CaptureFixture[str]) -> None:
    pair, _ = merged
    pair.fork.checkout(BRANCH)
    moved = pair.fork.commit({"c.py": lines("c")}, "someone pushed to the fork")
    pair.fork.checkout("main")
    assert main(["promote", "--repo", str(pair.repo)]) == 2
    assert "moved since the run started" in capsys.readouterr().err
    assert pair.fork.repo.commit(BRANCH).hexsha == moved


def test_promote_refuses_a_dirty_checkout_of_the_branch_naming_its_files(
    merged, capsys: pytest.CaptureFixture[str]
) -> None:
    pair, _ = merged
    pair.fork.checkout(BRANCH)
    head = pair.fork.repo.head.commit.hexsha
    (pair.repo / "b.py").write_text("edited by hand\n")
    assert main(["promote", "--repo", str(pair.repo)]) == 2
    err = capsys.readouterr().err
    assert "uncommitted changes: b.py" in err and "is checked out in" in err
    assert pair.fork.repo.commit(BRANCH).hexsha == head  # the branch did not move
    assert (pair.repo / "b.py").read_text() == "edited by hand\n"  # nothing of the person's is lost


def test_promote_refuses_failed_gates(merged, capsys: pytest.CaptureFixture[str]) -> None:
    pair, data = merged
    path = Path(data["record"])
    record = json.loads(path.read_text())
    gates = (
        GateResult(name="focused-unit", tier="unit", kind="pytest", status="failed"),
        GateResult(name="gated-fixtures", tier="unit", kind="pytest", status="incomplete"),
        GateResult(name="optional-soak", tier="unit", kind="pytest", status="failed", required=False),
    )
    tier = TierResult(tier="unit", repo=str(pair.repo), started_at="2026-01-01T00:00:00+00:00", duration_s=1.0)
    record["results"]["gates"] = {"unit": tier.model_copy(update={"gates": gates}).model_dump(mode="json")}
    path.write_text(json.dumps(record))
    old = pair.fork.repo.commit(BRANCH).hexsha
    assert main(["promote", "--repo", str(pair.repo)]) == 2
    err = capsys.readouterr().err
    assert "required gate unit/focused-unit is failed" in err
    assert "required gate unit/gated-fixtures is incomplete" in err and "optional-soak" not in err
    assert pair.fork.repo.commit(BRANCH).hexsha == old
    assert main(["promote", "--repo", str(pair.repo), "--allow-blockers"]) == 0
    assert "promoted despite" in json.loads(path.read_text())["notes"][-1]
