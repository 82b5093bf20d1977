"""One factor for every wait and time limit in the tests, so that a loaded machine stretches them all alike.

A limit that holds on an idle machine is multiplied by :func:`time_factor`: the load per core (the one-minute
load average, or the processes runnable right now when more) when the machine is busier than its cores
(capped at 4), times ``DS4SYNC_TEST_TIME_FACTOR`` (default 1; CI on a slow runner raises it; the spinning
processes of ``scripts/test.sh --stress`` show in the load). Behaviour a test checks, such as "a gate that
runs past its timeout is an error", keeps its meaning; only the room the machine gets to reach it grows.
"""

from __future__ import annotations

import math
import os

ENV = "DS4SYNC_TEST_TIME_FACTOR"
_LOAD_CAP = 4.0


def time_factor() -> float:
    """How much longer than on an idle machine a wait may take here: >= 1.0, a plain number.

    Raises ValueError (naming the variable) when ``DS4SYNC_TEST_TIME_FACTOR`` is not a number >= 1.
    """
    raw = os.environ.get(ENV, "1")
    try:
        asked = float(raw)
    except ValueError:
        raise ValueError(f"{ENV}={raw!r} is not a number; set it to 1 or more (e.g. {ENV}=2)") from None
    if not asked >= 1.0:
        raise ValueError(f"{ENV}={raw!r} is below 1; set it to 1 or more (e.g. {ENV}=2)")
    load = max(os.getloadavg()[0], _running_now()) / max(1, os.cpu_count() or 1)
    return asked * min(_LOAD_CAP, max(1.0, load))


def _running_now() -> float:
    """The processes runnable at this moment besides this one (``/proc/loadavg``'s fourth field; 0 where absent).

    The one-minute load average trails a load that just began (``scripts/test.sh --stress`` starts its spinning
    processes a few seconds before pytest collects) by about a minute; this count does not.
    """
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            return max(0.0, float(handle.read().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        return 0.0


def scaled(seconds: float) -> float:
    """``seconds`` (a limit that holds on an idle machine) times :func:`time_factor`."""
    return seconds * time_factor()


def scaled_s(seconds: float) -> int:
    """:func:`scaled`, rounded up to whole seconds (for limits that config files take as integers)."""
    return math.ceil(scaled(seconds))
