"""Kills that used to wedge a run, each recovered by the next command (small generated repos; the full fault
suite's kill points are in tests/test_faults.py):

- inside the shared store's export of a person's resolution: no half entry is ever visible in the store (a
  profile folder a team commits); the next ``resume`` (or ``abort``) leaves only whole entries;
- inside the first pointer write (and between phases): ``status`` says the run was interrupted and that
  ``resume`` goes on, never that a dead process "is alive";
- git killed inside ``git worktree remove`` (its folder half deleted, ``.git`` first): ``abort`` finishes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ds4sync.cli import main
from ds4sync.core.git import GitRepo
from tests.scenarios import BRANCH, lines, make_pair
from tests.timing import scaled

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # each case runs the real CLI in child processes, killed and recovered


def cli(repo: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process, with ``DS4SYNC_FAULT=fault`` (it SIGKILLs itself there)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DS4SYNC_FAULT", None)
    if fault:
        env["DS4SYNC_FAULT"] = fault
    argv = [sys.executable, "-m", "ds4sync.cli", *args, "--repo", str(repo)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=scaled(120))


@pytest.fixture
def conflict(tmp_path: Path):
    """A fork whose merge stops for a person on one content conflict, resolved in the worktree (not staged)."""
    pair = make_pair(tmp_path, {"f.py": lines("a", "b")}, [{"f.py": lines("a", "up")}], [{"f.py": lines("a", "fork")}])
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) == 4
    (record,) = (pair.repo / ".git" / "ds4sync" / "runs").glob("*/record.json")
    worktree = Path(json.loads(record.read_text())["worktree"])
    (worktree / "f.py").write_text(lines("a", "up", "fork"))
    return pair


def _store(pair) -> Path:
    return pair.repo / ".git" / "ds4sync" / "resolutions"


def _whole_entries(store: Path) -> list[str]:
    """Every folder in the store, each asserted whole: both images and a readable meta.yaml naming the path."""
    import yaml

    names = sorted(p.name for p in store.iterdir()) if store.is_dir() else []
    for name in names:
        folder = store / name
        assert {p.name for p in folder.iterdir()} == {"preimage", "postimage", "meta.yaml"}, name
        assert yaml.safe_load((folder / "meta.yaml").read_text())["path"] == "f.py"
        assert (folder / "postimage").read_text() == lines("a", "up", "fork")
    return names


@pytest.mark.parametrize("then", ["resume", "abort"])
def test_a_kill_inside_the_store_export_leaves_no_half_entry(conflict, then: str) -> None:
    repo = conflict.repo
    killed = cli(repo, "resume", fault="store.export.before-rename")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    store = _store(conflict)
    visible = [p.name for p in store.iterdir() if not p.name.startswith(".")] if store.is_dir() else []
    assert visible == [], "an entry is in the store before it is whole"
    done = cli(repo, then, *(["--yes"] if then == "abort" else []))
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(_whole_entries(store)) == (1 if then == "resume" else 0)


@pytest.mark.parametrize(
    "point",
    [
        "atomic-write.before-replace@3",  # the first write of `current`: the record says running, no phase yet
        "phase.prepare.after",  # a phase finished, the record not saved
    ],
)
def test_status_after_a_kill_says_interrupted_and_resume(tmp_path: Path, point: str) -> None:
    pair = make_pair(tmp_path, {"f.py": lines("a")}, [{"f.py": lines("a", "up")}], [{"g.py": lines("fork")}])
    killed = cli(pair.repo, "merge", "upstream/main", "--branch", BRANCH, fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    shown = cli(pair.repo, "status")
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "is alive" not in text and "interrupted" in text and "`ds4sync resume` to go on" in text, text
    again = cli(pair.repo, "merge", "upstream/main", "--branch", BRANCH)  # a new sync is refused, and says why
    assert again.returncode == 4 and "was interrupted" in again.stderr, again.stderr
    assert cli(pair.repo, "resume").returncode == 0
    assert "done" in cli(pair.repo, "status").stdout


@pytest.mark.parametrize("left", ["nothing-but-files", "empty"])
def test_abort_after_git_was_killed_inside_worktree_remove(tmp_path: Path, left: str) -> None:
    """What `git worktree remove` leaves when killed mid-way: it deletes the folder (here `.git` went first)
    before its own entry, and then refuses that entry for good ('.git' does not exist)."""
    pair = make_pair(tmp_path, {"f.py": lines("a"), "d/x.py": lines("x")}, [{"f.py": lines("a", "up")}], [])
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) == 0
    (record,) = (pair.repo / ".git" / "ds4sync" / "runs").glob("*/record.json")
    data = json.loads(record.read_text())
    worktree = Path(data["worktree"])
    (worktree / ".git").unlink()
    if left != "nothing-but-files":
        (worktree / "f.py").unlink()
    if left == "empty":
        for path in sorted(worktree.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
    wedged = subprocess.run(
        ["git", "-C", str(pair.repo), "worktree", "remove", "--force", "--force", str(worktree)],
        capture_output=True,
        text=True,
    )
    assert wedged.returncode != 0 and ".git" in wedged.stderr  # git's own command refuses it
    assert main(["abort", "--repo", str(pair.repo)]) == 0
    fork = GitRepo(pair.repo)
    assert str(worktree) not in fork.worktrees() and not worktree.exists()
    assert not fork.ref_exists(f"refs/heads/{data['sync_branch']}")
    assert not any(p.name.endswith(".removing") for p in worktree.parent.iterdir())
