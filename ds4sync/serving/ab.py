"""A/B runs: interleaved measurements of a baseline and a candidate, judged per metric.

A side is one of:

- recorded measurements: JSON files, each one measurement (a ``vllm bench serve --save-result``
  file, a serving-gate result, or a run record holding one), or one samples file
  ``{"samples": {"metric": [v1, v2, ...]}}``; pairs are taken in file/sample order;
- a live server: a base URL to attach to, or a serving config (YAML) whose command starts it.

Live sides are measured in reverse-interleaved order (A B B A ...); a side's server is started
when its turn comes and stopped when the other side's turn comes, so one GPU is enough.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from ds4sync.core.errors import ConfigError
from ds4sync.core.model import FrozenModel, read_yaml, validate
from ds4sync.serving import bench
from ds4sync.serving.abstats import (
    MetricComparison,
    MetricRule,
    Verdict,
    compare_metric,
    interleaved_schedule,
    overall_verdict,
    rules_for,
)
from ds4sync.serving.config import BenchConfig, BenchRow, ServerConfig, ServingConfig
from ds4sync.serving.server import ServerHandle, start_server, stop_server, wait_ready

Samples = dict[str, list[float]]
Measure = Callable[[str, int], dict[str, float]]
BENCH_KEYS = {"output_throughput": "tok/s", "median_tpot_ms": "ms", "median_ttft_ms": "ms"}
DEFAULT_ROW = BenchRow(name="decode", input_len=128, output_len=128, num_prompts=8, concurrency=1)


class ABResult(FrozenModel):
    """An A/B comparison: one row per metric, an overall verdict, and how it was measured."""

    schema_version: int = 1
    baseline: str
    candidate: str
    pairs: int
    order: tuple[str, ...] = ()
    verdict: Verdict
    rows: tuple[MetricComparison, ...]
    notes: tuple[str, ...] = Field(default=())

    def brief(self) -> list[dict[str, object]]:
        """``ds4sync ab --json`` rows: metric, medians, delta and 95 % CI in percent, verdict."""
        return [row.brief() for row in self.rows]

    def lines(self) -> list[str]:
        """Report lines, one per metric."""
        return [row.line() for row in self.rows]


def measurement_from_json(data: Any) -> dict[str, float]:
    """One measurement (metric -> value) from a bench result, a serving result, or a run record.

    Bench rows become ``<row>.output_throughput`` (tok/s), ``<row>.median_tpot_ms``,
    ``<row>.median_ttft_ms``; a serving result also gives ``kv_cache_tokens``.
    """
    if not isinstance(data, dict):
        return {}
    if "results" in data and isinstance(data["results"], dict):  # a run record
        return measurement_from_json(data["results"].get("serving"))
    if "completed" in data and "output_throughput" in data:  # one bench --save-result file
        return {k: float(data[k]) for k in BENCH_KEYS if isinstance(data.get(k), int | float)}
    out: dict[str, float] = {}
    for probe in data.get("probes") or ():
        if probe.get("name") == "kv_capacity" and probe.get("value") is not None:
            out["kv_cache_tokens"] = float(probe["value"])
        for row in (probe.get("details") or {}).get("rows") or ():
            out.update(
                {f"{row['name']}.{k}": float(v) for k, v in (row.get("metrics") or {}).items() if k in BENCH_KEYS}
            )
    return out


def load_recorded(paths: Sequence[Path]) -> Samples:
    """Samples from recorded JSON files (see the module doc); metrics missing from a file are dropped.

    Raises:
        ConfigError: a file is unreadable or holds nothing measurable.
    """
    samples: Samples = {}
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read recorded measurements ({exc})", where=str(path)) from exc
        if isinstance(data, dict) and isinstance(data.get("samples"), dict):
            for metric, values in data["samples"].items():
                samples.setdefault(metric, []).extend(float(v) for v in values)
            continue
        one = measurement_from_json(data)
        if not one:
            raise ConfigError(
                "no measurement found (expected bench JSON, a serving result, a run record or {samples: {...}})",
                where=str(path),
            )
        for metric, value in one.items():
            samples.setdefault(metric, []).append(value)
    return samples


def compare_samples(
    baseline: Samples,
    candidate: Samples,
    rules: Mapping[str, MetricRule],
    *,
    labels: tuple[str, str],
    notes: Sequence[str] = (),
    order: Sequence[str] = (),
    units: Mapping[str, str] | None = None,
) -> ABResult:
    """Judge every metric both sides have; pairs are (baseline[i], candidate[i]).

    Raises:
        ConfigError: no metric in common, or different numbers of samples for a metric.
    """
    common = [m for m in baseline if m in candidate]
    if not common:
        raise ConfigError(
            f"baseline and candidate share no metric (baseline: {sorted(baseline)}, candidate: {sorted(candidate)})",
            where=f"{labels[0]} vs {labels[1]}",
        )
    judged = rules_for(common, rules)
    rows = []
    for metric in common:
        a, b = baseline[metric], candidate[metric]
        if len(a) != len(b):
            raise ConfigError(
                f"{metric}: {len(a)} baseline vs {len(b)} candidate measurements; pairs need both",
                where=f"{labels[0]} vs {labels[1]}",
                fix="give the same number of runs per side",
            )
        unit = (units or {}).get(metric) or next((u for k, u in BENCH_KEYS.items() if metric.endswith(k)), "")
        rows.append(compare_metric(metric, a, b, judged[metric], unit=unit))
    return ABResult(
        baseline=labels[0],
        candidate=labels[1],
        pairs=min(len(r.baseline) for r in rows),
        order=tuple(order),
        verdict=overall_verdict(rows),
        rows=tuple(rows),
        notes=tuple(notes),
    )


def run_interleaved(pairs: int, measure: Measure) -> tuple[Samples, Samples, list[str]]:
    """Call ``measure(side, step)`` in reverse-interleaved order; returns (baseline, candidate, order)."""
    base: Samples = {}
    cand: Samples = {}
    order = interleaved_schedule(pairs)
    for step, side in enumerate(order):
        target = base if side == "A" else cand
        for metric, value in measure(side, step).items():
            target.setdefault(metric, []).append(value)
    return base, cand, list(order)


class LiveSides:
    """Two live servers measured with bench rows; at most one started server runs at a time.

    ``sides`` maps ``A``/``B`` to a :class:`ServerConfig`; ``out_dir`` receives server logs and
    bench results per step.
    """

    def __init__(self, sides: Mapping[str, ServerConfig], bench_config: BenchConfig, *, out_dir: Path) -> None:
        self.sides = sides
        self.bench = bench_config
        self.rows = bench_config.rows or (DEFAULT_ROW,)
        self.out_dir = out_dir
        self._running: tuple[str, ServerHandle] | None = None

    def _server(self, side: str) -> ServerHandle:
        if self._running and self._running[0] == side:
            return self._running[1]
        self.close()
        config = self.sides[side]
        log = self.out_dir / f"server-{side}.log"
        handle = start_server(config, log_path=log) if config.command else ServerHandle(config=config)
        self._running = (side, handle)
        wait_ready(handle)
        return handle

    def measure(self, side: str, step: int) -> dict[str, float]:
        """One measurement of ``side``: every bench row's tok/s, TPOT and TTFT medians.

        Raises:
            ConfigError: a bench row failed (a comparison with a broken side means nothing).
        """
        handle = self._server(side)
        out: dict[str, float] = {}
        with handle.client() as client:
            for row in self.rows:
                res = bench.run_row(self.bench, row, client=client, out_dir=self.out_dir / f"step{step:02d}-{side}")
                if not res.ok:
                    raise ConfigError(
                        f"bench row {row.name} failed on side {side}: {res.detail}",
                        where=res.log_path or str(self.out_dir),
                    )
                out.update({f"{row.name}.{k}": res.metrics[k] for k in BENCH_KEYS if k in res.metrics})
        return out

    def close(self) -> None:
        """Stop the started server, if any."""
        if self._running:
            stop_server(self._running[1])
            self._running = None


def side_config(spec: str, *, model: str | None) -> ServerConfig | None:
    """A live side from ``spec``: an http(s) URL (needs ``model``) or a serving-config YAML; else None."""
    if spec.startswith(("http://", "https://")):
        if not model:
            raise ConfigError("attaching to a URL needs the served model name", where=spec, fix="pass --model NAME")
        return ServerConfig(base_url=spec, model=model)
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        data = read_yaml(path)
        return validate(ServingConfig, data.get("serving", data), source=path).server
    return None


def run_ab(
    baseline: Sequence[str],
    candidate: Sequence[str],
    *,
    pairs: int = 5,
    out_dir: Path,
    bench_config: BenchConfig | None = None,
    rules: Mapping[str, MetricRule] | None = None,
    model: str | None = None,
) -> ABResult:
    """Compare two sides given as recorded JSON files, URLs or serving-config YAMLs (see the module doc).

    Raises:
        ConfigError: sides of different types, unreadable files, no common metric, a failed bench row.
    """
    live = [
        side_config(s, model=model) if len(specs) == 1 else None for specs in (baseline, candidate) for s in specs[:1]
    ]
    labels = (", ".join(baseline), ", ".join(candidate))
    if all(c is None for c in live):
        return compare_samples(
            load_recorded([Path(p) for p in baseline]),
            load_recorded([Path(p) for p in candidate]),
            rules or {},
            labels=labels,
            notes=("recorded measurements, paired in file order",),
        )
    if any(c is None for c in live):
        raise ConfigError("both sides must be recorded files, or both live servers", where=" vs ".join(labels))
    sides = LiveSides({"A": live[0], "B": live[1]}, bench_config or BenchConfig(), out_dir=out_dir)  # type: ignore[dict-item]
    try:
        base, cand, order = run_interleaved(pairs, sides.measure)
    finally:
        sides.close()
    return compare_samples(
        base,
        cand,
        rules or {},
        labels=labels,
        order=order,
        notes=(f"{pairs} pairs, reverse-interleaved order {' '.join(order)}",),
    )
