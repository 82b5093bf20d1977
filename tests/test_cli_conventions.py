"""The CLI as a maintainer meets it: git's and gh's conventions, driven as a user drives them.

Text output is read with ``COLUMNS`` set, so rich wraps and truncates by its real terminal-width rules: from
the command line run in this process with its own stdout, stderr and environment (typer's CliRunner) where
only the text is checked, and from a real ``ds4sync`` process for the entry point, the terminal and the
imports; ``--json`` output is read through the envelope.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import git
import pytest
from typer.testing import CliRunner

from ds4sync.cli import main
from tests.cli_json import data as cli_data
from tests.cli_json import envelope
from tests.scenarios import BRANCH, lines, make_pair
from tests.timing import scaled


def ds4sync(*args: str, cwd: Path | None = None, columns: int = 100, stdin: str = "") -> subprocess.CompletedProcess:
    """Run the real command line in a child process, as a shell would, at a terminal width of ``columns``."""
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "ds4sync.cli", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )


def ds4sync_text(*args: str, columns: int = 100) -> subprocess.CompletedProcess:
    """Run the command line in this process at a terminal width of ``columns``: typer's CliRunner gives it its
    own stdin, stdout, stderr and ``COLUMNS`` (reads exactly as :func:`ds4sync` does, without a child)."""
    with CliRunner().isolation(env={"COLUMNS": str(columns), "FORCE_COLOR": None}) as (stdout, stderr, _):
        code = main(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
        return subprocess.CompletedProcess(list(args), code, stdout.getvalue().decode(), stderr.getvalue().decode())


@pytest.fixture
def pair(tmp_path: Path):
    return make_pair(
        tmp_path,
        {"a.py": lines("a"), "pkg/mod.py": lines("m")},
        [{"a.py": lines("a", "up")}],
        [{"b.py": lines("b")}],
    )


def test_the_entry_point_answers_version_help_and_completion() -> None:
    version = ds4sync("--version")
    assert version.returncode == 0 and version.stdout.startswith("ds4sync ")
    helped = ds4sync("plan", "-h", columns=80)
    assert helped.returncode == 0 and "Usage: ds4sync plan" in helped.stdout
    assert helped.stdout == ds4sync_text("plan", "-h", columns=80).stdout  # the in-process reading is the real one
    completion = subprocess.run(
        [sys.executable, "-m", "ds4sync.cli"],
        env={**os.environ, "_DS4SYNC_COMPLETE": "complete_bash", "COMP_WORDS": "ds4sync pro", "COMP_CWORD": "1"},
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert "promote" in completion.stdout and "plan" not in completion.stdout


def test_help_is_wrapped_to_the_terminal_and_shows_no_type_placeholders() -> None:
    helped = ds4sync_text("plan", "-h", columns=80)
    assert helped.returncode == 0 and "Usage: ds4sync plan" in helped.stdout
    assert "<bool>" not in helped.stdout and "--json" in helped.stdout
    assert all(len(line) <= 80 for line in helped.stdout.splitlines())  # rich wrapped to the terminal
    for command in (["-h"], ["gate", "-h"], ["build", "-h"], ["patches", "check", "-h"], ["report", "-h"]):
        assert "<bool>" not in ds4sync_text(*command).stdout, command


def test_profile_means_a_folder_everywhere() -> None:
    build = ds4sync_text("build", "-h", columns=200).stdout
    assert "--build-profile" in build and "--profile-dir" not in build
    for command in ("merge", "gate", "build", "nightly", "report"):
        text = ds4sync_text(command, "-h", columns=200).stdout
        line = next(line for line in text.splitlines() if "--profile " in line)
        assert "Profile folder" in line, (command, line)


def test_plan_json_with_a_bad_ref_prints_the_error_envelope(pair, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "no-such-ref", "--repo", str(pair.repo), "--branch", BRANCH, "--json"])
    captured = capsys.readouterr()
    body = envelope(captured.out)
    assert code == 2 and body["exit_code"] == 2 and body["command"] == "plan" and not body["ok"]
    assert body["error"]["type"] == "GitError" and "no-such-ref" in body["error"]["message"]
    assert body["error"]["fix"]
    assert captured.err.count("\n") == 1 and "no-such-ref" in captured.err  # one line for the person, too
    code = main(["patches", "check", "--repo", str(pair.repo), "--no-such-flag", "--json"])
    usage = envelope(capsys.readouterr().out)
    assert code == 2 and usage["command"] == "patches check" and usage["error"]["type"] == "UsageError"


def test_every_command_answers_in_the_one_envelope(pair, capsys: pytest.CaptureFixture[str]) -> None:
    repo = ["--repo", str(pair.repo)]

    def run(command: str, *args: str) -> dict:
        code = main([*command.split(), *args, *repo, "--json"])
        body = envelope(capsys.readouterr().out)
        assert body["command"] == command and body["exit_code"] == code
        return body

    assert run("plan", "upstream/main", "--branch", BRANCH)["data"]["upstream_commits"] == 1
    assert run("config check")["data"]["fork_branch"] == "main"  # no fork.branch: the checked-out branch
    merged = run("merge", "upstream/main", "--branch", BRANCH)["data"]
    assert merged["status"] == "paused" and Path(merged["record"]).is_file()
    assert run("resume")["data"]["status"] == "done"
    assert [row["status"] for row in run("status", "--all")["data"]["runs"]] == ["done"]
    assert run("status")["data"]["run_id"] == merged["run_id"]
    line = run("cron", "--branch", BRANCH)["data"]["line"]
    assert f"--branch {BRANCH}" in line and "nightly --repo" in line
    refused = run("abort")  # finished and never promoted; no terminal to ask on
    assert refused["exit_code"] == 2 and "--yes" in refused["error"]["message"] + refused["error"]["fix"]
    promoted = run("promote", "--allow-ungated")["data"]  # no gate tier in this config
    assert promoted["branch"] == BRANCH and promoted["already_promoted"] is False
    again = run("promote")
    assert again["ok"] and again["data"]["already_promoted"] is True
    assert run("status")["data"]["status"] == "promoted"
    nightly = run("nightly", "--branch", BRANCH, "--ref", "main")
    assert nightly["ok"] and "nothing moved since run" in nightly["data"]["message"]


def test_runs_from_a_subfolder_of_the_fork(pair, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(pair.repo / "pkg")
    assert main(["plan", "upstream/main", "--branch", BRANCH, "--json"]) == 0
    assert cli_data(capsys.readouterr().out)["upstream_commits"] == 1
    shown = ds4sync_text("config", "check")  # in pkg/, as chdir above
    assert shown.returncode == 0 and f"state dir: {pair.repo / '.git' / 'ds4sync'}" in shown.stdout


def test_plan_defaults_to_the_checked_out_branch(pair, capsys: pytest.CaptureFixture[str]) -> None:
    pair.fork.checkout(BRANCH)
    assert main(["plan", "upstream/main", "--repo", str(pair.repo), "--json"]) == 0
    data = cli_data(capsys.readouterr().out)
    assert data["fork_sha"] == git.Repo(pair.fork.path).commit(BRANCH).hexsha and data["fork_commits"] == 1


def test_promote_updates_a_clean_checkout_of_the_fork_branch(pair, capsys: pytest.CaptureFixture[str]) -> None:
    pair.fork.checkout(BRANCH)
    (pair.repo / "notes.txt").write_text("untracked, kept\n")
    assert main(["merge", "upstream/main", "--repo", str(pair.repo)]) == 0
    assert main(["resume", "--repo", str(pair.repo)]) == 0
    capsys.readouterr()
    shown = ds4sync_text("promote", "--repo", str(pair.repo), "--allow-ungated")
    assert shown.returncode == 0 and f"updated the checkout of {BRANCH} in {pair.repo}" in shown.stdout
    status = subprocess.run(["git", "status", "--porcelain"], cwd=pair.repo, capture_output=True, text=True).stdout
    assert status == "?? notes.txt\n"  # index and files follow the branch, like updateInstead
    assert (pair.repo / "a.py").read_text() == lines("a", "up")
    again = ds4sync_text("promote", "--repo", str(pair.repo))
    assert again.returncode == 0 and "already promoted at" in again.stdout
    status_text = ds4sync_text("status", "--repo", str(pair.repo)).stdout
    assert "promoted" in status_text and "nothing: promoted at" in status_text
    report = next((pair.repo / ".git" / "ds4sync" / "runs").glob("*/report.md")).read_text()
    assert f"This sync was promoted: {BRANCH} was fast-forwarded" in report and "(promoted)" in report
    assert "draft integration PR" not in report


def test_cron_refuses_where_nightly_cannot_run(pair, capsys: pytest.CaptureFixture[str]) -> None:
    git.Repo(pair.fork.path).git.remote("remove", "upstream")
    assert main(["cron", "--repo", str(pair.repo), "--branch", BRANCH]) == 2
    err = capsys.readouterr().err
    assert "no upstream to fetch" in err and "git remote add upstream" in err
    assert main(["cron", "--repo", str(pair.repo), "--branch", "nope"]) == 2
    assert "no local branch named 'nope'" in capsys.readouterr().err


def test_verbose_shows_git_commands_and_the_log_keeps_them(pair) -> None:
    quiet = ds4sync_text("plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH)
    assert quiet.returncode == 0 and "git merge-tree" not in quiet.stderr
    loud = ds4sync_text("plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "-v")
    assert loud.returncode == 0 and "ds4sync: git merge-tree --write-tree" in loud.stderr
    log = (pair.repo / ".git" / "ds4sync" / "logs" / "ds4sync.log").read_text()
    assert log.count("git merge-tree --write-tree") == 2  # both invocations, -v or not
    assert f"ds4sync plan upstream/main --repo {pair.repo}" in log


def test_merge_logs_into_the_runs_log(pair, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json"]) == 0
    run_id = cli_data(capsys.readouterr().out)["run_id"]
    log = pair.repo / ".git" / "ds4sync" / "runs" / run_id / "logs" / "ds4sync.log"
    text = log.read_text()
    assert "git worktree add" in text and re.search(r"git (-c \S+ )*merge --no-ff --no-commit", text)


def test_plurals_read_right(tmp_path: Path) -> None:
    one = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("up")}], [{"a.py": lines("fork")}])
    shown = ds4sync_text("merge", "upstream/main", "--repo", str(one.repo), "--branch", BRANCH, columns=200)
    assert shown.returncode == 4
    text = shown.stdout + shown.stderr
    assert "(1 upstream commit)" in text and "1 conflicted file needs a person" in text
    assert not re.search(r"\b1 (conflicts|conflicted files|upstream commits)\b", text)
    status = json.loads(ds4sync_text("status", "--repo", str(one.repo), "--json").stdout)
    assert status["data"]["status"] == "needs-person"


def _on_a_terminal(args: list[str], answer: str) -> subprocess.CompletedProcess:
    """Run ds4sync with a pseudo-terminal as stdin (a person at a shell) and type ``answer``."""
    import pty

    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    try:
        os.write(leader, answer.encode())
        return subprocess.run(
            [sys.executable, "-m", "ds4sync.cli", *args],
            stdin=follower,
            env=env,
            capture_output=True,
            text=True,
            timeout=scaled(120),
        )
    finally:
        os.close(leader)
        os.close(follower)


@pytest.mark.slow
def test_abort_asks_before_dropping_a_finished_run(pair, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) == 0
    assert main(["resume", "--repo", str(pair.repo)]) == 0
    capsys.readouterr()
    sync_branch = next(b.name for b in git.Repo(pair.fork.path).branches if b.name.startswith("sync/"))
    kept = _on_a_terminal(["abort", "--repo", str(pair.repo)], "n\n")
    assert kept.returncode == 2 and "never promoted; drop it" in kept.stderr and "nothing dropped" in kept.stderr
    assert sync_branch in [b.name for b in git.Repo(pair.fork.path).branches]
    dropped = _on_a_terminal(["abort", "--repo", str(pair.repo)], "y\n")
    assert dropped.returncode == 0 and "aborted" in dropped.stdout
    assert sync_branch not in [b.name for b in git.Repo(pair.fork.path).branches]


def _help_of(command: object, args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    from ds4sync.cli import _app

    assert _app._run(command, args) == 0
    return capsys.readouterr().out


def test_each_command_built_alone_reads_exactly_as_in_the_whole_tree(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ds4sync.cli import _app

    monkeypatch.setenv("COLUMNS", "120")
    whole = _app.build_command()
    assert set(whole.commands) == {_app._command_name(c) for c in _app.app.registered_commands} | {
        g.name for g in _app.app.registered_groups
    }
    checked = []
    for name, command in whole.commands.items():
        paths = [[name]] + [[name, sub] for sub in getattr(command, "commands", {})]
        for words in paths:
            alone = _app.build_command([*words, "--help"])
            assert list(alone.commands) == [name]
            expected = _help_of(whole, [*words, "--help"], capsys)
            assert _help_of(alone, [*words, "--help"], capsys) == expected, words
            checked.append(" ".join(words))
    assert {"plan", "patches check", "nightly", "config check"} <= set(checked)  # commands and group members


def test_unknown_commands_and_the_top_level_still_get_the_whole_tree(capsys: pytest.CaptureFixture[str]) -> None:
    from ds4sync.cli import _app

    for args in ([], ["--help"], ["--version"], ["plann"], ["-h", "plan"]):
        assert set(_app.build_command(args).commands) == set(_app.build_command().commands), args
    assert main(["plann"]) == 2
    assert "No such command 'plann'" in capsys.readouterr().err


def test_json_output_needs_no_rich(pair) -> None:
    probe = (
        "import sys, io, contextlib; from ds4sync.cli import main;"
        f"args = ['plan', 'upstream/main', '--repo', {str(pair.repo)!r}, '--branch', {BRANCH!r}, '--json'];"
        "buf = io.StringIO();"
        "ctx = contextlib.redirect_stdout(buf); ctx.__enter__(); code = main(args); ctx.__exit__(None, None, None);"
        "print(code, sorted({m.split('.')[0] for m in sys.modules} & {'rich'}), '\"ok\": true' in buf.getvalue())"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=scaled(120))
    assert out.stdout.split() == ["0", "[]", "True"], out.stderr


TIER_WORDS = ("static", "unit", "gpu", "kernel", "serving", "perf")


@pytest.mark.parametrize(
    ("command", "arguments", "option", "choices"),
    [
        (["gate"], [], "--tier", TIER_WORDS),
        (["gate"], ["--tier", "unit"], "--executor", ("local", "ray")),
        (["bisect"], [], "--tier", TIER_WORDS),
        (["sync"], ["main"], "--tier", TIER_WORDS),
        (["ci", "export"], ["--buildkite"], "--tier", TIER_WORDS),
        (["kernels", "check"], [], "--op", ("prefill", "decode", "topk", "routing", "mhc_pre", "mhc_post")),
        (["patches", "new"], ["x", "--from", "a..b"], "--kind", ("fork-feature", "backport", "fixup", "removal")),
        (["report"], [], "--format", ("md", "html", "json")),
    ],
)
def test_closed_vocabularies_are_choices_listed_in_help_and_checked_by_the_parser(
    command: list[str], arguments: list[str], option: str, choices: tuple[str, ...]
) -> None:
    from ds4sync.core import names

    vocabularies = (names.TIERS, names.EXECUTORS, names.KERNEL_OPS, names.PATCHSET_KINDS)
    assert option == "--format" or choices in vocabularies  # the words the models validate
    assert "|".join(choices) in ds4sync_text(*command, "--help", columns=250).stdout
    bad = ds4sync_text(*command, *arguments, option, "nonsense", columns=200)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "'nonsense'" in bad.stderr and option in bad.stderr
