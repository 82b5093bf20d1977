"""The tests' process identities (tests/procs.py): a process is named by pid and start time, never pid alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import procs


def test_an_identity_is_alive_while_that_process_runs_and_never_for_another_with_its_pid(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    body = "print(identity(os.getpid()), flush=True)\ntime.sleep(60)\n"
    script.write_text(f"import os, time\n{procs.IDENTITY}\n{body}")
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        [found] = procs.identities(child.stdout.readline())
        assert found[0] == child.pid and procs.alive(found)
        assert not procs.alive((child.pid, found[1] + 1))  # the same pid, started at another time: not this one
    finally:
        child.kill()
        child.wait()
    assert not procs.alive(found)
