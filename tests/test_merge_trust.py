"""Merge and resolution you can trust: no leaks from the caller's environment, hooks or refs; no state without a way on.

Real git in tmp_path repositories throughout; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.core.errors import GitError
from ds4sync.core.git import GitRepo, git_env
from ds4sync.loop import sync
from ds4sync.runner import open_workspace
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair
from tests.test_killed_run import killed  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Plain git for the test's own setup (the caller's view, not ds4sync's)."""
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env or dict(os.environ)
    ).stdout.strip()


def clean_pair(tmp_path: Path):
    """A fork and upstream that merge without conflict (upstream edits a.py, the fork adds b.py)."""
    return make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])


def conflict_pair(tmp_path: Path):
    return make_pair(tmp_path, {"f.py": lines("a")}, [{"f.py": lines("up")}], [{"f.py": lines("fork")}])


# -- one git environment ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR", "GIT_PREFIX"]
)
def test_git_env_drops_what_names_a_repository(name: str) -> None:
    env = git_env(base={name: "/elsewhere", "GIT_SSH_COMMAND": "ssh -i key", "LANGUAGE": "de", "LANG": "de_DE"})
    assert name not in env
    assert env["GIT_SSH_COMMAND"] == "ssh -i key"  # how to reach remotes is the user's to say
    assert env["LC_ALL"] == "C" and "LANGUAGE" not in env


def test_merge_from_a_git_alias_inside_a_linked_worktree(tmp_path: Path) -> None:
    """git exports GIT_DIR/GIT_INDEX_FILE/GIT_WORK_TREE to aliases and hooks; ds4sync must not follow them."""
    pair = clean_pair(tmp_path)
    linked = tmp_path / "linked"
    git(pair.repo, "worktree", "add", "-q", str(linked), BRANCH)
    fork_head = git(pair.repo, "rev-parse", BRANCH)
    # The alias exports what a hook gets, pointing at the linked worktree (where the fork branch is out).
    alias = (
        '!f() { export GIT_DIR="$(git rev-parse --absolute-git-dir)"; export GIT_INDEX_FILE="$GIT_DIR/index"; '
        f'export GIT_WORK_TREE="$PWD"; exec {sys.executable} -m ds4sync.cli "$@"; }}; f'
    )
    git(pair.repo, "config", "alias.ds4", alias)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        ["git", "ds4", "merge", "upstream/main", "--branch", BRANCH, "--json"],
        cwd=linked,
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    data = cli_data(proc.stdout)
    assert git(pair.repo, "rev-parse", BRANCH) == fork_head  # the fork branch did not move
    assert git(linked, "rev-parse", "HEAD") == fork_head and git(linked, "status", "--porcelain") == ""
    parents = git(pair.repo, "rev-list", "--parents", "-n1", data["merge_commit"]).split()[1:]
    assert parents == [fork_head, data["upstream_sha"]]
    assert Path(data["worktree"]).resolve() != linked.resolve()


def test_messages_are_parsed_in_the_c_locale_under_a_german_one(tmp_path: Path, monkeypatch, capsys) -> None:
    """rerere's "Resolved ... using previous resolution" is what ds4sync reads; git translates it."""
    german = {"LANG": "de_DE.UTF-8", "LC_ALL": "de_DE.UTF-8", "LANGUAGE": "de"}
    probe = subprocess.run(["git", "rev-parse", "nope"], capture_output=True, text=True, env={**os.environ, **german})
    if "Schwerwiegend" not in probe.stderr and "mehrdeutig" not in probe.stderr:
        pytest.skip("git's German translation or the de_DE locale is not installed here")
    for key, value in german.items():
        monkeypatch.setenv(key, value)
    pair = conflict_pair(tmp_path)
    config = tmp_path / "ds4sync.yaml"
    (tmp_path / "profile" / "patches").mkdir(parents=True)  # a profile folder must exist (issue 13)
    config.write_text(yaml.safe_dump({"fork": {"branch": BRANCH}, "profile": str(tmp_path / "profile")}))
    args = ("--repo", str(pair.repo), "--config", str(config), "--json")
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args)
    assert code == 4
    Path(cli_data(out)["worktree"], "f.py").write_text(lines("fork", "up"))
    assert run_cli(capsys, "resume", *args)[0] == 0
    assert (
        run_cli(capsys, "abort", *args[:-1], "--yes")[0] == 0
    )  # the finished, unpromoted run; the store keeps the entry
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args)
    assert code == 0, out
    assert [(c["path"], c["resolution"]) for c in cli_data(out)["conflicts"]] == [("f.py", "recorded")]


