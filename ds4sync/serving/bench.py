"""Throughput through ``vllm bench serve --save-result``, with /metrics sampled during each row.

A row is one shape (random input/output lengths, prompts, concurrency). It passes only when
the tool exited 0 *and* ``completed == num_prompts`` (partial completion is a failure, the
harness rule), its limits hold against their baselines (per percentile: ``p99_ttft_ms``...),
and the server's ``/metrics`` over the row show no more preemptions or waiting requests than
allowed. Keys are those of ``vllm/benchmarks/serve.py``'s result JSON: ``completed``,
``failed``, ``num_prompts``, ``request_throughput``, ``request_goodput`` (with ``--goodput``),
``output_throughput``, ``{mean,median,std,p50,p90,p95,p99}_{ttft,tpot,itl,e2el}_ms`` and, with
speculative decoding, ``spec_decode_*``; ds4sync adds ``lost_requests`` and the /metrics values
``preemptions``, ``running_max``, ``waiting_max``, ``kv_usage_max_pct`` and ``max_gap_s`` (the longest
time the server left /metrics unanswered during the row: a stall).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from ds4sync.core.errors import ToolMissingError
from ds4sync.core.model import FrozenModel
from ds4sync.core.proc import run
from ds4sync.models.serving_abstats import metric_direction
from ds4sync.models.serving_results import ProbeResult
from ds4sync.models.serving_settings import BENCH_KEYS, BenchConfig, BenchRow
from ds4sync.serving.client import OpenAIClient, RequestFailed
from ds4sync.serving.metrics import MetricsSampler, MetricsSummary, wait_idle

KEPT_KEYS = tuple(BENCH_KEYS)


class BenchRowResult(FrozenModel):
    """One row: ok, why not, the bench JSON numbers kept, /metrics over the row, the command and paths.

    ``checks`` lists each judged limit as ``{key, value, baseline, limit, ok}``; ``prefix_cache``
    says how prompt-prefix reuse was prevented (``reset`` or ``fresh-seed``). ``server_busy``: the server
    still ran or queued requests when the row began (after ``idle_wait_s``), so its /metrics deltas count
    them too and a prefix-cache reset may have left their blocks.
    """

    name: str
    ok: bool
    detail: str
    metrics: dict[str, float] = Field(default_factory=dict)
    server_metrics: MetricsSummary | None = None
    checks: tuple[dict[str, Any], ...] = ()
    seed: int | None = None
    prefix_cache: str | None = None
    server_busy: bool = False
    command: tuple[str, ...] = ()
    result_path: str | None = None
    log_path: str | None = None


def bench_argv(
    config: BenchConfig, row: BenchRow, *, base_url: str, model: str, result_dir: Path, seed: int | None = None
) -> list[str]:
    """The ``vllm bench serve`` command of one row (random dataset, EOS ignored so lengths match)."""
    argv = [
        *config.command,
        "--backend",
        "openai",
        "--base-url",
        base_url,
        "--model",
        model,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(row.input_len),
        "--random-output-len",
        str(row.output_len),
        "--num-prompts",
        str(row.num_prompts),
        "--max-concurrency",
        str(row.concurrency),
        "--seed",
        str(config.seed if seed is None else seed),
        "--num-warmups",
        str(config.num_warmups),
        "--ready-check-timeout-sec",
        "30",
        "--ignore-eos",
        "--disable-tqdm",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        ",".join(f"{p:g}" for p in config.percentiles),
        "--save-result",
        "--result-dir",
        str(result_dir),
        "--result-filename",
        f"{row.name}.json",
    ]
    if config.goodput:
        argv += ["--goodput", *(f"{k}:{v:g}" for k, v in config.goodput.items())]
    if config.tokenizer:
        argv += ["--tokenizer", config.tokenizer]
    return argv + list(config.extra_args)


def row_values(data: dict[str, Any], summary: MetricsSummary | None, *, num_prompts: int) -> dict[str, float]:
    """The numbers of one row: the bench JSON's kept keys, ``lost_requests`` and the /metrics values."""
    kept = {k: float(data[k]) for k in KEPT_KEYS if isinstance(data.get(k), int | float)}
    wanted = int(data.get("num_prompts") or num_prompts)
    kept["lost_requests"] = float(max(0, wanted - int(data.get("completed") or 0)))
    if summary is not None:
        if "preemptions" in summary.deltas:
            kept["preemptions"] = summary.deltas["preemptions"]
        for key in ("running_max", "waiting_max", "kv_usage_max_pct", "max_gap_s"):
            if (value := getattr(summary, key)) is not None:
                kept[key] = float(value)
    return kept


