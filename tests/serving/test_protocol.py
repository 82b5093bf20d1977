"""Protocol edge cases against scripted HTTP servers on 127.0.0.1: malformed JSON, 500s, hangs,
slow streams, missing fields, and the guard that skips probes after a wedge."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted import Response, ScriptedServer, chat_answer, healthy_routes

from ds4sync.models.serving_settings import (
    BenchConfig,
    BenchRow,
    EvalConfig,
    ExactCase,
    ReasoningCase,
    RecallConfig,
    ServingConfig,
    ToolCallCase,
)
from ds4sync.serving import bench, evalsuite, longctx, probes
from ds4sync.serving.client import OpenAIClient, RequestFailed
from ds4sync.serving.gate import run_serving_gate
from tests.timing import scaled

MSG = ({"role": "user", "content": "q"},)


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer(healthy_routes())
    yield server
    server.close()


def client_for(server: ScriptedServer, timeout_s: float = 5.0) -> OpenAIClient:
    return OpenAIClient(server.url, "m", timeout_s=timeout_s)


@pytest.mark.parametrize(
    ("response", "kind"),
    [
        (Response(raw=b"{not json"), "malformed"),
        (Response(status=500, json_body={"error": "boom"}), "http"),
        (Response(json_body={"id": "x"}), "malformed"),
        (Response(json_body={"choices": [{"index": 0}]}), "malformed"),
        (Response(hang=True), "timeout"),
    ],
)
def test_chat_failures_have_a_kind(scripted: ScriptedServer, response: Response, kind: str) -> None:
    scripted.routes[("POST", "/v1/chat/completions")] = lambda _b: response
    with client_for(scripted, timeout_s=scaled(0.5)) as client, pytest.raises(RequestFailed) as info:
        client.chat(list(MSG))
    assert info.value.kind == kind


def test_health_probe_needs_the_model_listed(scripted: ScriptedServer) -> None:
    with client_for(scripted) as client:
        assert probes.probe_health(client).status == "passed"
        client.model = "other"
        result = probes.probe_health(client)
    assert result.status == "failed" and result.value == 0.0 and "not listed" in result.summary
    scripted.routes[("GET", "/health")] = lambda _b: Response(status=503, json_body={})
    with client_for(scripted) as client:
        assert probes.probe_health(client).details["status_code"] == 503


def test_exact_cases_count_exact_and_pattern(scripted: ScriptedServer) -> None:
    scripted.routes[("POST", "/v1/chat/completions")] = lambda b: chat_answer(
        {"a": " 187 \n", "b": "188", "c": "the answer is 56."}[b["messages"][0]["content"]]
    )
    cases = [
        ExactCase(name="a", messages=({"role": "user", "content": "a"},), expect="187"),
        ExactCase(name="b", messages=({"role": "user", "content": "b"},), expect="187"),
        ExactCase(name="c", messages=({"role": "user", "content": "c"},), pattern=r"\b56\b"),
    ]
    with client_for(scripted) as client:
        result = probes.probe_exact(client, cases)
    assert (result.status, result.value, result.baseline) == ("failed", 2.0, 3.0)
    assert result.summary == "2/3 exact; wrong: b"
    assert scripted.seen[-1][2]["temperature"] == 0


TOOLS = ({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},)


@pytest.mark.parametrize(
    ("call", "ok", "problem"),
    [
        ({"name": "get_weather", "arguments": '{"city": "Paris"}'}, True, ""),
        ({"name": "get_weather", "arguments": '{"city": "Par'}, False, "not valid JSON"),
        ({"name": "get_time", "arguments": '{"city": "Paris"}'}, False, "expected 'get_weather'"),
        ({"name": "get_weather", "arguments": '{"city": "Rome"}'}, False, "expected {'city': 'Paris'}"),
    ],
)
def test_tool_call(scripted: ScriptedServer, call: dict, ok: bool, problem: str) -> None:
    scripted.routes[("POST", "/v1/chat/completions")] = lambda _b: chat_answer(
        "", finish="tool_calls", tool_calls=[{"id": "1", "type": "function", "function": call}]
    )
    case = ToolCallCase(messages=MSG, tools=TOOLS, expect_name="get_weather", expect_arguments={"city": "Paris"})
    with client_for(scripted) as client:
        result = probes.probe_tool_call(client, case)
    assert (result.status == "passed") is ok
    assert problem in result.summary
    assert scripted.seen[-1][2]["tools"][0]["function"]["name"] == "get_weather"


def test_tool_call_missing_is_a_failure(scripted: ScriptedServer) -> None:
    scripted.routes[("POST", "/v1/chat/completions")] = lambda _b: chat_answer("I would call get_weather")
    with client_for(scripted) as client:
        result = probes.probe_tool_call(client, ToolCallCase(messages=MSG, tools=TOOLS, expect_name="get_weather"))
    assert result.status == "failed" and "no tool_calls" in result.summary


@pytest.mark.parametrize(
    ("answer", "fields", "ok"),
    [
        (chat_answer("56", reasoning="7*8", reasoning_field="reasoning_content"), ("reasoning_content",), True),
        (chat_answer("56", reasoning="7*8", reasoning_field="reasoning"), ("reasoning_content",), False),
        (chat_answer("", reasoning="7*8"), ("reasoning",), False),
        (chat_answer("<think>7*8</think>56", reasoning="x"), ("reasoning",), False),
    ],
)
def test_reasoning_routing(scripted: ScriptedServer, answer: Response, fields: tuple, ok: bool) -> None:
    scripted.routes[("POST", "/v1/chat/completions")] = lambda _b: answer
    with client_for(scripted) as client:
        result = probes.probe_reasoning(client, ReasoningCase(messages=MSG, fields=fields, expect_pattern="56"))
    assert (result.status == "passed") is ok, result.summary
    assert scripted.seen[-1][2]["chat_template_kwargs"] == {"thinking": True}


def test_eval_scores_each_outcome_apart(scripted: ScriptedServer) -> None:
    answers = {
        "ok": chat_answer("42"),
        "wrong": chat_answer("41"),
        "long": chat_answer("4", finish="length"),
        "err": Response(status=500, json_body={}),
        "hang": Response(hang=True),
    }
    scripted.routes[("POST", "/v1/chat/completions")] = lambda b: answers[b["messages"][0]["content"]]
    cases = tuple(ExactCase(name=k, messages=({"role": "user", "content": k},), expect="42") for k in answers)
    config = EvalConfig(cases=cases, repeat=2, concurrency=3, timeout_s=scaled(0.5), max_tokens=16)
    with client_for(scripted) as client:
        result = evalsuite.probe_eval(client, config)
    assert result.summary == "2/10; 2 length caps, 2 incorrect, 2 request errors, 2 timeouts"
    assert result.status == "failed" and result.value == 2.0 and result.baseline == 10.0
    assert all(body["max_tokens"] == 16 for _m, path, body in scripted.seen if path == "/v1/chat/completions")


def test_eval_length_caps_alone_do_not_fail(scripted: ScriptedServer, tmp_path: Path) -> None:
    answers = iter([chat_answer("42")] * 19 + [chat_answer("4", finish="length")])
    scripted.routes[("POST", "/v1/chat/completions")] = lambda _b: next(answers)
    cases_file = tmp_path / "cases.yaml"
    cases_file.write_text("cases:\n  - name: q\n    messages: [{role: user, content: q}]\n    expect: '42'\n")
    config = EvalConfig(cases_file=cases_file, repeat=20, concurrency=1, min_correct_pct=90)
    with client_for(scripted) as client:
        result = evalsuite.probe_eval(client, config)
    assert (result.status, result.summary) == ("passed", "19/20; 1 length caps, 0 incorrect")


def _recall_routes(server: ScriptedServer, *, drop_tokens: int = 0) -> None:
    def tokenize(body: dict) -> Response:
        return Response(json_body={"count": len(body["prompt"]) // 4})

    def answer(body: dict) -> Response:
        prompt = body["messages"][0]["content"]
        locker, building = re.search(r"code of locker (\S+) in building (\w+)\?", prompt).groups()
        code = re.search(rf"Locker {locker} in building {building} has access code (\S+)\.", prompt).group(1)
        reply = chat_answer(code)
        reply.json_body["usage"]["prompt_tokens"] = len(prompt) // 4 - drop_tokens
        return reply

    server.routes[("POST", "/tokenize")] = tokenize
    server.routes[("POST", "/v1/chat/completions")] = answer


def test_recall_needs_disambiguation_and_reports_truncation(scripted: ScriptedServer) -> None:
    prompt = longctx.build_prompt(300)
    assert prompt.text.count("Locker K-4217") == 2 and len(prompt.distractors) == 3
    _recall_routes(scripted)
    with client_for(scripted) as client:
        ok = longctx.probe_recall(client, RecallConfig(tokens=4000))
    assert ok.status == "passed" and ok.unit == "s" and ok.details["correct"]
    assert 3600 <= ok.details["prompt_tokens"] <= 4400
    assert "recall prompt completed correctly" in ok.summary and "without truncation" in ok.summary
    _recall_routes(scripted, drop_tokens=500)
    with client_for(scripted) as client:
        cut = longctx.probe_recall(client, RecallConfig(tokens=4000))
    assert cut.status == "failed" and cut.details["truncated"] and "with truncation" in cut.summary


def test_slow_stream_gives_ttft_and_gaps(scripted: ScriptedServer) -> None:
    chunks: list[dict[str, Any]] = [
        {"choices": [{"delta": {"content": c}, "finish_reason": None}]} for c in ("4", "2", "!")
    ]
    chunks.append({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}})
    scripted.routes[("POST", "/v1/chat/completions")] = lambda _b: Response(stream=chunks, stream_gap_s=0.05)
    with client_for(scripted) as client:
        reply = client.chat_stream(list(MSG))
    assert reply.content == "42!" and reply.completion_tokens == 3
    assert reply.ttft_s is not None and len(reply.chunk_gaps_s) == 2


def test_a_wedged_server_gets_later_probes_skipped(scripted: ScriptedServer, tmp_path: Path) -> None:
    scripted.routes[("POST", "/v1/chat/completions")] = lambda _b: Response(hang=True)
    scripted.routes[("POST", "/v1/completions")] = lambda _b: Response(hang=True)
    config = ServingConfig.model_validate(
        {
            "server": {
                "base_url": scripted.url,
                "model": "m",
                "request_timeout_s": scaled(0.5),
                "guard_timeout_s": scaled(0.5),
            },
            "probes": ["health", "exact", "kv_capacity", "eval"],
            "exact": [{"name": "a", "messages": list(MSG), "expect": "x"}],
            "eval": {"cases": [{"name": "a", "messages": list(MSG), "expect": "x"}]},
        }
    )
    result = run_serving_gate(config, out_dir=tmp_path)
    status = {p.name: p.status for p in result.probes}
    assert status == {"health": "passed", "exact": "error", "kv_capacity": "skipped", "eval": "skipped"}
    assert result.wedged and "after exact" in result.wedged and "timeout" in result.wedged
    assert "server unresponsive" in result.probes[-1].summary
    assert not result and result.started is False


def test_a_failed_probe_on_a_live_server_does_not_skip_the_rest(scripted: ScriptedServer, tmp_path: Path) -> None:
    scripted.routes[("POST", "/v1/chat/completions")] = lambda _b: chat_answer("wrong")
    config = ServingConfig.model_validate(
        {
            "server": {"base_url": scripted.url, "model": "m"},
            "probes": ["exact", "health"],
            "exact": [{"name": "a", "messages": list(MSG), "expect": "x"}],
        }
    )
    result = run_serving_gate(config, out_dir=tmp_path)
    assert [p.status for p in result.probes] == ["failed", "passed"] and result.wedged is None
    assert ("POST", "/v1/completions") in [(m, p) for m, p, _ in scripted.seen]  # the guard ran


FAKE_BENCH = """
import json, sys
args = sys.argv[1:]
def arg(name): return args[args.index(name) + 1]
n = int(arg('--num-prompts'))
done = n - 1 if arg('--random-input-len') == '999' else n
out = {'num_prompts': n, 'completed': done, 'failed': n - done, 'output_throughput': 123.5, 'median_tpot_ms': 8.0}
open(arg('--result-dir') + '/' + arg('--result-filename'), 'w').write(json.dumps(out))
"""


def test_bench_row_fails_when_not_all_prompts_completed(scripted: ScriptedServer, tmp_path: Path) -> None:
    metrics = iter(range(0, 10_000, 50))
    scripted.routes[("GET", "/metrics")] = lambda _b: Response(
        raw=f'vllm:generation_tokens_total{{engine="0"}} {next(metrics)}\n'.encode()
    )
    config = BenchConfig(
        command=(sys.executable, "-c", FAKE_BENCH),
        metrics_interval_s=0.05,
        rows=(
            BenchRow(name="decode", input_len=64, output_len=64, num_prompts=4),
            BenchRow(name="partial", input_len=999, output_len=1, num_prompts=4),
        ),
    )
    with client_for(scripted) as client:
        result = bench.probe_throughput(client, config, out_dir=tmp_path)
    rows = {r["name"]: r for r in result.details["rows"]}
    assert rows["decode"]["ok"] and rows["decode"]["metrics"]["output_throughput"] == 123.5
    assert not rows["partial"]["ok"] and rows["partial"]["detail"] == "completed 3 of 4 prompts (failed 1)"
    assert result.status == "failed" and result.details["failed_rows"] == ["partial"] and result.value == 123.5
    assert rows["decode"]["server_metrics"]["deltas"]["generation_tokens"] > 0
    assert json.loads((tmp_path / "decode.json").read_text())["completed"] == 4
    argv = rows["decode"]["command"]
    assert argv[argv.index("--base-url") + 1] == scripted.url and "--save-result" in argv


class _LeftoverRequest:
    """A /metrics stand-in whose server still runs an earlier client's request for its first ``busy`` scrapes,
    generating 7 tokens a scrape meanwhile; the prefix-cache resets it gets are kept with the gauge they saw."""

    def __init__(self, busy: int) -> None:
        self.scrapes, self.busy, self.tokens = 0, busy, 0
        self.resets: list[int] = []

    def running(self) -> int:
        return 1 if self.scrapes <= self.busy else 0

    def metrics(self, _body: object) -> Response:
        self.scrapes += 1
        self.tokens += 7 if self.running() else 0
        text = f"vllm:num_requests_running {self.running()}\nvllm:num_requests_waiting 0\n"
        return Response(raw=(text + f'vllm:generation_tokens_total{{engine="0"}} {self.tokens}\n').encode())

    def reset(self, _body: object) -> Response:
        self.resets.append(self.running())
        return Response(json_body={})


@pytest.mark.parametrize(("busy", "wait_s"), [(3, 30.0), (10_000, 0.3)])
def test_a_bench_row_waits_for_an_idle_server_or_says_its_deltas_count_other_requests(
    scripted: ScriptedServer, tmp_path: Path, busy: int, wait_s: float
) -> None:
    # A request an earlier client left running would be counted in the row's /metrics deltas (and keep its
    # blocks out of the prefix-cache reset): the row waits for the scheduler to be idle, up to idle_wait_s.
    server = _LeftoverRequest(busy)
    scripted.routes[("GET", "/metrics")] = server.metrics
    scripted.routes[("POST", "/reset_prefix_cache")] = server.reset
    config = BenchConfig(
        command=(sys.executable, "-c", FAKE_BENCH),
        metrics_interval_s=0.05,
        idle_wait_s=wait_s,
        rows=(BenchRow(name="decode", input_len=64, output_len=64, num_prompts=4),),
    )
    with client_for(scripted) as client:
        row = bench.probe_throughput(client, config, out_dir=tmp_path).details["rows"][0]
    assert row["ok"] and row["prefix_cache"] == "reset"
    if busy == 3:  # idle after three scrapes: the reset and the window see the row's traffic alone
        assert not row["server_busy"] and server.resets == [0]
        assert row["server_metrics"]["deltas"]["generation_tokens"] == 0 and "still ran" not in row["detail"]
    else:  # never idle: the row still runs, and says what its deltas hold
        assert row["server_busy"] and server.resets == [1]
        assert row["server_metrics"]["deltas"]["generation_tokens"] > 0
        assert row["detail"].endswith("the server still ran requests after 0.3 s: /metrics deltas count them too")


def test_missing_bench_tool_fails_the_row_not_the_gate(scripted: ScriptedServer, tmp_path: Path) -> None:
    config = BenchConfig(
        command=("no-such-vllm-binary", "bench", "serve"), rows=(BenchRow(name="decode", input_len=8, output_len=8),)
    )
    with client_for(scripted) as client:
        result = bench.probe_throughput(client, config, out_dir=tmp_path)
    assert result.status == "failed" and "program not found: no-such-vllm-binary" in result.summary
