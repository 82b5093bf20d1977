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
