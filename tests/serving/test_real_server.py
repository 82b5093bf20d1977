"""The serving tier against a real vLLM CPU server on 127.0.0.1 serving a tiny random Llama.

Random weights answer nonsense, so exact answers and tool arguments are pinned with vLLM's
structured outputs (a choice list, an enum in the tool schema): the probes then see real
server answers whose right value is known.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml
from servinghelp import MODEL_NAME, REASONING_OUTPUTS, progress, server_config, vllm_command

from ds4sync.cli import main
from ds4sync.core.proc import group_members, pid_alive
from ds4sync.core.record import ForkRef, UpstreamRef
from ds4sync.models.record import RecordStore, RunRecord
from ds4sync.models.serving_settings import (
    BenchConfig,
    BenchRow,
    EvalConfig,
    ExactCase,
    KvBaseline,
    ReasoningCase,
    RecallConfig,
    ServingConfig,
    ToolCallCase,
)
from ds4sync.serving import bench, evalsuite, kvcache, longctx, probes
from ds4sync.serving.gate import run_probes
from ds4sync.serving.metrics import MetricsSampler
from ds4sync.serving.server import ServerHandle, ServerStartError, guard, start_server, stop_server, wait_ready
from tests.cli_json import data as cli_data
from tests.timing import scaled

pytestmark = pytest.mark.serving
HERE = Path(__file__).resolve().parent


def forced(name: str, answer: str, expect: str) -> ExactCase:
    """A case whose server answer is forced to ``answer`` by structured outputs."""
    return ExactCase(
        name=name,
        messages=({"role": "user", "content": "What is 11 * 17?"},),
        expect=expect,
        sampling={"temperature": 0, "max_tokens": 8, "structured_outputs": {"choice": [answer]}},
    )


def test_health_and_exact_answers(vllm_server: ServerHandle) -> None:
    with vllm_server.client() as client:
        health = probes.probe_health(client)
        exact = probes.probe_exact(client, [forced("187", "187", "187"), forced("off", "187", "188")])
    assert health.status == "passed" and health.details["models"] == [MODEL_NAME]
    assert (exact.value, exact.baseline, exact.status) == (1.0, 2.0, "failed")
    assert exact.details["cases"][0]["content"] == "187"


def test_tool_call_with_named_choice(vllm_server: ServerHandle) -> None:
    tools = (
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string", "enum": ["Paris"]}},
                    "required": ["city"],
                    "additionalProperties": False,
                },
            },
        },
    )
    case = ToolCallCase(
        messages=({"role": "user", "content": "Weather in Paris?"},),
        tools=tools,
        expect_name="get_weather",
        expect_arguments={"city": "Paris"},
        sampling={
            "temperature": 0,
            "max_tokens": 64,
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        },
    )
    with vllm_server.client() as client:
        result = probes.probe_tool_call(client, case)
    assert result.status == "passed", result.summary
    assert result.details["call"] == {"name": "get_weather", "arguments": {"city": "Paris"}}


def test_kv_capacity_from_metrics_and_log_agree(vllm_server: ServerHandle) -> None:
    with vllm_server.client() as client:
        from_metrics = kvcache.from_metrics_text(client.metrics_text())
        same = kvcache.probe_kv_capacity(
            client, vllm_server.log_text(), KvBaseline(tokens=from_metrics.tokens, bytes=from_metrics.bytes)
        )
        assert from_metrics.tokens is not None
        bigger = kvcache.probe_kv_capacity(client, vllm_server.log_text(), KvBaseline(tokens=from_metrics.tokens + 1))
    from_log = kvcache.from_log(vllm_server.log_path.read_text())
    assert from_log.tokens is not None and from_metrics.tokens == from_log.tokens > 0
    assert from_metrics.bytes == 1024**3  # VLLM_CPU_KVCACHE_SPACE=1 (GiB)
    assert same.status == "passed" and same.summary == f"unchanged 1.00 GiB / {from_metrics.tokens:,} tokens"
    assert bigger.status == "failed" and bigger.summary.startswith("down ")


def test_counters_and_eval_at_concurrency(vllm_server: ServerHandle) -> None:
    cases = (forced("a", "42", "42"), forced("b", "41", "42"))
    config = EvalConfig(cases=cases, repeat=3, concurrency=2, max_tokens=8, timeout_s=scaled(60))
    with vllm_server.client() as client, MetricsSampler(client.metrics_text, interval_s=0.2) as sampler:
        result = evalsuite.probe_eval(client, config)
    assert result.summary == "3/6; 0 length caps, 3 incorrect" and result.status == "failed"
    deltas = sampler.summary().deltas
    assert deltas["request_success"] == 6
    assert deltas["generation_tokens"] >= 6 and deltas["prompt_tokens"] > 0


def test_recall_prompt_reaches_its_size_without_truncation(vllm_server: ServerHandle) -> None:
    with vllm_server.client() as client:
        result = longctx.probe_recall(client, RecallConfig(tokens=1500, max_tokens=8))
    details = result.details
    assert details["truncated"] is False
    assert details["prompt_tokens"] >= details["expected_prompt_tokens"] >= 1200
    assert result.value is not None and result.unit == "s"
    assert result.status == ("passed" if details["correct"] else "failed")  # random weights rarely recall


def test_throughput_rows_through_the_default_vllm_bench_command(
    vllm_server: ServerHandle, vllm_python: Path, tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the default command, `vllm bench serve`, from the serving environment on PATH
    monkeypatch.setenv("PATH", f"{vllm_python.parent}{os.pathsep}{os.environ['PATH']}")
    config = BenchConfig(
        tokenizer=str(tiny_model),
        metrics_interval_s=0.2,
        timeout_s=scaled(300),
        goodput={"ttft": 60_000, "tpot": 60_000},
        rows=(
            BenchRow(
                name="decode",
                input_len=32,
                output_len=16,
                num_prompts=4,
                concurrency=2,
                max_waiting=0,
                limits={"p99_ttft_ms": {"baseline": 120_000, "tolerance_pct": 0}},
            ),
            BenchRow(
                name="strict",
                input_len=32,
                output_len=16,
                num_prompts=4,
                concurrency=2,
                limits={"p50_tpot_ms": {"baseline": 0.001, "tolerance_pct": 10}},
            ),
            BenchRow(name="too-long", input_len=5000, output_len=8, num_prompts=2),
        ),
    )
    assert config.command == ("vllm", "bench", "serve")
    with vllm_server.client() as client:
        result = bench.probe_throughput(client, config, out_dir=tmp_path)
    rows = {r["name"]: r for r in result.details["rows"]}
    decode = rows["decode"]
    assert decode["ok"], decode["detail"]
    m = decode["metrics"]
    assert m["completed"] == 4 and m["total_output_tokens"] == 64 and m["lost_requests"] == 0
    for lat in ("ttft", "tpot", "itl", "e2el"):
        assert m[f"p50_{lat}_ms"] <= m[f"p90_{lat}_ms"] <= m[f"p95_{lat}_ms"] <= m[f"p99_{lat}_ms"]
    assert m["request_goodput"] == pytest.approx(m["request_throughput"])  # generous SLOs: every request good
    # /metrics sampled over the row (a row this short may fall between two scrapes: running can read 0). The
    # scheduler's running gauge counts a finished request until its next step, while the client's slot has already
    # sent the next one: at most two per slot, never more.
    assert m["preemptions"] == 0 and m["waiting_max"] == 0 and 0 <= m["running_max"] <= 2 * 2
    # the server generated the measured tokens plus the bench's ready check and warm-up requests (16 each)
    assert decode["server_metrics"]["deltas"]["generation_tokens"] == 64 + 16 * (1 + config.num_warmups)
    assert decode["prefix_cache"] == "reset" and decode["checks"][0]["key"] == "p99_ttft_ms"
    # a percentile past its baseline fails its row, with the key and the change named
    assert (
        not rows["strict"]["ok"]
        and "p50_tpot_ms" in rows["strict"]["detail"]
        and "past the 10% limit" in rows["strict"]["detail"]
    )
    assert result.value == m["output_throughput"] > 0
    assert not rows["too-long"]["ok"] and result.status == "failed"  # prompts over max-model-len are rejected
    assert result.details["failed_rows"] == ["strict", "too-long"]


def test_startup_failure_is_reported_as_died_with_the_log_tail(
    vllm_python: Path, tiny_model: Path, tmp_path: Path
) -> None:
    config = server_config(vllm_python, tiny_model)
    bad = config.model_copy(update={"command": (*config.command, "--dtype", "no-such-dtype")})
    handle = start_server(bad, log_path=tmp_path / "server.log")
    with pytest.raises(ServerStartError) as info:
        wait_ready(handle, progress=progress)
    assert info.value.kind == "died" and "no-such-dtype" in info.value.log_tail
    assert "exited with code" in info.value.what


def test_startup_timeout_says_still_loading_and_stop_kills_the_group(
    vllm_python: Path, tiny_model: Path, tmp_path: Path
) -> None:
    handle = start_server(server_config(vllm_python, tiny_model, stop_grace_s=5), log_path=tmp_path / "server.log")
    with pytest.raises(ServerStartError) as info:
        wait_ready(handle, timeout_s=1)
    assert info.value.kind == "still-loading" and "process alive" in info.value.what
    pid = handle.proc.pid
    stop_server(handle)
    assert handle.proc.returncode is not None and not pid_alive(pid)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def test_port_already_served_is_refused(vllm_server: ServerHandle, tmp_path: Path) -> None:
    clash = vllm_server.config.model_copy(update={"port": vllm_server.config.port})
    with pytest.raises(ServerStartError) as info:
        start_server(clash, log_path=tmp_path / "x.log")
    assert info.value.kind == "port-busy"


def test_reasoning_routing_then_a_stopped_engine_is_wedged(vllm_python: Path, tiny_model: Path, tmp_path: Path) -> None:
    # A second server with a reasoning parser; structured outputs (also inside reasoning) pin the answer shape.
    command = vllm_command(
        vllm_python, tiny_model, "--reasoning-parser", "deepseek_r1", "--structured-outputs-config", REASONING_OUTPUTS
    )
    config = server_config(
        vllm_python,
        tiny_model,
        command=command,
        request_timeout_s=scaled(3),
        guard_timeout_s=scaled(3),
        stop_grace_s=10,
    )
    handle = start_server(config, log_path=tmp_path / "server.log")
    try:
        wait_ready(handle, progress=progress)
        assert guard(handle).ok
        thinking = {"temperature": 0, "max_tokens": 40, "structured_outputs": {"regex": "<think>[a-z]{3,8}</think>56"}}
        case = ReasoningCase(
            messages=({"role": "user", "content": "7 * 8?"},), sampling=thinking, expect_pattern="^56$"
        )
        with handle.client() as client:
            routed = probes.probe_reasoning(client, case)
            wrong_field = probes.probe_reasoning(client, case.model_copy(update={"fields": ("reasoning_content",)}))
        assert routed.status == "passed", routed.summary
        assert routed.details["content"] == "56" and routed.details["reasoning"]
        assert wrong_field.status == "failed" and "no reasoning in reasoning_content" in wrong_field.summary
        # SIGSTOP the whole server during an eval of 5,000 requests (3 s each: hours without a wedge check)
        from ds4sync.serving.client import Deadline

        serving = ServingConfig(
            server=config,
            eval=EvalConfig(
                cases=(forced("a", "42", "42"),), repeat=5000, concurrency=2, max_tokens=8, timeout_s=scaled(3)
            ),
        )
        handle.deadline = Deadline(scaled(120))
        stopper = threading.Timer(1.0, os.killpg, (handle.proc.pid, signal.SIGSTOP))
        stopper.start()
        start = time.monotonic()
        results, wedged = run_probes(serving, handle, ["eval", "kv_capacity", "health"], out_dir=tmp_path)
        took = time.monotonic() - start
        stopper.join()
        # the eval ends on the stop: an error when no answer came back, failed when some answers were already wrong
        assert results[0].status in ("error", "failed") and [r.status for r in results[1:]] == ["skipped", "skipped"]
        # named by the watch during the eval or by the guard right after it (load decides which), in one wording
        assert wedged is not None and wedged.startswith("after eval: "), wedged
        assert "server processes stopped (state T, e.g. SIGSTOP): pid " in wedged, wedged
        progress(f"SIGSTOPped server named {wedged!r} after {took:.1f} s; later probes skipped")
        assert took < scaled(30), took  # one request timeout and the guard, not 5,000 timeouts
    finally:
        pid = handle.proc.pid
        stop_server(handle)  # stopped processes get SIGCONT after SIGINT: the group ends without SIGKILL
    assert group_members(pid) == []


def test_cli_gate_json_attached_and_recorded(
    vllm_server: ServerHandle, tmp_path: Path, builder, capsys: pytest.CaptureFixture[str]
) -> None:
    builder.commit({"a.txt": "a"}, "init")
    serving = {
        "server": {"base_url": vllm_server.url, "model": MODEL_NAME},
        "probes": ["health", "exact", "kv_capacity"],
        "exact": [forced("187", "187", "187").model_dump(mode="json")],
        "kv": {"tokens": 1},
    }
    cfg = tmp_path / "serving.yaml"
    cfg.write_text(yaml.safe_dump({"serving": serving}))
    store = RecordStore(tmp_path / "state")
    store.save(
        RunRecord(
            run_id="r1",
            repo=str(builder.path),
            state_dir=str(store.root),
            sync_branch="sync/x",
            worktree=str(builder.path),
            backup_ref="refs/x",
            status="paused",
            upstream=UpstreamRef(remote="upstream", ref="main", sha="0" * 40),
            fork=ForkRef(branch="main", head_before="0" * 40),
        )
    )
    code = main(
        [
            "serving",
            "gate",
            "--repo",
            str(builder.path),
            "--serving-config",
            str(cfg),
            "--state-dir",
            str(store.root),
            "--json",
        ]
    )
    data = cli_data(capsys.readouterr().out)
    assert code == 0 and data["run_id"] == "r1" and data["status"] == "passed"
    assert [p["name"] for p in data["probes"]] == ["health", "exact", "kv_capacity"]
    assert all(
        set(p) == {"name", "status", "value", "baseline", "unit", "summary", "reason", "duration_s"}
        for p in data["probes"]
    )
    assert data["startup"]["kind"] == "ready" and data["startup"]["started"] is False and data["wedged"] is None
    kv = data["probes"][2]
    assert kv["unit"] == "tokens" and kv["baseline"] == 1 and kv["value"] > 1
    recorded = store.load("r1").results.serving
    assert recorded.probes[1].details["cases"][0]["content"] == "187"
