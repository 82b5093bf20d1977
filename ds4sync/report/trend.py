"""The trend over nights: one self-contained HTML page of plots over every recorded run.

Per run: conflicts and how they were resolved, gates passed / failed / environment-only, build
time, kernel throughput (GB/s of each benchmarked op), serving throughput (tok/s) and KV-cache
capacity (tokens). Values come from the same typed views as the report (merge, build, probes) and
from the gate results the gate phase recorded; a run that did not measure something leaves a gap,
never a zero.

The page embeds plotly.js (no network at view time: no CDN, no MathJax, no fonts fetched).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import Field

from ds4sync.core.model import FrozenModel
from ds4sync.core.redact import redact
from ds4sync.models.gates_details import AnyGateDetails, KernelDetails, ServingDetails
from ds4sync.models.gates_status import gate_green, gate_ran
from ds4sync.models.record import RecordStore, RunRecord


def gate_bucket(status: str) -> str:
    """The trend's bucket of a gate status: ``passed`` (green by :func:`ds4sync.models.gates_status.gate_green`),
    ``failed`` (failed or error), ``environment-only`` (incomplete) or ``skipped`` (skipped or not-run)."""
    if gate_green(status):
        return "passed"
    if not gate_ran(status):
        return "skipped"
    return "environment-only" if status == "incomplete" else "failed"


MAX_SERIES = 8


class NightPoint(FrozenModel):
    """What one run measured, in plain numbers (None or absent: not measured that night).

    ``conflicts`` maps a resolution (recorded, rule, person, unresolved...) to its file count;
    ``gates`` a bucket (passed, failed, environment-only, skipped) to its gate count; the
    throughput maps go from a series name (op and case, or probe name) to GB/s or tok/s.
    """

    run_id: str
    created_at: str
    status: str
    upstream: str
    conflicts: dict[str, int] = Field(default_factory=dict)
    gates: dict[str, int] = Field(default_factory=dict)
    build_s: float | None = None
    kernel_gb_s: dict[str, float] = Field(default_factory=dict)
    serving_tok_s: dict[str, float] = Field(default_factory=dict)
    kv_tokens: float | None = None

    @property
    def label(self) -> str:
        """The x-axis label: date and time of the run, and the upstream SHA it synced."""
        return f"{self.created_at[:16].replace('T', ' ')} {self.upstream[:7]}"


def _gate_numbers(details: AnyGateDetails, kernel: dict[str, float], serving: dict[str, float]) -> float | None:
    """Adds a gate's kernel bandwidths (GB/s per ``op case``) and serving probe values to ``kernel`` and
    ``serving``; the KV-cache capacity it measured (tokens), if any."""
    kv = None
    if isinstance(details, KernelDetails) and details.kernel is not None:
        for row in details.kernel.bench:
            kernel[f"{row.op} {row.case}"] = row.gb_per_s
    if isinstance(details, ServingDetails) and details.serving is not None:
        for p in details.serving.probes:
            kv = _probe(p.name, p.value, p.unit, serving) or kv
    return kv


def trend_points(store: RecordStore) -> list[NightPoint]:
    """Every run of ``store`` (aborted ones left out), oldest first, as a :class:`NightPoint`."""
    dated = []
    for run_id in store.run_ids():
        record = store.load(run_id)
        if record.status != "aborted":
            # created_at has whole seconds: runs started in one second are ordered by when each was last saved
            saved = store.record_path(run_id).stat().st_mtime_ns
            dated.append((record.created_at, saved, night_point(record)))
    return [point for _, _, point in sorted(dated, key=lambda item: (item[0], item[1]))]


def night_point(record: RunRecord) -> NightPoint:
    """The numbers of one run, read from its typed results (merge, gates, build, serving, A/B)."""
    results = record.results
    conflicts: dict[str, int] = {}
    for conflict in results.merge.conflicts if results.merge else ():
        key = conflict.resolution or "unresolved"
        conflicts[key] = conflicts.get(key, 0) + 1
    gates: dict[str, int] = {}
    kernel: dict[str, float] = {}
    serving: dict[str, float] = {}
    kv: float | None = None
    for tier in results.gates.values():
        for gate in tier.gates:
            bucket = gate_bucket(gate.status)
            gates[bucket] = gates.get(bucket, 0) + 1
            kv = _gate_numbers(gate.details, kernel, serving) or kv
    if results.serving is not None:
        for p in results.serving.probes:
            kv = _probe(p.name, p.value, p.unit, serving) or kv
    if results.ab is not None:
        for row in results.ab.rows:
            if "tok/s" in row.unit or "throughput" in row.metric:
                serving.setdefault(f"{row.metric} (A/B candidate)", row.candidate_median)
    build = results.build
    return NightPoint(
        run_id=record.run_id,
        created_at=record.created_at,
        status=record.status,
        upstream=record.upstream.sha,
        conflicts=conflicts,
        gates=gates,
        build_s=(build.total_s or build.duration_s) if build is not None else None,
        kernel_gb_s=kernel,
        serving_tok_s=serving,
        kv_tokens=kv,
    )


def _probe(name: Any, value: Any, unit: Any, serving: dict[str, float]) -> float | None:
    """Files a tok/s probe into ``serving``; returns the value of a KV-capacity probe (tokens), else None."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    if unit == "tok/s":
        serving[str(name)] = float(value)
    elif unit == "tokens" and "kv" in str(name).lower():
        return float(value)
    return None


