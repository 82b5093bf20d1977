"""The nightly job as a service: the quiet skip, the time budget, pruning, exit codes, timers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.core.errors import ExitCode
from ds4sync.loop.nightly import prune_runs, run_nightly, systemd_units, unchanged_since_last_sync
from ds4sync.models.publish_duplicates import DuplicateCheck, OpenPull
from ds4sync.models.publish_results import PublishResult
from ds4sync.runner import open_workspace
from tests import procs
from tests.cli_json import data
from tests.procs import IDENTITY
from tests.scenarios import BRANCH, lines, make_pair
from tests.timing import scaled

SLEEPER = (
    """\
import os, sys, time
"""
    + IDENTITY
    + """
open(sys.argv[1], "w").write(identity(os.getpid()))
time.sleep(float(sys.argv[2]))
"""
)


def configure(pair, **extra) -> Path:
    data = {"upstream": {"remote": "upstream", "ref": "main"}, "fork": {"branch": BRANCH}, **extra}
    path = pair.repo / "ds4sync.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_count(pair) -> int:
    return len(open_workspace(pair.repo).store.run_ids())


def test_nothing_moved_is_a_quiet_skip_without_fetching(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    configure(pair)
    assert main(["nightly", "--repo", str(pair.repo)]) == 0
    capsys.readouterr()
    fetch_head = pair.repo / ".git" / "FETCH_HEAD"
    stamp = fetch_head.stat().st_mtime_ns
    assert main(["nightly", "--repo", str(pair.repo)]) == 0
    assert "nothing moved since run" in capsys.readouterr().out
    assert fetch_head.stat().st_mtime_ns == stamp  # asked with ls-remote; nothing fetched
    assert run_count(pair) == 1
    # Promoted: the fork moved to the sync's head, which is still "the last sync".
    assert main(["promote", "--repo", str(pair.repo), "--allow-ungated"]) == 0  # no gate tier configured
    assert main(["nightly", "--repo", str(pair.repo)]) == 0
    assert "nothing moved" in capsys.readouterr().out and run_count(pair) == 1
    assert main(["nightly", "--json", "--repo", str(pair.repo)]) == 0
    night = data(capsys.readouterr().out)
    assert night["skipped"] is True and night["run_id"] is None and night["pr_url"] is None


@pytest.mark.parametrize("side", ["upstream", "fork"])
def test_either_side_moving_starts_a_sync(tmp_path: Path, side: str) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    configure(pair)
    ws = open_workspace(pair.repo)
    assert run_nightly(ws, notify=False).exit_code == ExitCode.OK
    assert unchanged_since_last_sync(ws, "main") is not None
    if side == "upstream":
        pair.upstream.commit({"c.py": lines("c")}, "upstream moves")
    else:
        pair.fork.checkout(BRANCH)
        pair.fork.commit({"d.py": lines("d")}, "fork moves")
        pair.fork.checkout("main")
    assert unchanged_since_last_sync(ws, "main") is None
    night = run_nightly(ws, notify=False)
    assert not night.skipped and night.record is not None and night.record.status == "done"


def test_time_budget_stops_running_gates_and_records_them_incomplete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    pid_file = tmp_path / "sleeper.pid"
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    gates = {
        "tier": "unit",
        "gates": [
            {"name": "quick", "kind": "command", "run": {"argv": ["{python}", "-c", "pass"]}},
            {
                "name": "slow",
                "kind": "command",
                "run": {"argv": ["{python}", str(tmp_path / "sleeper.py"), str(pid_file), str(scaled(120))]},
            },
        ],
    }
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    (profile / "gates" / "unit.yaml").write_text(yaml.safe_dump(gates))
    configure(pair, profile=str(profile), gates={"tiers": ["unit"], "python": sys.executable})

    # The budget must outlast the merge and the quick gate, and stop the sleeper (120 s): scaled for a loaded host.
    code = main(["nightly", "--repo", str(pair.repo), "--budget", f"{scaled(2.5):.1f}"])

    assert code == ExitCode.BUDGET, capsys.readouterr()
    record = open_workspace(pair.repo).store.latest()
    assert record is not None and record.status == "needs-person"
    assert record.phase("gate").message.startswith("time budget reached")
    by_name = {g.name: g for g in record.results.gates["unit"].gates}
    assert by_name["quick"].status == "passed"
    assert by_name["slow"].status == "incomplete" and "time budget" in by_name["slow"].reason
    assert by_name["slow"].failures[0].env_category == "time-budget"
    assert not [p for p in procs.identities(pid_file.read_text()) if procs.alive(p)]  # stopped, not left running
    # The next night does not bury it: it waits for a person (resume), exit 4.
    assert main(["nightly", "--repo", str(pair.repo)]) == ExitCode.NEEDS_PERSON


def _night(pair, ws, name: str):
    pair.upstream.commit({f"{name}.py": lines(name)}, f"upstream {name}")
    night = run_nightly(ws, notify=False)
    assert night.record is not None and night.record.status == "done", night.message
    return night.record


@pytest.mark.slow
def test_pruning_keeps_n_and_every_run_a_rollback_ref_or_open_pr_points_at(tmp_path: Path) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    configure(pair, nightly={"keep_runs": 50})
    ws = open_workspace(pair.repo)
    first = run_nightly(ws, notify=False).record
    assert first is not None
    assert main(["promote", "--repo", str(pair.repo), "--allow-ungated"]) == 0  # rollback ref -> first
    second, third, fourth = (_night(pair, ws, n) for n in ("n2", "n3", "n4"))
    # The third's pushed head is an open PR at the newest duplicate-work check.
    for record, pr in ((third, 7), (fourth, None)):
        fresh = ws.store.load(record.run_id)
        check = DuplicateCheck(
            repo="acme/vllm",
            checked_at="2026-01-01T00:00:00+00:00",
            head_branch="other",
            base="main",
            upstream_commits=1,
            open_prs=(OpenPull(number=7, title="sync", head="sync/fork-upstream"),),
        )
        fresh.results.publish = PublishResult(
            status="published" if pr else "refused",
            repo="acme/vllm",
            remote="origin",
            head_branch="sync/fork-upstream" if pr else "x",
            base="main",
            pr_number=pr,
            duplicate_check=check,
        )
        ws.store.save(fresh)

    pruned = prune_runs(ws, keep=1)

    assert pruned == (second.run_id,)
    gone = ws.store.load(second.run_id)
    assert not Path(gone.worktree).exists() and not ws.repo.ref_exists(f"refs/heads/{gone.sync_branch}")
    assert not ws.repo.ref_exists(gone.backup_ref) and any(n.startswith("pruned:") for n in gone.notes)
    for kept in (first, third, fourth):
        assert Path(kept.worktree).is_dir(), kept.run_id
    assert prune_runs(ws, keep=1) == ()  # idempotent


def test_systemd_units_verify(tmp_path: Path) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [], [])
    configure(pair)
    ws = open_workspace(pair.repo)
    units = systemd_units(ws, at="03:15", executable=sys.executable)
    timer = units[f"ds4sync-nightly-{pair.repo.name}.timer"]
    assert "Persistent=true" in timer and "OnCalendar=*-*-* 03:15:00" in timer
    service = units[f"ds4sync-nightly-{pair.repo.name}.service"]
    assert f"ExecStart={sys.executable} nightly --repo {pair.repo}" in service
    folder = tmp_path / "units"
    folder.mkdir()
    for name, text in units.items():
        (folder / name).write_text(text)
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    done = subprocess.run(
        [analyze, "verify", *(str(folder / n) for n in units)], capture_output=True, text=True, timeout=scaled(60)
    )
    assert done.returncode == 0, done.stderr
    assert "Unknown key" not in done.stderr and "ignoring" not in done.stderr.lower(), done.stderr


def test_nightly_install_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [], [])
    configure(pair)
    assert main(["nightly", "install", "--cron", "--repo", str(pair.repo), "--at", "04:05"]) == 0
    assert capsys.readouterr().out.startswith("5 4 * * * ")
    target = tmp_path / "user-units"
    assert main(["nightly", "install", "--systemd", "--repo", str(pair.repo), "--write", str(target)]) == 0
    assert sorted(p.suffix for p in target.iterdir()) == [".service", ".timer"]
    assert main(["nightly", "install", "--repo", str(pair.repo)]) == ExitCode.USAGE
    assert main(["nightly", "install", "--cron", "--repo", str(pair.repo), "--at", "24:00"]) == ExitCode.USAGE


def test_a_failed_sync_keeps_failing_while_nothing_moves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    failing = {"name": "broken", "kind": "command", "run": {"argv": ["{python}", "-c", "raise SystemExit(1)"]}}
    (profile / "gates" / "unit.yaml").write_text(yaml.safe_dump({"tier": "unit", "gates": [failing]}))
    configure(pair, profile=str(profile), gates={"tiers": ["unit"], "python": sys.executable})
    assert main(["nightly", "--repo", str(pair.repo)]) == ExitCode.FAILED
    capsys.readouterr()
    assert main(["nightly", "--repo", str(pair.repo)]) == ExitCode.FAILED
    out = capsys.readouterr().out
    assert "nothing moved since run" in out and "(failed)" in out
    assert run_count(pair) == 1
    # Upstream moves on: a new sync (the sync branch of the failed run is another upstream's).
    pair.upstream.commit({"c.py": lines("c")}, "upstream moves")
    assert main(["nightly", "--repo", str(pair.repo)]) == ExitCode.FAILED and run_count(pair) == 2


# Repository paths holding what crontab(5) and systemd.unit(5) read as syntax: % (a newline in a crontab
# command; a specifier in a unit), $ (a variable in ExecStart), a space and a quote.
ODD_PATHS = ["per%cent", "100%%done%", "%h-and-$UNSET_DS4", "sp ace's %n"]
RECORD_ARGV = (
    "import json, os, sys\n"
    "open(sys.argv[0] + '.argv', 'w').write(json.dumps(sys.argv[1:]))\n"
    "open(sys.argv[0] + '.path', 'w').write(os.environ['PATH'])\n"
)


def _installing_path(first: Path) -> list[str]:
    """The PATH a night is installed with: ``first``, then this process's PATH, each folder once."""
    return list(dict.fromkeys(p for p in (str(first), *os.environ["PATH"].split(os.pathsep)) if p))


