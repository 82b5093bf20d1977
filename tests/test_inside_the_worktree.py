"""Commands run from inside a run's own sync worktree, where a maintainer resolves conflicts.

- ``abort`` there removes the worktree and the sync branch and says so (it used to remove the folder its
  own git commands ran in, then report "git is not installed" with the branch left behind);
- ``plan`` and ``merge`` there take the fork branch the run syncs, never the sync branch checked out there;
- a child whose working folder is gone is reported as that, at every way ds4sync starts one (git, a
  command, a server), never as a missing program;
- a command run there without a ds4sync.yaml of its own reads the main checkout's (state dir, gates, profile).

Real git in tmp_path repositories; nothing is mocked.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ds4sync.core.errors import GitError, StateError, ToolMissingError
from ds4sync.core.git import GitRepo, _git
from ds4sync.core.proc import run, spawn
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines
from tests.test_merge_trust import ROOT, conflict_pair, git, run_cli


@pytest.fixture
def inside(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    """A run stopped for a person; ``sub`` is a folder inside its sync worktree."""
    pair = conflict_pair(tmp_path)
    code, out, err = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    assert code == 4, err
    data = cli_data(out)
    sub = Path(data["worktree"]) / "deeper"
    sub.mkdir()
    return {"repo": pair.repo, "worktree": Path(data["worktree"]), "sync_branch": data["sync_branch"], "sub": sub}


@pytest.mark.parametrize("how", ["in-process", "subprocess"])
def test_abort_from_inside_the_sync_worktree_drops_the_run(
    inside: dict, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    fork_head = git(inside["repo"], "rev-parse", BRANCH)
    if how == "in-process":
        code, out, err = run_cli(capsys, "abort", "--repo", str(inside["sub"]))
    else:  # as a person types it: the shell's folder is the one being removed
        proc = subprocess.run(
            [sys.executable, "-m", "ds4sync.cli", "abort"], cwd=inside["sub"], capture_output=True, text=True,
            env={"PATH": "/usr/bin:/bin", "HOME": str(inside["repo"].parent / "home"), "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    assert code == 0, err
    assert "aborted" in out
    assert not inside["worktree"].exists()
    assert git(inside["repo"], "branch", "--list", inside["sync_branch"]) == ""
    assert git(inside["repo"], "rev-parse", BRANCH) == fork_head
    assert git(inside["repo"], "worktree", "list", "--porcelain").count("worktree ") == 1
    code, out, _ = run_cli(capsys, "status", "--repo", str(inside["repo"]), "--json")
    assert cli_data(out)["status"] == "aborted"


def test_plan_from_inside_the_sync_worktree_plans_for_the_fork_branch(
    inside: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    (inside["worktree"] / "f.py").write_text(lines("fork", "up"))
    code, _, err = run_cli(capsys, "resume", "--repo", str(inside["repo"]))
    assert code == 0, err
    fork_head = git(inside["repo"], "rev-parse", BRANCH)
    assert git(inside["worktree"], "branch", "--show-current") == inside["sync_branch"]
    assert git(inside["worktree"], "rev-parse", "HEAD") != fork_head  # the sync branch holds the merge
    code, out, err = run_cli(capsys, "plan", "upstream/main", "--repo", str(inside["sub"]), "--json")
    assert code == 0, err
    plan = cli_data(out)
    assert plan["fork_sha"] == fork_head and plan["upstream_commits"] == 1


def test_a_child_whose_folder_is_gone_is_not_a_missing_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    repo = GitRepo(_init(gone))
    shutil.rmtree(gone)
    with pytest.raises(StateError, match="the folder it runs in does not exist"):
        repo.run("status")
    with pytest.raises(StateError, match="cannot run true: the folder it runs in does not exist"):
        run(["true"], cwd=gone)
    with pytest.raises(StateError, match="the folder it runs in does not exist"):
        spawn(["true"], cwd=gone, log_path=tmp_path / "log")
    # a program that is not there, from a folder that is: still the missing program
    with pytest.raises(ToolMissingError, match="program not found: no-such-program-here"):
        run(["no-such-program-here"], cwd=tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # a folder with no git in it
    with pytest.raises(GitError, match="git is not installed"):
        _git(tmp_path, "--version")


def _init(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def test_a_prepare_that_git_cannot_check_out_leaves_no_branch_and_resumes_once_fixed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fork head needs a blob the object store lost (a mirror with a missing object): ``worktree add``
    fails. The run fails with git's reason and a way on, and leaves no sync branch or worktree; once the
    object is back, ``resume`` runs prepare again and goes on."""
    pair = conflict_pair(tmp_path)
    fork = GitRepo(pair.repo)
    git(pair.repo, "checkout", "-q", BRANCH)
    (pair.repo / "only-on-the-fork.txt").write_text("the fork's own file\n")
    git(pair.repo, "add", "only-on-the-fork.txt")
    git(pair.repo, "commit", "-q", "-m", "fork adds a file")
    git(pair.repo, "checkout", "-q", "main")
    blob = git(pair.repo, "rev-parse", f"{BRANCH}:only-on-the-fork.txt")
    loose = fork.git_dir / "objects" / blob[:2] / blob[2:]
    saved = loose.read_bytes()
    loose.unlink()
    code, out, err = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 2
    [line] = [text for text in err.splitlines() if not text.startswith("· ")]  # one error line after progress
    assert "worktree add" in line and blob in line and "git fsck" in line and "ds4sync resume" in line
    assert git(pair.repo, "branch", "--list", "sync/*") == ""
    assert git(pair.repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    code, out, _ = run_cli(capsys, "status", "--repo", str(pair.repo), "--json")
    assert cli_data(out)["status"] == "failed"
    loose.parent.mkdir(exist_ok=True)
    loose.write_bytes(saved)
    code, out, err = run_cli(capsys, "resume", "--repo", str(pair.repo), "--json")
    assert code == 4, err  # on to the merge, which stops for a person at its conflict
    assert (Path(cli_data(out)["worktree"]) / "only-on-the-fork.txt").is_file()


def test_abort_writes_the_report_again_and_status_says_what_is_gone(
    inside: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_cli(capsys, "status", "--repo", str(inside["repo"]), "--json")[1]
    report = Path(cli_data(out)["results"]["report"]["path"])
    assert "(needs-person)" in report.read_text()
    assert run_cli(capsys, "abort", "--repo", str(inside["repo"]))[0] == 0
    assert "(aborted)" in report.read_text() and "(needs-person)" not in report.read_text()
    summary = json.loads(report.with_name("summary.json").read_text())
    assert summary["run"]["status"] == "aborted"
    out = run_cli(capsys, "status", "--repo", str(inside["repo"]))[1]
    text = " ".join(out.split())
    assert f"worktree: {inside['worktree']} (removed by the abort)" in text
    assert f"sync branch: {inside['sync_branch']} (deleted by the abort)" in text
    # written when the run stopped for a person (its report phase pending), then again by the abort
    assert f"report: {report} (of the run as it stopped; the report phase has not run)" in text


@pytest.mark.parametrize("command", ["status", "abort"])
def test_a_command_inside_the_sync_worktree_reads_the_main_checkouts_ds4sync_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The fork's ds4sync.yaml is untracked (a person's own), so the sync worktree has none: a command run
    there reads the main checkout's, and finds the run in the state dir it names, not in the default one."""
    pair = conflict_pair(tmp_path)
    (pair.repo / "ds4sync.yaml").write_text("state_dir: ../sync-state\n")
    code, out, err = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    assert code == 4, err
    run_id, worktree = cli_data(out)["run_id"], Path(cli_data(out)["worktree"])
    assert (tmp_path / "sync-state").is_dir() and not (worktree / "ds4sync.yaml").exists()
    code, out, err = run_cli(capsys, command, "--repo", str(worktree), "--json")
    assert code == 0, err
    assert cli_data(out)["run_id"] == run_id
    assert cli_data(out)["status"] == ("needs-person" if command == "status" else "aborted")


def test_a_linked_worktrees_own_ds4sync_yaml_and_an_explicit_config_win_over_the_main_checkouts(
    tmp_path: Path,
) -> None:
    from ds4sync.runner import open_workspace

    pair = conflict_pair(tmp_path)
    main_yaml = pair.repo / "ds4sync.yaml"
    main_yaml.write_text("state_dir: ../main-state\n")
    linked = tmp_path / "linked"
    git(pair.repo, "worktree", "add", "-q", str(linked), BRANCH)
    (linked / "deeper").mkdir()
    ws = open_workspace(linked / "deeper")
    assert ws.config.source == main_yaml and ws.state_dir == tmp_path / "main-state"
    own = linked / "ds4sync.yaml"
    own.write_text("state_dir: own-state\n")
    ws = open_workspace(linked)
    assert ws.config.source == own and ws.state_dir == linked / "own-state"
    other = tmp_path / "other.yaml"
    other.write_text("state_dir: other-state\n")
    ws = open_workspace(linked, config_path=other)
    assert ws.config.source == other and ws.state_dir == tmp_path / "other-state"
    main_yaml.unlink()
    own.unlink()
    ws = open_workspace(linked)  # none anywhere: the defaults, in the repository's common git dir
    assert ws.config.source is None and ws.state_dir == (pair.repo / ".git" / "ds4sync").resolve()
