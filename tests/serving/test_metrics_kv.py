"""/metrics parsing, counter deltas and KV capacity, on exposition text made by prometheus_client."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from ds4sync.models.serving_settings import KvBaseline
from ds4sync.serving.kvcache import GIB, KvCapacity, compare, from_log, from_metrics_text
from ds4sync.serving.metrics import counter_delta, parse, summarize


def exposition(
    *,
    gen: float,
    prompt: float,
    usage: float,
    drafts: float = 0,
    draft_tokens: float = 0,
    accepted: float = 0,
    tokens: int | None = 1_778_916,
    mem: int | None = None,
) -> str:
    """vLLM-shaped /metrics text from prometheus_client itself."""
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    for name, value in (
        ("vllm:generation_tokens", gen),
        ("vllm:prompt_tokens", prompt),
        ("vllm:spec_decode_num_drafts", drafts),
        ("vllm:spec_decode_num_draft_tokens", draft_tokens),
        ("vllm:spec_decode_num_accepted_tokens", accepted),
    ):
        Counter(name, "c", labels, registry=reg).labels("m", "0").inc(value)
    Gauge("vllm:kv_cache_usage_perc", "g", labels, registry=reg).labels("m", "0").set(usage)
    if tokens is not None:
        info = {"block_size": "16", "kv_cache_size_tokens": str(tokens), "engine": "0"}
        if mem is not None:
            info["kv_cache_memory_bytes"] = str(mem)
        gauge = Gauge("vllm:cache_config_info", "info", list(info), registry=reg)
        gauge.labels(**info).set(1)
    return generate_latest(reg).decode()


def test_counter_deltas_usage_and_spec_acceptance() -> None:
    first = parse(exposition(gen=100, prompt=1000, usage=0.10, drafts=10, draft_tokens=30, accepted=20), at_s=0)
    last = parse(exposition(gen=400, prompt=1500, usage=0.50, drafts=60, draft_tokens=180, accepted=120), at_s=2)
    summary = summarize([first, last])
    assert summary.deltas["generation_tokens"] == 300
    assert summary.deltas["prompt_tokens"] == 500
    assert summary.kv_usage_max_pct == 50.0
    assert summary.spec_acceptance_rate == 100 / 150
    assert summary.spec_acceptance_length == 1 + 100 / 50
    assert summary.window_s == 2


def test_counter_reset_counts_from_zero() -> None:
    before = parse(exposition(gen=500, prompt=0, usage=0))
    after = parse(exposition(gen=40, prompt=0, usage=0))
    assert counter_delta(before, after, "vllm:generation_tokens_total") == 40


def test_kv_capacity_from_cache_config_info() -> None:
    cap = from_metrics_text(exposition(gen=0, prompt=0, usage=0, mem=round(9.63 * GIB)))
    assert cap == KvCapacity(tokens=1_778_916, bytes=round(9.63 * GIB), source="metrics:vllm:cache_config_info")
    assert from_metrics_text(exposition(gen=0, prompt=0, usage=0, tokens=None)) is None


def test_kv_capacity_from_log_lines() -> None:
    log = (
        "INFO [gpu_worker.py] Available KV cache memory: 9.63 GiB\n"
        "INFO [kv_cache_utils.py] GPU KV cache size: 1,778,916 tokens\n"
        "INFO Maximum concurrency for 65,536 tokens per request: 27.14x\n"
    )
    cap = from_log(log)
    assert cap is not None and cap.tokens == 1_778_916 and cap.render() == "9.63 GiB / 1,778,916 tokens"
    assert from_log("CPU KV cache size: 1,048,576 tokens").tokens == 1_048_576
    assert from_log("nothing here") is None


def test_compare_renders_the_write_up_line() -> None:
    cap = KvCapacity(tokens=1_778_916, bytes=round(9.63 * GIB), source="x")
    assert compare(cap, KvBaseline(tokens=1_778_916, bytes=round(9.63 * GIB))) == (
        True,
        "unchanged 9.63 GiB / 1,778,916 tokens",
    )
    smaller = KvCapacity(tokens=1_711_317, bytes=round(9.26 * GIB), source="x")
    ok, line = compare(smaller, KvBaseline(tokens=1_778_916))
    assert not ok and line.startswith("down 3.80% 9.26 GiB / 1,711,317 tokens (baseline 1,778,916 tokens)")
    assert compare(smaller, KvBaseline(tokens=1_778_916, tolerance_pct=4.0))[0]
    assert compare(KvCapacity(tokens=None, bytes=5, source="x"), KvBaseline(tokens=10))[0] is False


def _scheduler(*, usage_name: str, usage: float, running: int, waiting: int, preempted: int) -> str:
    """Scheduler gauges and the preemption counter, under the current or the older KV-usage name."""
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    Gauge(usage_name, "g", labels, registry=reg).labels("m", "0").set(usage)
    Gauge("vllm:num_requests_running", "g", labels, registry=reg).labels("m", "0").set(running)
    Gauge("vllm:num_requests_waiting", "g", labels, registry=reg).labels("m", "0").set(waiting)
    Counter("vllm:num_preemptions", "c", labels, registry=reg).labels("m", "0").inc(preempted)
    return generate_latest(reg).decode()


@pytest.mark.parametrize("usage_name", ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"])
def test_running_waiting_preemptions_and_both_kv_usage_names(usage_name: str) -> None:
    snaps = [
        parse(_scheduler(usage_name=usage_name, usage=0.2, running=1, waiting=0, preempted=0), at_s=0),
        parse(_scheduler(usage_name=usage_name, usage=0.9, running=4, waiting=3, preempted=2), at_s=1),
        parse(_scheduler(usage_name=usage_name, usage=0.4, running=2, waiting=0, preempted=5), at_s=2),
    ]
    summary = summarize(snaps)
    assert summary.kv_usage_metric == usage_name and summary.kv_usage_max_pct == pytest.approx(90.0)
    assert (summary.running_max, summary.waiting_max, summary.deltas["preemptions"]) == (4, 3, 5)
    # a row judges them: preemptions above max_preemptions and waiting above max_waiting fail it
    from ds4sync.models.serving_settings import BenchRow
    from ds4sync.serving.bench import judge_result

    data = {"completed": 4, "num_prompts": 4, "output_throughput": 10.0}
    strict = BenchRow(name="r", input_len=8, output_len=8, num_prompts=4, max_waiting=0)
    ok, detail, values, _checks = judge_result(strict, data, summary)
    assert not ok and "preemptions 5 (allowed 0)" in detail and "waiting requests 3 (allowed 0)" in detail
    assert values["kv_usage_max_pct"] == pytest.approx(90.0) and values["lost_requests"] == 0
    lenient = BenchRow(name="r", input_len=8, output_len=8, num_prompts=4, max_preemptions=None)
    assert judge_result(lenient, data, summary)[0]


@pytest.mark.parametrize(
    ("key", "value", "baseline", "ok"),
    [
        ("p99_ttft_ms", 109.0, 100.0, True),  # within 10%
        ("p99_ttft_ms", 111.0, 100.0, False),  # latency 11% up
        ("p90_tpot_ms", 90.0, 100.0, True),  # faster is fine
        ("output_throughput", 91.0, 100.0, True),
        ("output_throughput", 89.0, 100.0, False),  # throughput 11% down
        ("request_goodput", 5.0, 8.0, False),
        ("p95_e2el_ms", None, 100.0, False),  # a limit on a value the bench did not give fails
    ],
)
def test_per_percentile_limits_against_a_baseline(key: str, value: float | None, baseline: float, ok: bool) -> None:
    from ds4sync.models.serving_settings import BenchRow
    from ds4sync.serving.bench import judge_result

    row = BenchRow.model_validate(
        {
            "name": "r",
            "input_len": 8,
            "output_len": 8,
            "num_prompts": 2,
            "limits": {key: {"baseline": baseline, "tolerance_pct": 10}},
        }
    )
    data = {"completed": 2, "num_prompts": 2, **({key: value} if value is not None else {})}
    passed, detail, _values, checks = judge_result(row, data)
    assert passed == ok, detail
    assert checks[0]["key"] == key and checks[0]["ok"] == ok
    if not ok:
        assert key in detail and "10% limit" in detail


def test_an_unknown_limit_key_is_refused() -> None:
    from ds4sync.models.serving_settings import BenchRow

    with pytest.raises(ValueError, match="unknown limit key"):
        BenchRow.model_validate({"name": "r", "input_len": 8, "output_len": 8, "limits": {"p99_ttft": {"baseline": 1}}})