def _cron_command(line: str) -> str:
    """The command cron runs for ``line``: the sixth field on; an unescaped % would end it (crontab(5)),
    and cron drops the backslash of an escaped one."""
    command = line.split(maxsplit=5)[5]
    assert "%" not in command.replace("\\%", ""), f"an unescaped % ends the command early: {line}"
    return command.replace("\\%", "%")


@pytest.mark.parametrize("name", ODD_PATHS)
def test_cron_line_runs_nightly_on_a_path_with_crontab_syntax(tmp_path: Path, name: str) -> None:
    pair = make_pair(tmp_path / name, {"a.py": lines("a")}, [], [])
    configure(pair)
    program = tmp_path / "fake-ds4sync"
    program.write_text(f"#!{sys.executable}\n{RECORD_ARGV}")
    program.chmod(0o755)
    from ds4sync.loop.nightly import cron_line

    command = _cron_command(cron_line(open_workspace(pair.repo), executable=str(program)))
    # as cron hands it to the shell, with cron's own PATH
    subprocess.run(["/bin/sh", "-c", command], check=True, timeout=scaled(60), env={"PATH": "/usr/bin:/bin"})
    import json

    argv = json.loads(Path(str(program) + ".argv").read_text())
    assert argv[:3] == ["nightly", "--repo", str(pair.repo)]
    # the night finds what the installing shell finds: the ds4sync folder first, then the PATH it was installed with
    night_path = Path(str(program) + ".path").read_text().split(os.pathsep)
    assert night_path == _installing_path(program.parent)
    assert (pair.repo / ".git" / "ds4sync" / "nightly.log").is_file()  # the redirect reached the right file


