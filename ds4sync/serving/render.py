"""Plain-text report lines for serving results (pure: no clock, no environment)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from ds4sync.models.serving_results import ABResult, ServingResult
from ds4sync.serving.gate import cold_boot_line

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
    errors = f"{counts['error']} error, " if counts["error"] else ""
    lines = [
        f"serving {result.status}: {counts['passed']} passed, {counts['failed']} failed, {errors}"
        f"{counts['skipped']} skipped ({result.base_url}; {cold_boot_line(result)})"
    ]
    lines += startup_lines(result)
    if result.wedged:
        lines.append(f"server unresponsive {result.wedged}")
    if result.deadline_passed:
        lines.append(f"the overall deadline of {result.deadline_s:g} s passed; later probes skipped")
    lines += [f"{p.name:<12} {p.status:<8} {p.summary}" for p in result.probes]
    lines += probe_rows_lines(result)
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
        elif probe.status == "error":
            parts.append(f"{probe.name} ERROR ({probe.summary})")
    return "; ".join(parts)


LATENCIES = ("ttft", "tpot", "itl", "e2el")
SERVER_KEYS = (
    ("preemptions", "preemptions"),
    ("running_max", "running max"),
    ("waiting_max", "waiting max"),
    ("kv_usage_max_pct", "KV usage max %"),
)


def _n(value: float) -> str:
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"


def row_line(name: str, values: Mapping[str, float]) -> str:
    """Every number of one bench row in one compact line (bare keys of ``vllm bench serve`` and ds4sync's
    /metrics keys), e.g. ``c4: 295.1 tok/s, 3.20 req/s, lost 0; ttft ms mean/p50/p90/p95/p99 12/11/13/13/14;
    ...; server: preemptions 0, running max 4, waiting max 0, KV usage max % 12.5``."""
    head = []
    if "output_throughput" in values:
        head.append(f"{_n(values['output_throughput'])} tok/s")
    if "request_throughput" in values:
        head.append(f"{values['request_throughput']:.2f} req/s")
    if "request_goodput" in values:
        head.append(f"goodput {values['request_goodput']:.2f} req/s")
    if "lost_requests" in values:
        head.append(f"lost {values['lost_requests']:g}")
    parts = [", ".join(head)] if head else []
    for lat in LATENCIES:
        stats = [s for s in _stat_names(values, lat) if f"{s}_{lat}_ms" in values]
        if stats:
            parts.append(f"{lat} ms {'/'.join(stats)} " + "/".join(_n(values[f"{s}_{lat}_ms"]) for s in stats))
    server = [f"{label} {values[key]:g}" for key, label in SERVER_KEYS if key in values]
    if server:
        parts.append("server: " + ", ".join(server))
    return f"{name}: " + "; ".join(parts)


def _stat_names(values: Mapping[str, float], lat: str) -> list[str]:
    pcts = sorted(
        (k.split("_", 1)[0] for k in values if k.startswith("p") and k.endswith(f"_{lat}_ms")),
        key=lambda p: float(p[1:]) if p[1:].replace(".", "", 1).isdigit() else 0.0,
    )
    middle = [] if "p50" in pcts else ["median"]
    return ["mean", *middle, *pcts, "std"]


def rows_of(values: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """``{"c4.p99_ttft_ms": 14.0, "boot_s": 50}`` -> ``{"c4": {"p99_ttft_ms": 14.0}, "": {"boot_s": 50}}``."""
    rows: dict[str, dict[str, float]] = {}
    for key, value in values.items():
        row, _, bare = key.rpartition(".")
        rows.setdefault(row, {})[bare] = value
    return rows


def probe_rows_lines(result: ServingResult) -> list[str]:
    """Every bench row's numbers of the throughput probe, one compact line each (indented)."""
    lines = []
    for probe in result.probes:
        for row in probe.details.get("rows") or ():
            values = {**(row.get("metrics") or {})}
            lines.append("  " + row_line(str(row.get("name")), values))
    return lines


def ab_measured_lines(result: ABResult) -> list[str]:
    """Per side and bench row, the median over its judged runs of every measured number (one compact line each),
    the boot times, and each re-run pair."""
    lines = []
    for side, word in (("A", "baseline"), ("B", "candidate")):
        runs = [s for s in result.steps if s.side == side and not s.replaced]
        if not runs:
            continue
        keys = sorted({k for s in runs for k in s.values})
        medians = {k: statistics.median([s.values[k] for s in runs if k in s.values]) for k in keys}
        boots = [s.boot_s for s in result.steps if s.side == side and s.boot_s is not None]
        for row, values in rows_of(medians).items():
            if row:
                lines.append(f"{side} {word} median of {len(runs)} run(s): " + row_line(row, values))
        if boots:
            lines.append(f"{side} {word} boot s: " + ", ".join(f"{b:.1f}" for b in boots))
    lines += [f"re-run: {line}" for line in result.reruns]
    return lines