def render_trend(
    points: list[NightPoint], *, title: str = "ds4sync: the trend over nights", public: bool = False
) -> str:
    """The page: six plots over ``points`` and a table of the runs; pure (no files, no clock).

    Returns a complete HTML document with plotly.js inlined.
    """
    plots = _plots(points)
    rows = _run_rows(points, public=public)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:1.5rem}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.25rem .6rem;font-size:.9rem}</style></head><body>\n"
        f"<h1>{html.escape(title)}</h1><p>{len(points)} recorded runs, oldest first. A gap is a night that did "
        "not measure that value.</p>\n"
        f"{plots}\n<h2>Runs</h2><table><tr><th>run</th><th>status</th><th>upstream</th><th>conflicts</th>"
        f"<th>gates</th><th>build (s)</th></tr>{rows}</table>\n</body></html>\n"
    )


def _plots(points: list[NightPoint]) -> str:
    """The six plots over ``points``: an HTML fragment with plotly.js inlined."""
    import plotly.graph_objects as go
    import plotly.io as pio
    from plotly.subplots import make_subplots

    titles = (
        "Conflicted files, by how they were resolved",
        "Gates: passed / failed / environment-only",
        "Build time (s)",
        "Kernel throughput (GB/s)",
        "Serving throughput (tok/s)",
        "KV-cache capacity (tokens)",
    )
    fig = make_subplots(rows=3, cols=2, subplot_titles=titles, vertical_spacing=0.11, horizontal_spacing=0.08)
    x = [p.label for p in points]
    _stacked(fig, go, x, [p.conflicts for p in points], row=1, col=1, group="conflicts")
    _stacked(
        fig,
        go,
        x,
        [p.gates for p in points],
        row=1,
        col=2,
        group="gates",
        order=("passed", "failed", "environment-only", "skipped"),
        colors={"passed": "#2e7d32", "failed": "#c62828", "environment-only": "#f9a825", "skipped": "#9e9e9e"},
    )
    _line(fig, go, x, {"build": [p.build_s for p in points]}, row=2, col=1, group="build")
    _line(fig, go, x, _series(points, "kernel_gb_s"), row=2, col=2, group="kernel")
    _line(fig, go, x, _series(points, "serving_tok_s"), row=3, col=1, group="serving")
    _line(fig, go, x, {"KV tokens": [p.kv_tokens for p in points]}, row=3, col=2, group="kv")
    fig.update_layout(
        barmode="stack",
        height=1150,
        template="plotly_white",
        legend={"groupclick": "toggleitem", "tracegroupgap": 18},
        margin={"l": 60, "r": 30, "t": 50, "b": 60},
    )
    fig.update_xaxes(type="category", tickangle=-30)
    return pio.to_html(
        fig,
        full_html=False,
        include_plotlyjs=True,
        include_mathjax=False,
        config={"displaylogo": False, "responsive": True},
        div_id="trend",
    )


def _run_rows(points: list[NightPoint], *, public: bool) -> str:
    """The runs table's rows, one ``<tr>`` per point, each cell escaped and redacted."""
    return "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(redact(str(c), public=public))}</td>"
            for c in (p.run_id, p.status, p.upstream[:12], _tally(p.conflicts), _tally(p.gates), _fmt(p.build_s))
        )
        + "</tr>"
        for p in points
    )


def _series(points: list[NightPoint], field: str) -> dict[str, list[float | None]]:
    names: list[str] = []
    for p in points:
        names += [n for n in getattr(p, field) if n not in names]
    return {n: [getattr(p, field).get(n) for p in points] for n in names[:MAX_SERIES]}


def _stacked(
    fig: Any,
    go: Any,
    x: list[str],
    counts: list[dict[str, int]],
    *,
    row: int,
    col: int,
    group: str,
    order: Iterable[str] = (),
    colors: Mapping[str, str] | None = None,
) -> None:
    keys = [k for k in order if any(k in c for c in counts)]
    keys += sorted({k for c in counts for k in c} - set(keys))
    if not keys:
        _empty(fig, row, col)
    for key in keys:
        fig.add_trace(
            go.Bar(
                x=x,
                y=[c.get(key, 0) for c in counts],
                name=key,
                legendgroup=group,
                legendgrouptitle_text=group,
                marker_color=(colors or {}).get(key),
            ),
            row=row,
            col=col,
        )


def _line(
    fig: Any, go: Any, x: list[str], series: Mapping[str, list[float | None]], *, row: int, col: int, group: str
) -> None:
    shown = {k: v for k, v in series.items() if any(value is not None for value in v)}
    if not shown:
        _empty(fig, row, col)
    for name, values in shown.items():
        fig.add_trace(
            go.Scatter(
                x=x,
                y=values,
                name=name,
                mode="lines+markers",
                connectgaps=False,
                legendgroup=group,
                legendgrouptitle_text=group,
            ),
            row=row,
            col=col,
        )


def _empty(fig: Any, row: int, col: int) -> None:
    axis = (row - 1) * 2 + col  # make_subplots numbers axes row by row: xaxis, xaxis2, xaxis3...
    suffix = "" if axis == 1 else str(axis)
    x_domain, y_domain = fig.layout[f"xaxis{suffix}"].domain, fig.layout[f"yaxis{suffix}"].domain
    fig.add_annotation(
        text="not measured in any recorded run",
        showarrow=False,
        xref="paper",
        yref="paper",
        x=sum(x_domain) / 2,
        y=sum(y_domain) / 2,
        font={"color": "#888"},
    )


def _tally(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in counts.items()) or "-"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def write_trend(store: RecordStore, path: Any, *, public: bool = False, title: str | None = None) -> int:
    """Render the trend of ``store`` into ``path`` (atomically); returns the number of runs plotted."""
    from pathlib import Path

    from ds4sync.core.files import write_output

    points = trend_points(store)
    write_output(Path(path), render_trend(points, public=public, **({"title": title} if title else {})))
    return len(points)