@pytest.mark.parametrize("name", ODD_PATHS)
def test_systemd_units_escape_specifiers_and_variables(tmp_path: Path, name: str) -> None:
    pair = make_pair(tmp_path / name, {"a.py": lines("a")}, [], [])
    configure(pair)
    units = systemd_units(open_workspace(pair.repo), executable=sys.executable)
    service = units[f"ds4sync-nightly-{pair.repo.name}.service"]
    values = dict(line.split("=", 1) for line in service.splitlines() if "=" in line and not line.startswith("#"))
    unescaped = lambda v: v.replace("%%", "")  # noqa: E731
    for key in ("Description", "WorkingDirectory", "ExecStart", "StandardOutput"):
        assert "%" not in unescaped(values[key]), f"{key} holds a specifier: {values[key]}"
    assert values["WorkingDirectory"].replace("%%", "%") == str(pair.repo)
    path = os.pathsep.join(_installing_path(Path(sys.executable).parent))
    assert values["Environment"] == '"PATH=' + path.replace("%", "%%") + '"'
    assert "$" not in values["ExecStart"].replace("$$", ""), values["ExecStart"]
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    folder = tmp_path / "units"
    folder.mkdir()
    for file, text in units.items():
        (folder / file).write_text(text)
    done = subprocess.run([analyze, "verify", *(str(folder / n) for n in units)], capture_output=True, text=True)
    assert done.returncode == 0 and "specifier" not in done.stderr.lower(), done.stderr