def judge_result(
    row: BenchRow, data: dict[str, Any], summary: MetricsSummary | None = None
) -> tuple[bool, str, dict[str, float], list[dict[str, Any]]]:
    """Pass/fail of one saved result: every prompt completed, the tok/s floor, the limits against their
    baselines, preemptions and waiting requests; returns (ok, detail, values, checks)."""
    kept = row_values(data, summary, num_prompts=row.num_prompts)
    completed, wanted = data.get("completed"), data.get("num_prompts", row.num_prompts)
    problems: list[str] = []
    if completed != wanted:
        problems.append(f"completed {completed} of {wanted} prompts (failed {data.get('failed', '?')})")
    tok_s = kept.get("output_throughput", 0.0)
    if row.min_output_tok_s is not None and tok_s < row.min_output_tok_s:
        problems.append(f"output {tok_s:.1f} tok/s below the floor {row.min_output_tok_s:g}")
    checks: list[dict[str, Any]] = []
    for key, limit in row.limits.items():
        value = kept.get(key)
        direction = limit.direction or metric_direction(key)
        bound = limit.baseline * (
            1 + limit.tolerance_pct / 100 if direction == "lower" else 1 - limit.tolerance_pct / 100
        )
        ok = value is not None and (value <= bound if direction == "lower" else value >= bound)
        change = None if value is None else 100.0 * (value - limit.baseline) / limit.baseline
        checks.append(
            {"key": key, "value": value, "baseline": limit.baseline, "limit": bound, "ok": ok, "change_pct": change}
        )
        if not ok:
            shown = "missing" if value is None else f"{value:,.2f} ({change:+.1f}% vs baseline {limit.baseline:g})"
            problems.append(f"{key} {shown} past the {limit.tolerance_pct:g}% limit")
    for key, allowed in (("preemptions", row.max_preemptions), ("waiting_max", row.max_waiting)):
        value = kept.get(key)
        if allowed is not None and value is not None:
            checks.append({"key": key, "value": value, "baseline": None, "limit": allowed, "ok": value <= allowed})
            if value > allowed:
                problems.append(f"{key.replace('_max', ' requests')} {value:g} (allowed {allowed})")
    if problems:
        return False, "; ".join(problems), kept, checks
    detail = f"{completed}/{wanted} completed; output {tok_s:,.1f} tok/s"
    for key in ("p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms"):
        if key in kept:
            detail += f"; {key.replace('_ms', '')} {kept[key]:,.1f} ms"
    if "request_goodput" in kept:
        detail += f"; goodput {kept['request_goodput']:,.2f} req/s"
    return True, detail, kept, checks


def reset_prefix_cache(client: OpenAIClient) -> bool:
    """Ask the server to drop its prefix cache; False when it has no such endpoint (vLLM without dev mode)."""
    try:
        client.post_json("/reset_prefix_cache", {}, timeout_s=30)
    except RequestFailed:
        return False
    return True


def run_row(
    config: BenchConfig, row: BenchRow, *, client: OpenAIClient, out_dir: Path, seed: int | None = None
) -> BenchRowResult:
    """Run one row with /metrics sampled; never raises on a failed benchmark.

    The run is cut to the client's overall deadline, if it has one.
    """
    out_dir = out_dir.resolve()  # the bench runs with cwd=out_dir: a relative --result-dir would nest
    out_dir.mkdir(parents=True, exist_ok=True)
    seed = config.seed if seed is None else seed
    argv = bench_argv(config, row, base_url=client.base_url, model=client.model, result_dir=out_dir, seed=seed)
    log_path = out_dir / f"{row.name}.log"
    result_path = out_dir / f"{row.name}.json"
    result_path.unlink(missing_ok=True)
    busy = not _wait_idle(client, timeout_s=config.idle_wait_s)
    prefix = "reset" if config.reset_prefix_cache and reset_prefix_cache(client) else "fresh-seed"
    common: dict[str, Any] = {
        "name": row.name,
        "command": tuple(argv),
        "seed": seed,
        "prefix_cache": prefix,
        "server_busy": busy,
    }
    try:
        limit = client.deadline.clamp(config.timeout_s) if client.deadline else config.timeout_s
    except RequestFailed as exc:
        return BenchRowResult(ok=False, detail=str(exc), **common)
    try:
        with MetricsSampler(client.metrics_text, interval_s=config.metrics_interval_s) as sampler:
            proc = run(argv, cwd=out_dir, timeout_s=limit, log_path=log_path)
    except ToolMissingError as exc:
        return BenchRowResult(ok=False, detail=f"{exc.one_line()} (serving.bench.command)", **common)
    common.update(log_path=str(log_path), server_metrics=sampler.summary())
    if proc.timed_out or proc.returncode != 0:
        tail = "\n".join(proc.output.splitlines()[-5:])
        return BenchRowResult(ok=False, detail=f"{proc.describe()}; {tail}", **common)
    try:
        data = json.loads(result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return BenchRowResult(ok=False, detail=f"no readable result JSON at {result_path} ({exc})", **common)
    ok, detail, kept, checks = judge_result(row, data, common["server_metrics"])
    if busy:
        detail += f"; the server still ran requests after {config.idle_wait_s:g} s: /metrics deltas count them too"
    return BenchRowResult(
        ok=ok, detail=detail, metrics=kept, checks=tuple(checks), result_path=str(result_path), **common
    )


def _wait_idle(client: OpenAIClient, *, timeout_s: float) -> bool:
    """:func:`ds4sync.serving.metrics.wait_idle` on the client's /metrics; a server without /metrics is idle."""
    try:
        return wait_idle(lambda: client.metrics_text(timeout_s=30), timeout_s=timeout_s)
    except RequestFailed:
        return True


def probe_throughput(
    client: OpenAIClient, config: BenchConfig, *, out_dir: Path, rows: Sequence[BenchRow] | None = None
) -> ProbeResult:
    """All rows; value = output tok/s of the first row, status failed when any row failed."""
    rows = tuple(rows if rows is not None else config.rows)
    if not rows:
        return ProbeResult(name="throughput", status="skipped", summary="no bench rows configured")
    start = time.monotonic()
    results = [run_row(config, row, client=client, out_dir=out_dir) for row in rows]
    failed = [r.name for r in results if not r.ok]
    first = results[0].metrics.get("output_throughput")
    summary = "; ".join(f"{r.name}: {r.detail}" for r in results)
    return ProbeResult(
        name="throughput",
        status="failed" if failed else "passed",
        value=first,
        unit="tok/s",
        summary=summary,
        duration_s=time.monotonic() - start,
        details={"rows": [r.model_dump(mode="json") for r in results], "failed_rows": failed},
    )
