"""Markdown rendering of a suite report (plain dict, as returned by ``suite.run_suite``)."""

from __future__ import annotations


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def markdown(report: dict) -> str:
    """Environment header, per-op pass/fail counts with failures listed, and the benchmark table."""
    env = report["environment"]
    lines = [
        "# Kernel-check suite",
        "",
        f"GPU: {env.get('gpu') or env['device']} · driver {env.get('driver') or '-'} · torch {env['torch']} · "
        f"triton {env['triton']} · {env['date']} · scale {report['scale']} · "
        f"determinism repeats {report['repeats']}",
        "",
        "| op | implementation | pass | fail | error | skip |",
        "|---|---|---|---|---|---|",
    ]
    for op in report["ops"]:
        count = {s: sum(c["status"] == s for c in op["cases"]) for s in ("pass", "fail", "error", "skip")}
        lines.append(
            f"| {op['op']} | {op['impl']} | {count['pass']} | {count['fail']} | {count['error']} | {count['skip']} |"
        )
    bad = [(op["op"], c) for op in report["ops"] for c in op["cases"] if c["status"] in ("fail", "error")]
    if bad:
        lines += ["", "Failures:", ""] + [f"- {o} {c['name']}: {c['status']}: {c['detail']}" for o, c in bad]
    if report.get("bench"):
        lines += [
            "",
            "| op | case | time µs | ref µs | speed-up | GB/s | TFLOP/s | % roofline | % HBM | % peak | "
            "timing | flags |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in report["bench"]:
            lines.append(
                f"| {r['op']} | {r['case']} | {r['time_us']:.1f} | {r['ref_time_us']:.1f} | {r['speedup']:.1f}x | "
                f"{r['gb_per_s']:.0f} | {r['tflop_per_s']:.1f} | {r['pct_roof']:.1%} | {r['pct_hbm']:.1%} | "
                f"{_fmt(r['pct_peak'], '.1%')} | {r.get('timing', '-')}/{r.get('ref_timing', '-')} | "
                f"{'; '.join(r['flags']) or 'ok'} |"
            )
    return "\n".join(lines) + "\n"