# -- refs that git could read as options -------------------------------------------------------


@pytest.mark.parametrize("ref", ["--upload-pack=touch PWNED", "-x", "", " "])
def test_a_ref_that_is_an_option_or_empty_is_refused_at_preflight(tmp_path: Path, ref: str, capsys) -> None:
    pair = clean_pair(tmp_path)
    for command in ("plan", "merge"):
        code, _, err = run_cli(capsys, command, "--repo", str(pair.repo), "--branch", BRANCH, "--", ref)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "starts with '-'" in err or "empty" in err
    assert not (pair.repo / "PWNED").exists() and not (tmp_path / "PWNED").exists()
    assert not (pair.repo / ".git" / "ds4sync" / "runs").exists()  # no run, worktree or branch created


def test_fetch_never_takes_a_ref_as_an_option(tmp_path: Path) -> None:
    pair = clean_pair(tmp_path)
    repo = GitRepo(pair.repo)
    for source, ref in (("upstream", "--upload-pack=touch PWNED"), ("--upload-pack=touch PWNED", "main")):
        with pytest.raises(GitError, match="starts with '-'"):
            repo.fetch(source, ref)
    assert not (pair.repo / "PWNED").exists()


def test_a_fork_branch_starting_with_a_dash_is_refused(tmp_path: Path, capsys) -> None:
    pair = clean_pair(tmp_path)
    code, _, err = run_cli(capsys, "plan", "upstream/main", "--repo", str(pair.repo), "--branch", "-D")
    assert code == 2 and "fork branch '-D' starts with '-'" in err


# -- the same ref names one commit --------------------------------------------------------------


def test_an_upstream_name_means_the_upstream_remotes_ref_not_a_stale_local_branch(tmp_path: Path, capsys) -> None:
    pair = clean_pair(tmp_path)
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump({"upstream": {"remote": "upstream"}}))
    local_main = git(pair.repo, "rev-parse", "refs/heads/main")
    remote_main = git(pair.repo, "rev-parse", "refs/remotes/upstream/main")
    assert local_main != remote_main  # the local main is stale
    base = ("--repo", str(pair.repo), "--branch", BRANCH, "--json")
    for ref in ("main", "upstream/main"):
        code, out, _ = run_cli(capsys, "plan", ref, *base)
        assert code == 0 and cli_data(out)["upstream_sha"] == remote_main, ref
    code, out, _ = run_cli(capsys, "plan", "main", "--fetch", *base)
    assert cli_data(out)["upstream_sha"] == remote_main
    code, out, _ = run_cli(capsys, "plan", "refs/heads/main", *base)
    assert cli_data(out)["upstream_sha"] == local_main  # said explicitly: the local branch
    code, out, _ = run_cli(capsys, "merge", "main", *base)
    record = json.loads(Path(cli_data(out)["record"]).read_text())
    assert record["upstream"]["sha"] == remote_main
    assert record["upstream"]["resolved_from"] == "refs/remotes/upstream/main"


# -- user hooks do not run in ds4sync's worktree -----------------------------------------------

HOOKS = {
    # Rewrites the message: drops every trailer line (ds4sync's Ds4sync-Run among them).
    "prepare-commit-msg": '#!/bin/sh\ngrep -v "^Ds4sync-Run:" "$1" > "$1.new"; mv "$1.new" "$1"\n',
    # Moves the user's stash into whatever checkout was just made.
    "post-checkout": "#!/bin/sh\ngit stash pop -q || true\n",
    "post-commit": '#!/bin/sh\ntouch "$(git rev-parse --show-toplevel)/POST_COMMIT_RAN"\n',
    "post-merge": '#!/bin/sh\ntouch "$(git rev-parse --show-toplevel)/POST_MERGE_RAN"\n',
    "reference-transaction": "#!/bin/sh\nexit 1\n",  # would refuse every ref update
}


