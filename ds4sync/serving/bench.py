"""Throughput through ``vllm bench serve --save-result``, with /metrics sampled during each row.

A row is one shape (random input/output lengths, prompts, concurrency). It passes only when
the tool exited 0 *and* ``completed == num_prompts`` (partial completion is a failure, the
harness rule). Keys are those of ``vllm/benchmarks/serve.py``'s result JSON: ``completed``,
``failed``, ``num_prompts``, ``output_throughput``, ``total_token_throughput``,
``{mean,median,p99}_{ttft,tpot,itl}_ms`` and, with speculative decoding, ``spec_decode_*``.
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
from ds4sync.serving.client import OpenAIClient
from ds4sync.serving.config import BenchConfig, BenchRow
from ds4sync.serving.metrics import MetricsSampler, MetricsSummary
from ds4sync.serving.results import ProbeResult

KEPT_KEYS = (
    "completed",
    "failed",
    "num_prompts",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
)


class BenchRowResult(FrozenModel):
    """One row: ok, why not, the bench JSON numbers kept, /metrics over the row, the command and paths."""

    name: str
    ok: bool
    detail: str
    metrics: dict[str, float] = Field(default_factory=dict)
    server_metrics: MetricsSummary | None = None
    command: tuple[str, ...] = ()
    result_path: str | None = None
    log_path: str | None = None


def bench_argv(config: BenchConfig, row: BenchRow, *, base_url: str, model: str, result_dir: Path) -> list[str]:
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
        "--ignore-eos",
        "--disable-tqdm",
        "--percentile-metrics",
        "ttft,tpot,itl",
        "--metric-percentiles",
        "50,99",
        "--save-result",
        "--result-dir",
        str(result_dir),
        "--result-filename",
        f"{row.name}.json",
    ]
    if config.tokenizer:
        argv += ["--tokenizer", config.tokenizer]
    return argv + list(config.extra_args)


def judge_result(row: BenchRow, data: dict[str, Any]) -> tuple[bool, str, dict[str, float]]:
    """Pass/fail of one saved result: completed == num_prompts, and the tok/s floor if configured."""
    kept = {k: float(data[k]) for k in KEPT_KEYS if isinstance(data.get(k), int | float)}
    completed, wanted = data.get("completed"), data.get("num_prompts", row.num_prompts)
    if completed != wanted:
        return False, f"completed {completed} of {wanted} prompts (failed {data.get('failed', '?')})", kept
    tok_s = kept.get("output_throughput", 0.0)
    if row.min_output_tok_s is not None and tok_s < row.min_output_tok_s:
        return False, f"output {tok_s:.1f} tok/s below the floor {row.min_output_tok_s:g}", kept
    return True, f"{completed}/{wanted} completed; output {tok_s:,.1f} tok/s", kept


def run_row(config: BenchConfig, row: BenchRow, *, client: OpenAIClient, out_dir: Path) -> BenchRowResult:
    """Run one row with /metrics sampled; never raises on a failed benchmark."""
    out_dir.mkdir(parents=True, exist_ok=True)
    argv = bench_argv(config, row, base_url=client.base_url, model=client.model, result_dir=out_dir)
    log_path = out_dir / f"{row.name}.log"
    result_path = out_dir / f"{row.name}.json"
    result_path.unlink(missing_ok=True)
    try:
        with MetricsSampler(client.metrics_text, interval_s=config.metrics_interval_s) as sampler:
            proc = run(argv, cwd=out_dir, timeout_s=config.timeout_s, log_path=log_path)
    except ToolMissingError as exc:
        return BenchRowResult(
            name=row.name, ok=False, detail=f"{exc.one_line()} (serving.bench.command)", command=tuple(argv)
        )
    common: dict[str, Any] = {
        "name": row.name,
        "command": tuple(argv),
        "log_path": str(log_path),
        "server_metrics": sampler.summary(),
    }
    if proc.timed_out or proc.returncode != 0:
        tail = "\n".join(proc.output.splitlines()[-5:])
        return BenchRowResult(ok=False, detail=f"{proc.describe()}; {tail}", **common)
    try:
        data = json.loads(result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return BenchRowResult(ok=False, detail=f"no readable result JSON at {result_path} ({exc})", **common)
    ok, detail, kept = judge_result(row, data)
    return BenchRowResult(ok=ok, detail=detail, metrics=kept, result_path=str(result_path), **common)


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
