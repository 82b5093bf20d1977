"""A run killed in the middle of the merge can be resumed or aborted."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import git
import pytest

from ds4sync.cli import main
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair

# Runs the real pipeline; right after the real `git merge` the process SIGKILLs itself,
# leaving the record with phase 'merge' running and the worktree mid-merge.
KILLER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from ds4sync.loop import sync
    from ds4sync.pipeline import PHASES
    from ds4sync.merge import phases as merge_phases
    from ds4sync.runner import Phase, open_workspace

    def merge_then_die(ctx):
        merge_phases.merge(ctx)
        os.kill(os.getpid(), signal.SIGKILL)

    phases = tuple(Phase("merge", merge_then_die) if p.name == "merge" else p for p in PHASES)
    ws = open_workspace(Path(sys.argv[1]), branch=sys.argv[2])
    sync.start_merge(ws, "upstream/main", phases=phases)
""")


@pytest.fixture
def killed(tmp_path: Path):
    pair = make_pair(
        tmp_path,
        {"f.py": lines("a"), "g.py": lines("g")},
        [{"f.py": lines("up"), "g.py": lines("g", "up")}],
        [{"f.py": lines("fork")}],
    )
    proc = subprocess.run([sys.executable, "-c", KILLER, str(pair.repo), BRANCH], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return pair


def status_json(capsys: pytest.CaptureFixture[str], repo: Path) -> dict:
    capsys.readouterr()
    assert main(["status", "--repo", str(repo), "--json"]) == 0
    return cli_data(capsys.readouterr().out)


def test_killed_run_is_reported_not_ignored(killed, capsys: pytest.CaptureFixture[str]) -> None:
    record = status_json(capsys, killed.repo)
    assert record["status"] == "running" and record["phases"]["merge"]["status"] == "running"
    code = main(["merge", "upstream/main", "--repo", str(killed.repo), "--branch", BRANCH])
    err = capsys.readouterr().err
    assert code == 4
    assert "interrupted during phase 'merge'" in err and "ds4sync resume" in err and "ds4sync abort" in err


@pytest.mark.slow
def test_killed_run_can_be_resumed(killed, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["resume", "--repo", str(killed.repo), "--json"])
    data = cli_data(capsys.readouterr().out)
    assert code == 4  # the merge went on to resolve, where f.py needs a person
    assert [(c["path"], c["resolution"]) for c in data["conflicts"]] == [("f.py", "unresolved")]
    Path(data["worktree"], "f.py").write_text(lines("fork", "up"))
    assert main(["resume", "--repo", str(killed.repo)]) == 0
    record = status_json(capsys, killed.repo)
    assert record["status"] == "done"
    commit = git.Repo(killed.fork.path).commit(record["results"]["merge"]["merge_commit"])
    assert commit.tree["g.py"].data_stream.read().decode() == lines("g", "up")
    assert len(commit.parents) == 2


def test_killed_run_can_be_aborted(killed, capsys: pytest.CaptureFixture[str]) -> None:
    fork_head = git.Repo(killed.fork.path).commit(BRANCH).hexsha
    record = status_json(capsys, killed.repo)
    assert main(["abort", "--repo", str(killed.repo)]) == 0
    assert not Path(record["worktree"]).exists()
    assert git.Repo(killed.fork.path).commit(BRANCH).hexsha == fork_head
    assert status_json(capsys, killed.repo)["status"] == "aborted"


def test_stale_lock_of_a_dead_process_is_reported(killed, capsys: pytest.CaptureFixture[str]) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock_info = killed.repo / ".git" / "ds4sync" / "lock.json"
    lock_info.write_text(json.dumps({"pid": int(dead.stdout), "command": "merge upstream/main", "since": "then"}))
    code = main(["merge", "upstream/main", "--repo", str(killed.repo), "--branch", BRANCH])
    err = capsys.readouterr().err
    assert code == 4
    assert f"pid {int(dead.stdout)}" in err and "died holding" in err
    assert "interrupted during phase 'merge'" in err
    assert not lock_info.exists()  # released again
