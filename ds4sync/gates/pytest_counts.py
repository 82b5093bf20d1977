"""A pytest plugin, loaded into the gate's own pytest run, that writes pytest's own counts as JSON.

The terminal's summary line is text a test or plugin can imitate (or print after it);
this plugin asks pytest's terminal reporter for the same line it prints
(``build_summary_stats_line``) and the node ids of the xpassed tests (JUnit does not mark
them), and writes them to the file named by ``DS4SYNC_PYTEST_COUNTS``. It imports nothing
but the standard library and pytest, so it loads in any environment: the pytest kind copies
this file next to the gate's logs and puts that folder on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
from typing import Any

ENV = "DS4SYNC_PYTEST_COUNTS"
MODULE = "ds4sync_pytest_counts"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """Write ``{"line": "3 passed, 1 deselected", "xpassed": [node ids], "exitstatus": 0}``."""
    path = os.environ.get(ENV)
    if not path:
        return
    try:
        parts, _ = terminalreporter.build_summary_stats_line()
        line = ", ".join(text for text, _markup in parts)
    except Exception:  # an older pytest: the caller falls back to the printed line
        line = None
    stats = terminalreporter.stats
    xpassed = [getattr(r, "nodeid", "") for r in stats.get("xpassed", [])]
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"line": line, "xpassed": xpassed, "exitstatus": int(exitstatus)}, handle)
