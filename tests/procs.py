"""Processes named by identity (pid and start time), never by pid alone.

The machines these tests run on reuse pids within minutes: a container's ``/proc/sys/kernel/pid_max`` can be
32768, and the suite starts hundreds of git and ds4sync processes a second. "pid N is alive" after a test's stop
can then be another test's process. A child the test asks about writes ``pid:ticks`` tokens (:data:`IDENTITY`,
pasted into the child's source), and the test asks :func:`alive` of what it read back.
"""

from __future__ import annotations

from ds4sync.core.children import start_ticks
from ds4sync.core.proc import pid_alive

#: Source of ``identity(pid) -> "pid:ticks"`` for a child script: its start time in clock ticks since boot,
#: field 22 of ``/proc/<pid>/stat`` (read after the command name, which may hold spaces and parentheses).
IDENTITY = """
def identity(pid):
    with open(f"/proc/{pid}/stat") as stat:
        ticks = stat.read().rsplit(") ", 1)[1].split()[19]
    return f"{pid}:{ticks}"
"""

Identity = tuple[int, int]


def identities(text: str) -> list[Identity]:
    """The ``pid:ticks`` tokens of ``text`` (white space between them)."""
    found = []
    for token in text.split():
        pid, ticks = token.split(":")
        found.append((int(pid), int(ticks)))
    return found


def alive(identity: Identity) -> bool:
    """Whether that very process still runs (not a zombie, and not a later process given the same pid)."""
    pid, ticks = identity
    return pid_alive(pid) and start_ticks(pid) == ticks
