"""Messages that send a person the right way: the sync branch of a run in another state dir, an unreadable run
record (the previous copy kept beside it), the ref an upstream name was read from, and an index.lock that a live
git still holds (the one stale-lock rule leaves it alone)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ds4sync.cli import main
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair


@pytest.fixture
def pair(tmp_path: Path):
    return make_pair(tmp_path, {"f.py": lines("a")}, [{"f.py": lines("a", "up")}], [{"g.py": lines("fork")}])


def _one_error(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return code, err


@pytest.mark.parametrize("how", ["option", "config"])
def test_the_sync_branch_of_another_state_dirs_run_is_named_with_that_state_dir(
    pair, tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    other = tmp_path / "other-state"
    repo = str(pair.repo)
    if how == "option":
        assert main(["merge", "upstream/main", "--repo", repo, "--branch", BRANCH, "--state-dir", str(other)]) == 0
    else:
        (pair.repo / "ds4sync.yaml").write_text(f"fork: {{branch: {BRANCH}}}\nstate_dir: {other}\n")
        assert main(["merge", "upstream/main", "--repo", repo]) == 0
        (pair.repo / "ds4sync.yaml").unlink()
    (record,) = other.glob("runs/*/record.json")
    run_id = record.parent.name
    capsys.readouterr()
    code, err = _one_error(capsys, "merge", "upstream/main", "--repo", repo, "--branch", BRANCH)
    assert code == 2 and "not made by ds4sync" not in err, err
    assert f"run {run_id} (paused) of the state dir {other}" in err, err
    assert f"--state-dir {other} --run {run_id}" in err
    # the command it names works, and then the sync goes ahead
    assert main(["abort", "--state-dir", str(other), "--run", run_id, "--repo", repo]) == 0
    assert main(["merge", "upstream/main", "--repo", repo, "--branch", BRANCH]) == 0


@pytest.mark.parametrize("damage", ["truncated", "not-utf8", "empty"])
def test_an_unreadable_record_falls_back_to_the_previous_one(pair, capsys: pytest.CaptureFixture[str], damage: str):
    repo = str(pair.repo)
    assert main(["merge", "upstream/main", "--repo", repo, "--branch", BRANCH]) == 0
    (record,) = (pair.repo / ".git" / "ds4sync" / "runs").glob("*/record.json")
    previous = record.with_name("record.prev.json")
    assert json.loads(previous.read_text())["run_id"] == record.parent.name  # kept at every save
    text = record.read_bytes()
    record.write_bytes({"truncated": text[: len(text) // 2], "not-utf8": b"\xff" + text, "empty": b""}[damage])
    capsys.readouterr()
    assert main(["status", "--repo", repo]) == 0
    err = capsys.readouterr().err
    assert "record.prev.json" in err and "using the copy from before its last save" in err, err
    assert main(["resume", "--repo", repo]) == 0  # and the run goes on from it
    assert json.loads(record.read_text())["status"] == "done"


@pytest.mark.parametrize("prev", ["missing", "damaged"])
def test_an_unreadable_record_without_a_copy_says_what_to_do_instead(
    pair, capsys: pytest.CaptureFixture[str], prev: str
) -> None:
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) == 0
    (record,) = (pair.repo / ".git" / "ds4sync" / "runs").glob("*/record.json")
    record.write_text(record.read_text()[:40])
    previous = record.with_name("record.prev.json")
    previous.unlink() if prev == "missing" else previous.write_text("{")
    capsys.readouterr()
    code, err = _one_error(capsys, "status", "--repo", str(pair.repo))
    assert code == 2 and "from the backup" not in err and "record.prev.json" in err, err
    assert ("does not exist" if prev == "missing" else "is not readable either") in err
    assert "git worktree remove" in err and str(record.parent) in err


@pytest.mark.parametrize(
    ("ref", "make", "expected"),
    [
        ("upmain", ["branch", "upmain", "upstream/main"], "refs/heads/upmain"),
        ("v1", ["tag", "v1", "upstream/main"], "refs/tags/v1"),
        ("upmain~0", ["branch", "upmain", "upstream/main"], "upmain~0"),  # an expression names no ref
    ],
)
def test_upstream_resolved_from_names_the_ref(pair, capsys: pytest.CaptureFixture[str], ref, make, expected) -> None:
    git = lambda *a: subprocess.run(["git", "-C", str(pair.repo), *a], check=True, capture_output=True)  # noqa: E731
    git(*make)
    git("remote", "remove", "upstream")  # no remote, no url: the name is resolved here
    assert main(["plan", ref, "--repo", str(pair.repo), "--branch", BRANCH, "--json"]) == 0
    said = cli_data(capsys.readouterr().out)["upstream_resolved_from"]
    assert said == expected and "--end-of-options" not in said


HOLD = "import sys, time\nf = open(sys.argv[1], 'wb')\nprint('held', flush=True)\ntime.sleep(60)\n"


def test_an_index_lock_a_live_process_holds_is_left_alone_and_a_dead_ones_is_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = make_pair(tmp_path, {"f.py": lines("a", "b")}, [{"f.py": lines("a", "up")}], [{"f.py": lines("a", "x")}])
    repo = str(pair.repo)
    assert main(["merge", "upstream/main", "--repo", repo, "--branch", BRANCH]) == 4
    (record,) = (pair.repo / ".git" / "ds4sync" / "runs").glob("*/record.json")
    worktree = Path(json.loads(record.read_text())["worktree"])
    (worktree / "f.py").write_text(lines("a", "up", "x"))
    gitdir = subprocess.run(
        ["git", "-C", str(worktree), "rev-parse", "--absolute-git-dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    lock = Path(gitdir) / "index.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        capsys.readouterr()
        code, err = _one_error(capsys, "resume", "--repo", repo)
        assert code == 2 and f"held by a running process (pid {holder.pid})" in err and lock.exists(), err
    finally:
        holder.kill()
        holder.wait()
    assert lock.exists()  # its holder is dead now: stale by the one rule
    assert main(["resume", "--repo", repo]) == 0
    assert not lock.exists() and "removed a stale" in capsys.readouterr().err
