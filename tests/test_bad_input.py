"""Bad input: one clear line on stderr, the right exit code, nothing changed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ds4sync.cli import main
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair


@pytest.fixture
def pair(tmp_path: Path):
    return make_pair(tmp_path, {"f.py": lines("a")}, [{"f.py": lines("up")}], [{"g.py": lines("fork")}])


def one_error_line(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("ds4sync: error: ")
    return code, err


def refs_and_worktrees(repo: Path) -> tuple[str, str]:
    run = lambda *a: subprocess.run(["git", "-C", str(repo), *a], capture_output=True, text=True).stdout  # noqa: E731
    return run("for-each-ref"), run("worktree", "list")


def test_unknown_sha(pair, capsys: pytest.CaptureFixture[str]) -> None:
    before = refs_and_worktrees(pair.repo)
    code, err = one_error_line(capsys, "merge", "deadbeefdeadbeef", "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 2 and "deadbeefdeadbeef" in err
    assert refs_and_worktrees(pair.repo) == before


def test_unknown_sha_without_remote(pair, capsys: pytest.CaptureFixture[str]) -> None:
    pair.fork.repo.git.remote("remove", "upstream")
    code, err = one_error_line(capsys, "plan", "0123456789abcdef", "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 2 and "no remote 'upstream'" in err and "git remote add" in err


def test_missing_branch(pair, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = one_error_line(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", "nope")
    assert code == 2 and "no local branch named 'nope'" in err


def test_no_branch_given_on_a_detached_head(pair, capsys: pytest.CaptureFixture[str]) -> None:
    pair.fork.repo.git.checkout("--detach")
    code, err = one_error_line(capsys, "merge", "upstream/main", "--repo", str(pair.repo))
    assert code == 2 and "--branch" in err and "detached" in err


def test_not_a_repo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = one_error_line(capsys, "plan", "main", "--repo", str(tmp_path))
    assert code == 2 and "not a git repository" in err


def test_unrelated_remote_url_fetch_fails(pair, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pair.fork.repo.git.remote("set-url", "upstream", str(tmp_path / "missing"))
    code, err = one_error_line(capsys, "plan", "0123456789abcdef", "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 2 and "cannot fetch" in err


def test_upstream_sha_fetched_when_absent(pair, capsys: pytest.CaptureFixture[str]) -> None:
    newer = pair.upstream.commit({"h.py": lines("new")}, "upstream moves on")
    code = main(["plan", newer, "--repo", str(pair.repo), "--branch", BRANCH, "--json"])
    assert code == 0
    assert cli_data(capsys.readouterr().out)["upstream_sha"] == newer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("upstream: [unclosed\n", "malformed YAML"),
        ("upstream:\n  remote: up\n  colour: blue\n", "upstream.colour: unknown key"),
        ("merge:\n  rules:\n    - glob: 'docs/*'\n      strategy: mine\n", "merge.rules.0.strategy"),
        ("merge:\n  sync_branch: main\n", "merge.sync_branch"),
        ("- a\n- b\n", "expected a mapping"),
    ],
)
def test_bad_config(pair, capsys: pytest.CaptureFixture[str], text: str, expected: str) -> None:
    (pair.repo / "ds4sync.yaml").write_text(text)
    code, err = one_error_line(capsys, "config", "check", "--repo", str(pair.repo))
    assert code == 2 and expected in err and "ds4sync.yaml" in err


def test_config_check_ok(pair, capsys: pytest.CaptureFixture[str]) -> None:
    (pair.repo / "ds4sync.yaml").write_text(
        textwrap.dedent("""\
        upstream: {remote: upstream, url: https://example.invalid/up.git, ref: main}
        fork: {branch: fork}
        merge:
          rules: [{glob: "docs/*", strategy: theirs}]
        """)
    )
    assert main(["config", "check", "--repo", str(pair.repo)]) == 0
    out = capsys.readouterr().out
    assert "ok" in out and "fork branch: fork" in out and "resolution rules: 1" in out


def test_second_concurrent_run_is_refused(pair, capsys: pytest.CaptureFixture[str]) -> None:
    state = pair.repo / ".git" / "ds4sync"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from ds4sync.core.record import RecordStore
            with RecordStore(Path({str(state)!r})).lock("merge elsewhere"):
                print("held", flush=True)
                time.sleep(60)
            """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, err = one_error_line(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH)
        assert code == 2 and "another ds4sync command holds" in err and str(holder.pid) in err
    finally:
        holder.kill()
        holder.wait()
    # The lock dies with its holder: the repository is usable again.
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) == 0


def test_internal_error_saves_traceback(
    pair, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ds4sync.loop import sync

    def broken(*_a, **_k):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(sync, "plan", broken)
    code = main(["plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH])
    err = capsys.readouterr().err
    assert code == 3 and "internal error" in err and len(err.strip().splitlines()) == 1
    saved = list((tmp_path / "crashes" / "ds4sync-crashes").iterdir())
    assert len(saved) == 1 and "ZeroDivisionError" in saved[0].read_text()


def test_fetch_takes_the_remote_ref_over_a_stale_local_one(pair, capsys: pytest.CaptureFixture[str]) -> None:
    newer = pair.upstream.commit({"h.py": lines("new")}, "upstream moves on")
    assert main(["plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json"]) == 0
    assert cli_data(capsys.readouterr().out)["upstream_sha"] != newer  # the local tracking ref is stale
    assert main(["plan", "main", "--fetch", "--repo", str(pair.repo), "--branch", BRANCH, "--json"]) == 0
    assert cli_data(capsys.readouterr().out)["upstream_sha"] == newer
