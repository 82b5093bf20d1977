"""Plain-text report lines for serving results (pure: no clock, no environment)."""

from __future__ import annotations

from ds4sync.serving.gate import cold_boot_line
from ds4sync.serving.results import ServingResult

TAIL_LINES = 15


def startup_lines(result: ServingResult) -> list[str]:
    """How the start-up ended: kind, exit code, seconds, and the server log's last lines (when it failed)."""
    startup = result.startup
    if startup is None or startup.kind == "ready":
        return []
    lines = [
        f"start-up: {startup.kind}"
        + (f", exit code {startup.exit_code}" if startup.exit_code is not None else "")
        + (f", after {startup.waited_s:.1f} s" if startup.waited_s is not None else "")
    ]
    if startup.message:
        lines.append(f"  {startup.message}")
    if startup.log_tail:
        lines.append(f"server log tail ({startup.log_path}):")
        lines += [f"  | {line}" for line in startup.log_tail[-TAIL_LINES:]]
    elif startup.started:
        lines.append(f"server log {startup.log_path or '(none)'} is empty")
    return lines


def serving_lines(result: ServingResult) -> list[str]:
    """One line per probe after a header, e.g. ``kv_capacity  passed  unchanged 9.63 GiB / 1,778,916 tokens``."""
    counts = result.counts()
    lines = [
        f"serving {result.status}: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['skipped']} skipped ({result.base_url}; {cold_boot_line(result)})"
    ]
    lines += startup_lines(result)
    if result.wedged:
        lines.append(f"server unresponsive {result.wedged}")
    if result.deadline_passed:
        lines.append(f"the overall deadline of {result.deadline_s:g} s passed; later probes skipped")
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
