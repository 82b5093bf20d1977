"""The one stop routine and the child registry, on real process groups (shells and their children)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ds4sync.core.children import ChildRegistry, start_ticks
from ds4sync.core.proc import group_members, spawn, stop_process_group
from tests.timing import scaled

# A group leader that starts two grandchildren (like an API server with its engine core and a worker),
# writes their pids, and optionally ignores SIGINT/SIGTERM.
TREE = """
import os, signal, subprocess, sys, time
ignore = sys.argv[2] == "stubborn"
if ignore:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
code = "import signal, sys, time\\n" + (
    "signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n" if ignore else ""
) + "open(sys.argv[1], 'a').write('x'); time.sleep(600)"
kids = [subprocess.Popen([sys.executable, "-c", code, sys.argv[1] + ".ready"]) for _ in range(2)]
open(sys.argv[1], "w").write(" ".join(str(k.pid) for k in kids))
if sys.argv[3] == "leader-exits":
    os._exit(0)
time.sleep(600)
"""


def _tree(
    tmp_path: Path, mode: str = "polite", leader: str = "leader-stays"
) -> tuple[subprocess.Popen[bytes], list[int]]:
    pids_file = tmp_path / "pids"
    proc = spawn([sys.executable, "-c", TREE, str(pids_file), mode, leader], cwd=tmp_path, log_path=tmp_path / "log")
    ready = Path(f"{pids_file}.ready")
    deadline = time.monotonic() + 60
    while not (ready.is_file() and len(ready.read_text()) >= 2 and pids_file.is_file() and pids_file.read_text()):
        assert time.monotonic() < deadline, "process tree did not start"
        time.sleep(0.05)
    return proc, [int(p) for p in pids_file.read_text().split()]


@pytest.mark.parametrize("mode", ["polite", "stubborn"])
def test_stop_ends_the_whole_group(tmp_path: Path, mode: str) -> None:
    proc, kids = _tree(tmp_path, mode)
    assert set(kids) <= set(group_members(proc.pid))
    start = time.monotonic()
    code = stop_process_group(proc.pid, grace_s=0.5, proc=proc)
    assert group_members(proc.pid) == []
    # a polite group ends on SIGINT; a stubborn one only on SIGKILL, after both graces
    assert code == (-signal.SIGINT if mode == "polite" else -signal.SIGKILL)
    assert (time.monotonic() - start >= 1.0) == (mode == "stubborn")


def test_stop_ends_the_group_after_its_leader_is_gone(tmp_path: Path) -> None:
    proc, kids = _tree(tmp_path, "stubborn", "leader-exits")
    proc.wait(timeout=scaled(30))
    assert set(group_members(proc.pid)) == set(kids)  # the leader is gone, its children are not
    stop_process_group(proc.pid, grace_s=0.2)
    assert group_members(proc.pid) == []


def test_stop_wakes_a_stopped_group(tmp_path: Path) -> None:
    proc, _kids = _tree(tmp_path)
    os.killpg(proc.pid, signal.SIGSTOP)
    code = stop_process_group(proc.pid, grace_s=5, proc=proc)
    assert code == -signal.SIGINT and group_members(proc.pid) == []  # SIGCONT let SIGINT through, no SIGKILL needed


def test_registry_reaps_groups_of_a_dead_owner_only(tmp_path: Path) -> None:
    registry = ChildRegistry(tmp_path / "children")
    # An owner process (a stand-in for ds4sync) starts a tree, registers it, and is killed with SIGKILL.
    owner_code = f"""
import sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
from pathlib import Path
from ds4sync.core.children import ChildRegistry
from ds4sync.core.proc import spawn
proc = spawn([sys.executable, "-c", {TREE!r}, {str(tmp_path / "pids")!r}, "polite", "leader-stays"],
             cwd={str(tmp_path)!r}, log_path={str(tmp_path / "log")!r})
ChildRegistry(Path({str(tmp_path / "children")!r})).register(proc.pid, ["tree"], label="test")
print(proc.pid, flush=True)
time.sleep(600)
"""
    owner = subprocess.Popen([sys.executable, "-c", owner_code], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    pgid = int(owner.stdout.readline())
    deadline = time.monotonic() + 60
    while not (tmp_path / "pids").is_file() or not (tmp_path / "pids").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    [entry] = registry.entries()
    assert entry.pgid == pgid and entry.owner_pid == owner.pid and entry.leader_start_ticks == start_ticks(pgid)
    assert registry.reap_orphans() == [] and group_members(pgid)  # the owner lives: its group is left alone
    owner.kill()
    owner.wait(timeout=scaled(30))
    assert len(group_members(pgid)) == 3  # the server tree outlives a SIGKILLed owner
    ended = registry.reap_orphans(grace_s=5)
    assert [e.pgid for e in ended] == [pgid]
    assert group_members(pgid) == [] and registry.entries() == []


def test_registry_leaves_a_reused_pid_alone(tmp_path: Path) -> None:
    registry = ChildRegistry(tmp_path / "children")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        entry = registry.register(other.pid, ["something else"])
        # pretend the registered leader started at another time and its owner is gone
        forged = entry.model_copy(
            update={"leader_start_ticks": (entry.leader_start_ticks or 0) + 1, "owner_pid": 2**22}
        )
        (tmp_path / "children" / f"{other.pid}.json").write_text(forged.model_dump_json())
        assert registry.reap_orphans() == []
        assert other.poll() is None and registry.entries() == []
    finally:
        other.kill()
        other.wait()
