"""Deterministic fault injection: ``DS4SYNC_FAULT=<point>`` makes the process SIGKILL itself at that point.

The pipeline calls :func:`point` at named places (phase boundaries, between ``git apply`` and
the commit, between the merge commit and the record write, right after a gate child started...).
With the variable unset, a call costs one environment lookup. The test suite kills a run at
each point and proves that ``resume`` and ``abort`` recover from it; nothing else sets it.

Point names are dotted words, e.g. ``phase.commit.after`` or ``replay.applied.<patch-set id>``;
``<point>@N`` kills at the N-th time the point is reached (``atomic-write.before-replace@5``: inside
the fifth atomic write). :data:`POINTS_SEEN_ENV` names a file that each reached point is
appended to (one per line), so a test can list the points a clean run passes.
"""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

FAULT_ENV = "DS4SYNC_FAULT"
POINTS_SEEN_ENV = "DS4SYNC_FAULT_TRACE"


_hits: dict[str, int] = {}


def point(name: str) -> None:
    """Kill this process with SIGKILL when ``DS4SYNC_FAULT`` names this point (no cleanup runs)."""
    trace = os.environ.get(POINTS_SEEN_ENV)
    if trace:
        with open(trace, "a", encoding="utf-8") as handle:
            handle.write(name + "\n")
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    target, _, nth = wanted.partition("@")
    if target != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= (int(nth) if nth.isdigit() else 1):
        os.kill(os.getpid(), signal.SIGKILL)


#: The states of git's ``reference-transaction`` hook a kill inside git can be placed at: ``prepared`` (the
#: ref is locked, not moved: for ``git commit``, the commit object and ``index.lock`` exist, HEAD is old) and
#: ``committed`` (the ref moved; ``git commit`` has not yet renamed ``index.lock`` to ``index``).
GIT_STATES = ("prepared", "committed")


def inside_git(name: str) -> tuple[str, ...]:
    """``-c core.hooksPath=DIR`` for a git command, when ``DS4SYNC_FAULT`` is ``git.<name>.<state>``: DIR holds a
    ``reference-transaction`` hook that, at ``state`` (:data:`GIT_STATES`), SIGKILLs that git and this process
    (as a kill of the whole process group would), so the kill lands inside git; else ``()``."""
    trace = os.environ.get(POINTS_SEEN_ENV)
    if trace:
        with open(trace, "a", encoding="utf-8") as handle:
            handle.write(f"git.{name}\n")
    wanted = os.environ.get(FAULT_ENV, "")
    prefix = f"git.{name}."
    if not wanted.startswith(prefix) or wanted[len(prefix) :] not in GIT_STATES:
        return ()
    folder = Path(tempfile.mkdtemp(prefix="ds4sync-fault-hooks-"))
    hook = folder / "reference-transaction"
    state = wanted[len(prefix) :]
    hook.write_text(f'#!/bin/sh\n[ "$1" = "{state}" ] || exit 0\nkill -9 "$PPID" {os.getpid()}\nsleep 10\n')
    hook.chmod(0o755)
    return ("-c", f"core.hooksPath={folder}")


def point_holding_lock(name: str, lock: Path) -> None:
    """:func:`point`, killed the way git is killed inside its lock window: when ``DS4SYNC_FAULT`` names this
    point, ``lock`` is first created as git's lockfile API creates it (``O_CREAT|O_EXCL``, the new content
    half written) and nobody removes it: what SIGKILL leaves when it hits ``git commit`` between taking
    ``index.lock`` and renaming it to ``index`` (git runs no hook inside that window to kill it at)."""
    if os.environ.get(FAULT_ENV, "").partition("@")[0] == name:
        index = lock.with_name(lock.name.removesuffix(".lock"))
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        with os.fdopen(fd, "wb") as handle:
            handle.write(index.read_bytes()[: max(12, index.stat().st_size // 2)] if index.exists() else b"DIRC")
    point(name)
