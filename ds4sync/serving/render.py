"""Plain-text report lines for serving results (pure: no clock, no environment)."""

from __future__ import annotations

from ds4sync.serving.gate import cold_boot_line
from ds4sync.serving.results import ServingResult


def serving_lines(result: ServingResult) -> list[str]:
    """One line per probe after a header, e.g. ``kv_capacity  passed  unchanged 9.63 GiB / 1,778,916 tokens``."""
    counts = result.counts()
    lines = [
        f"serving {result.status}: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['skipped']} skipped ({result.base_url}; {cold_boot_line(result)})"
    ]
    if result.wedged:
        lines.append(f"server unresponsive {result.wedged}")
    lines += [f"{p.name:<12} {p.status:<8} {p.summary}" for p in result.probes]
    if result.server_log:
        lines.append(f"server log: {result.server_log}")
    return lines


def summary_line(result: ServingResult) -> str:
    """The write-up's one-line form: ``cold boot 41.2 s; health 200; 1/1 exact; unchanged 1.00 GiB / ...``.

    Skipped probes are left out; failed ones are marked ``FAILED``.
    """
    parts = [cold_boot_line(result)]
    for probe in result.probes:
        if probe.status == "passed":
            parts.append(probe.summary.split(";")[0] if probe.name == "health" else probe.summary)
        elif probe.status == "failed":
            parts.append(f"{probe.name} FAILED ({probe.summary})")
    return "; ".join(parts)
