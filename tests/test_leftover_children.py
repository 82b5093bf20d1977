"""Every command that touches a run stops the children its dead command registered, with the one stop routine,
and says so in one line: not only ``resume``, ``abort`` and ``nightly``, but ``merge``, ``promote``, ``status``,
``report`` and ``gate`` (which would otherwise run beside them in the same worktree).

A dead run's child is made for real: a helper process starts a process group (``sleep``), registers it in the
run's children folder as ds4sync's runner does, and exits, so the group's owner is gone and the group lives on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ds4sync.cli import main
from ds4sync.core.proc import group_members, stop_process_groups
from tests.scenarios import BRANCH, lines, make_pair

ORPHAN = textwrap.dedent("""
    import subprocess, sys
    from pathlib import Path
    from ds4sync.core.children import ChildRegistry
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child = subprocess.Popen(["sleep", "300"], start_new_session=True, **quiet)
    ChildRegistry(Path(sys.argv[1])).register(child.pid, ["sleep", "300"], label="gate")
    print(child.pid)
""")


def orphan_group(run_dir: Path) -> int:
    """A process group registered under ``run_dir/children`` whose registering process has exited."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", ORPHAN, str(run_dir / "children")], env=env, capture_output=True, text=True, check=True
    )
    pgid = int(done.stdout.strip())
    assert group_members(pgid), "the orphan group should be running"
    return pgid


@pytest.fixture
def run_dir(tmp_path: Path):
    pair = make_pair(tmp_path, {"f.py": lines("a")}, [{"f.py": lines("a", "up")}], [{"g.py": lines("fork")}])
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    (profile / "patches").mkdir()
    (profile / "gates" / "unit.yaml").write_text(
        "tier: unit\ngates:\n  - {name: a, kind: command, run: {argv: ['true']}}\n"
    )
    (pair.repo / "ds4sync.yaml").write_text(f"fork: {{branch: {BRANCH}}}\nprofile: {profile}\n")
    assert main(["merge", "upstream/main", "--repo", str(pair.repo)]) == 0
    (record,) = (pair.repo / ".git" / "ds4sync" / "runs").glob("*/record.json")
    return pair.repo, record.parent


COMMANDS = {
    "status": ("status",),
    "report": ("report", "--out", "{tmp}/pr.md"),
    "gate": ("gate", "--tier", "unit"),
    "promote": ("promote",),  # refused (nothing proven yet), but after stopping them
    "merge": ("merge", "upstream/main"),  # refused (a run is active), but after stopping them
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_that_touches_a_run_stops_a_dead_runs_children(
    run_dir, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    repo, folder = run_dir
    pgids = [orphan_group(folder), orphan_group(folder)]
    try:
        args = [a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[command]]
        main([*args, "--repo", str(repo)])
        err = capsys.readouterr().err
        assert not [g for g in pgids if group_members(g)], f"`{command}` left the dead run's children alive"
        said = [line for line in err.splitlines() if "process group(s) left by the interrupted run" in line]
        assert len(said) == 1 and all(str(g) in said[0] for g in pgids), err
        assert not list((folder / "children").glob("*.json")), "their registry entries are dropped"
    finally:
        stop_process_groups(pgids, grace_s=0.5)


def test_a_live_commands_children_are_left_alone(run_dir, capsys: pytest.CaptureFixture[str]) -> None:
    """A group whose registering process still runs (a command at work) is not touched by `status`."""
    repo, folder = run_dir
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    from ds4sync.core.children import ChildRegistry

    ChildRegistry(folder / "children").register(child.pid, ["sleep", "300"])  # owner: this (live) process
    try:
        assert main(["status", "--repo", str(repo)]) == 0
        assert group_members(child.pid) and "left by the interrupted run" not in capsys.readouterr().err
        assert json.loads((folder / "children" / f"{child.pid}.json").read_text())["pgid"] == child.pid
    finally:
        child.kill()
        child.wait()
