"""Plain-text report lines for serving results (pure: no clock, no environment)."""

from __future__ import annotations

from ds4sync.serving.gate import cold_boot_line
from ds4sync.serving.results import ServingResult


def serving_lines(result: ServingResult) -> list[str]:
    """One line per probe after a header, e.g. ``kv_capacity  passed  unchanged 9.63 GiB / 1,778,916 tokens``."""
    counts = result.counts()
    lines = [f"serving {result.status}: {counts['passed']} passed, {counts['failed']} failed, "
             f"{counts['skipped']} skipped ({result.base_url}; {cold_boot_line(result)})"]
    if result.wedged:
        lines.append(f"server unresponsive {result.wedged}")
    lines += [f"{p.name:<12} {p.status:<8} {p.summary}" for p in result.probes]
    if result.server_log:
        lines.append(f"server log: {result.server_log}")
    return lines