@pytest.mark.parametrize("where", ["git-dir", "core.hooksPath"])
def test_user_hooks_do_not_run_and_the_stash_and_trailer_survive(tmp_path: Path, where: str, capsys) -> None:
    pair = conflict_pair(tmp_path)
    hooks = pair.repo / ".git" / "hooks" if where == "git-dir" else tmp_path / "my-hooks"
    (pair.repo / "a-local-edit.txt").write_text("work in progress\n")
    git(pair.repo, "add", "a-local-edit.txt")
    git(pair.repo, "stash", "push", "-q", "-m", "my work")
    hooks.mkdir(parents=True, exist_ok=True)
    for name, text in HOOKS.items():
        (hooks / name).write_text(text)
        (hooks / name).chmod(0o755)
    if where == "core.hooksPath":
        git(pair.repo, "config", "core.hooksPath", str(hooks))
    stash = git(pair.repo, "stash", "list")
    assert "my work" in stash
    args = ("--repo", str(pair.repo), "--branch", BRANCH, "--json")
    code, out, err = run_cli(capsys, "merge", "upstream/main", *args)
    assert code == 4, err
    worktree = Path(cli_data(out)["worktree"])
    assert not (worktree / "a-local-edit.txt").exists()  # post-checkout did not pop the stash here
    (worktree / "f.py").write_text(lines("fork", "up"))
    code, out, err = run_cli(capsys, "resume", "--repo", str(pair.repo), "--json")
    assert code == 0, err
    message = git(pair.repo, "log", "-1", "--format=%B", cli_data(out)["merge_commit"])
    assert "Ds4sync-Run: " in message
    assert not list(worktree.glob("POST_*_RAN"))
    assert run_cli(capsys, "abort", "--repo", str(pair.repo), "--yes")[0] == 0
    assert git(pair.repo, "stash", "list") == stash  # the user's stash is where it was


# -- no state without a next step ---------------------------------------------------------------


def test_an_error_inside_a_phase_marks_it_failed_with_the_next_command(tmp_path: Path, capsys) -> None:
    pair = conflict_pair(tmp_path)
    ws = open_workspace(pair.repo, branch=BRANCH)
    outcome = sync.start_merge(ws, "upstream/main", stop_after="prepare")
    worktree = GitRepo(outcome.record.worktree)
    index = worktree.git_dir / "index"
    index.write_bytes(b"DIRC not an index\n")  # a damaged index: `git merge` cannot start
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 2 and "index" in err
    code, out, _ = run_cli(capsys, "status", "--repo", str(pair.repo), "--json")
    record = cli_data(out)
    assert record["status"] == "failed" and record["phases"]["merge"]["status"] == "failed"
    assert "index" in record["phases"]["merge"]["message"]
    assert "ds4sync resume" in record["phases"]["merge"]["message"]
    index.unlink()  # the fix
    worktree.run("read-tree", "HEAD")
    code, out, _ = run_cli(capsys, "resume", "--repo", str(pair.repo), "--json")
    assert code == 4 and [c["path"] for c in cli_data(out)["conflicts"]] == ["f.py"]


