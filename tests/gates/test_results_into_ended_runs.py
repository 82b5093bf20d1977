"""A tier run by hand in the worktree of a run that ended (failed), or merged with `gate --merge-results`, is
added to that run when it proves the run's head (same commit, same tree); anything else is refused in one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ds4sync.cli import main
from ds4sync.models.record import RecordStore
from tests.report.pipeline_runs import failed_run

pytestmark = pytest.mark.slow  # each test makes a failed nightly (a real sync and its gates): seconds of CPU


def _ended(tmp_path: Path) -> tuple[RecordStore, str, Path]:
    store, run_id = failed_run(tmp_path)
    record = store.load(run_id)
    assert record.status == "failed" and not record.active and Path(record.worktree).is_dir()
    return store, run_id, Path(record.worktree)


def _gates(store: RecordStore, run_id: str) -> dict[str, tuple[str, str | None]]:
    return {g.name: (g.status, g.commit) for g in store.load(run_id).results.gates["unit"].gates}


#: Ways a checkout stops being the run's head: a file the commit lacks, a changed tracked file, another commit.
NOT_THE_HEAD = {
    "untracked": (lambda wt: (wt / "scratch.py").write_text("X = 1\n"), "changes or untracked files no commit has"),
    "modified": (lambda wt: (wt / "a.py").write_text("NAMES = ['up']\n"), "changes or untracked files no commit has"),
}


def test_a_tier_run_by_hand_in_a_failed_runs_worktree_is_added_to_it(tmp_path: Path, capsys) -> None:
    store, run_id, worktree = _ended(tmp_path)
    before = _gates(store, run_id)
    assert before["names-kept"][0] == "failed"
    (worktree / "a.py").write_text("NAMES = ['base', 'up']\n")  # the person's fix, committed on the sync branch
    subprocess.run(["git", "commit", "-qam", "keep upstream's name"], cwd=worktree, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=worktree, capture_output=True, text=True).stdout.strip()
    assert main(["gate", "--tier", "unit", "--repo", str(worktree)]) == 0
    after = store.load(run_id)
    assert after.status == "failed"  # the run stays what it was; its record now holds the proof
    assert _gates(store, run_id) == {"names-kept": ("passed", head), "unit-tests": ("passed", head)}


@pytest.mark.parametrize("change", sorted(NOT_THE_HEAD))
def test_a_tier_run_by_hand_that_does_not_prove_the_head_is_refused(tmp_path: Path, capsys, change: str) -> None:
    store, run_id, worktree = _ended(tmp_path)
    before = _gates(store, run_id)
    make, words = NOT_THE_HEAD[change]
    make(worktree)
    capsys.readouterr()
    assert main(["gate", "--tier", "unit", "--repo", str(worktree)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"not added to run {run_id}: tier unit ran on" in err and words in err
    assert _gates(store, run_id) == before


def _artefact(tmp_path: Path, capsys, worktree: Path, name: str) -> Path:
    """What a CI job prints: `ds4sync gate --json` in a checkout of the sync branch, with its own state dir."""
    capsys.readouterr()
    main(["gate", "--tier", "unit", "--json", "--repo", str(worktree), "--state-dir", str(tmp_path / name)])
    path = tmp_path / f"{name}.json"
    path.write_text(capsys.readouterr().out)
    return path


def test_merged_results_are_added_to_a_failed_run_when_they_prove_its_head(tmp_path: Path, capsys) -> None:
    store, run_id, worktree = _ended(tmp_path)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=worktree, capture_output=True, text=True).stdout.strip()
    good = _artefact(tmp_path, capsys, worktree, "ci-clean")
    assert main(["gate", "--tier", "unit", "--merge-results", str(good), "--repo", str(worktree), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["data"]["tiers"] == {"unit": "failed"}
    assert {commit for _, commit in _gates(store, run_id).values()} == {head}


@pytest.mark.parametrize("change", [*sorted(NOT_THE_HEAD), "another commit"])
def test_merged_results_that_do_not_prove_the_head_are_refused_and_nothing_is_merged(
    tmp_path: Path, capsys, change: str
) -> None:
    store, run_id, worktree = _ended(tmp_path)
    if change == "another commit":
        good = _artefact(tmp_path, capsys, worktree, "ci-old")
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "moved"], cwd=worktree, check=True)
        words = "the run's head is"
        artefacts = [good]
    else:
        make, words = NOT_THE_HEAD[change]
        make(worktree)
        bad = _artefact(tmp_path, capsys, worktree, "ci-dirty")
        (worktree / "scratch.py").unlink(missing_ok=True)
        subprocess.run(["git", "checkout", "-q", "--", "."], cwd=worktree, check=True)
        artefacts = [bad]
    before = store.load(run_id).results.gates
    capsys.readouterr()
    assert main(["gate", "--tier", "unit", "--merge-results", *map(str, artefacts), "--repo", str(worktree)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) <= 3 and f"not added to run {run_id}" in err and words in err
    assert store.load(run_id).results.gates == before