def test_an_index_lock_a_live_process_holds_refuses_resume_and_changes_nothing(tmp_path: Path, capsys) -> None:
    """A stale ``index.lock`` (nobody holds it) is cleared; one a live process holds is that process's."""
    pair = conflict_pair(tmp_path)
    ws = open_workspace(pair.repo, branch=BRANCH)
    outcome = sync.start_merge(ws, "upstream/main", stop_after="prepare")
    lock = GitRepo(outcome.record.worktree).git_dir / "index.lock"
    hold = "import sys, time\nf = open(sys.argv[1], 'w')\nprint('held', flush=True)\ntime.sleep(600)\n"
    holder = subprocess.Popen([sys.executable, "-c", hold, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
        assert code == 2 and "index.lock" in err and str(holder.pid) in err
        assert lock.exists()  # not ours to remove
    finally:
        holder.kill()
        holder.wait()
    code, out, _ = run_cli(capsys, "resume", "--repo", str(pair.repo), "--json")  # now stale: cleared
    assert code == 4 and [c["path"] for c in cli_data(out)["conflicts"]] == ["f.py"] and not lock.exists()


def test_status_says_when_the_process_of_a_running_phase_is_dead(killed, capsys) -> None:  # noqa: F811
    code, out, _ = run_cli(capsys, "status", "--repo", str(killed.repo))
    assert code == 0
    assert "phase 'merge'" in out and "is gone" in out and "ds4sync resume" in out
    title = out.splitlines()[0]  # the heading says it too, not "(running)"
    assert "(interrupted during phase 'merge' (its process" in " ".join(out.split()) and "(running)" not in title


@pytest.mark.parametrize("kind", ["shallow", "blob-less"])
def test_incomplete_clones_are_refused_before_anything_is_created(tmp_path: Path, kind: str, capsys) -> None:
    pair = clean_pair(tmp_path)
    git(pair.upstream.path, "config", "uploadpack.allowFilter", "true")
    git(pair.repo, "push", "-q", "upstream", BRANCH)
    clone = tmp_path / "clone"
    how = ["--depth", "1", "--no-single-branch"] if kind == "shallow" else ["--filter=blob:none"]
    git(tmp_path, "clone", "-q", "--no-local", *how, "--origin", "upstream", f"file://{pair.upstream.path}", str(clone))
    git(clone, "branch", BRANCH, f"upstream/{BRANCH}")
    refs_before = git(clone, "for-each-ref")
    for command in ("plan", "merge"):
        code, _, err = run_cli(capsys, command, "upstream/main", "--repo", str(clone), "--branch", BRANCH)
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert ("shallow clone" if kind == "shallow" else "partial clone") in err
        assert "git fetch --unshallow" in err if kind == "shallow" else "--refetch" in err
    assert git(clone, "for-each-ref") == refs_before
    state = clone / ".git" / "ds4sync"
    assert not (state / "runs").exists() and not (state / "worktrees").exists()  # (the command log may exist)
    assert git(clone, "worktree", "list").count("\n") == 0


@pytest.mark.parametrize("damage", ["locked", "deleted", "locked+deleted"])
def test_a_locked_or_deleted_sync_worktree_can_be_aborted_and_user_worktrees_are_kept(
    tmp_path: Path, damage: str, capsys
) -> None:
    pair = conflict_pair(tmp_path)
    mine = tmp_path / "my-worktree"
    git(pair.repo, "worktree", "add", "-q", "-b", "mine", str(mine))
    git(pair.repo, "worktree", "lock", str(mine))
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    data = cli_data(out)
    worktree = Path(data["worktree"])
    if "locked" in damage:
        git(pair.repo, "worktree", "lock", str(worktree))
    if "deleted" in damage:
        subprocess.run(["rm", "-rf", str(worktree)], check=True)
    subprocess.run(["rm", "-rf", str(mine)], check=True)  # the user's own worktree folder is gone too
    code, _, err = run_cli(capsys, "abort", "--repo", str(pair.repo))
    assert code == 0, err
    listed = git(pair.repo, "worktree", "list", "--porcelain")
    assert str(worktree) not in listed and str(mine) in listed  # only ds4sync's own worktree went
    assert git(pair.repo, "branch", "--list", data["sync_branch"]) == ""
    assert run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH)[0] == 4


def test_the_demo_repositories_are_built_where_asked_under_a_leaked_git_dir(tmp_path: Path, monkeypatch) -> None:
    """RepoBuilder (the demo's and the tests' builder) uses GitPython; a caller's GIT_DIR must not redirect it."""
    from ds4sync.demo.repobuild import RepoBuilder

    victim = RepoBuilder(tmp_path / "victim")
    victim.commit({"mine.txt": "mine\n"}, "the caller's own work")
    before = git(victim.path, "rev-parse", "HEAD")
    monkeypatch.setenv("GIT_DIR", str(victim.path / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(victim.path))
    monkeypatch.setenv("GIT_INDEX_FILE", str(victim.path / ".git" / "index"))
    built = RepoBuilder(tmp_path / "built")
    built.commit({"a.py": "a\n"}, "a commit of the new repository")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    assert git(victim.path, "rev-parse", "HEAD", env=clean) == before
    assert git(victim.path, "status", "--porcelain", env=clean) == ""
    assert git(built.path, "log", "--format=%s", env=clean) == "a commit of the new repository"


def test_resume_with_the_sync_worktree_deleted_says_to_abort(tmp_path: Path, capsys) -> None:
    pair = conflict_pair(tmp_path)
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    worktree = Path(cli_data(out)["worktree"])
    subprocess.run(["rm", "-rf", str(worktree)], check=True)
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 2 and "sync worktree of run" in err and "is gone" in err and "ds4sync abort" in err
    assert run_cli(capsys, "abort", "--repo", str(pair.repo))[0] == 0
    assert run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH)[0] == 4
