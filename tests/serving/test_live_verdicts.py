"""Verdicts that hold on a real vLLM CPU server (the session's one server, shared: these tests only read
from it, or stop it for a few seconds and continue it):

- same vs same (the session's server on both sides) is never a verdict, and a run stalled by SIGSTOP gets its
  pair re-run, named, and the verdict holds: one live ``ds4sync ab`` of the minimum three pairs, whose relative
  ``--out`` keeps every bench result where the A/B reads it (it once nested them and passed);
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
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from servinghelp import MODEL_NAME, ROOT, bench_command

from ds4sync.cli import main
from ds4sync.models.serving_results import ABResult
from ds4sync.models.serving_settings import BenchConfig, BenchRow, ExactCase, ServingConfig
from ds4sync.serving.gate import run_probes
from ds4sync.serving.render import ab_measured_lines
from ds4sync.serving.server import ServerHandle
from tests.cli_json import data as cli_data
from tests.timing import scaled

pytestmark = [pytest.mark.serving, pytest.mark.slow, pytest.mark.timeout(scaled(2400))]

# small: on a loaded 2-core machine a run is mostly `vllm bench serve` starting (a minute and more)
ROW = {"name": "c4", "input_len": 16, "output_len": 12, "num_prompts": 4, "concurrency": 2}


def _bench(vllm_python: Path, tiny_model: Path) -> BenchConfig:
    return BenchConfig(
        command=bench_command(vllm_python),
        tokenizer=str(tiny_model),
        metrics_interval_s=0.5,
        timeout_s=scaled(300),
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


def _stop_for(
    server: ServerHandle, seconds: float, *, once_any: Sequence[Path] = (), after_s: float = 0.0
) -> threading.Thread:
    """SIGSTOP the server's whole process group for ``seconds``, then SIGCONT it; when ``once_any`` is given,
    only ``after_s`` seconds after one of those files appears."""
    assert server.proc is not None
    pgid = server.proc.pid

    def stall() -> None:
        until = time.monotonic() + scaled(600)
        while once_any and not any(p.exists() for p in once_any) and time.monotonic() < until:
            time.sleep(0.05)
        time.sleep(after_s)
        os.killpg(pgid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.killpg(pgid, signal.SIGCONT)

    thread = threading.Thread(target=stall, daemon=True)
    thread.start()
    return thread


def test_same_vs_same_with_a_stalled_run_reruns_its_pair_and_is_never_a_verdict(
    vllm_server: ServerHandle,
    vllm_python: Path,
    tiny_model: Path,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``ds4sync ab`` with the session's server on both sides, three pairs (the minimum), a relative ``--out``,
    and run 3 stalled by a SIGSTOP.

    The stall is planted where nothing can hide it: 0.5 s after run 3's bench starts (the /metrics sampler
    has just scraped; the bench itself needs seconds to import, and the server to finish), the server is
    stopped for 15 s, so /metrics goes unanswered for more than the 10 s stall rule whatever the load
    (a loaded machine only lengthens the gap). Stalls come first among the re-runs, and three pairs allow
    one, so run 3's pair is the one re-run, every time.

    Same vs same: the sides are exchangeable by construction, so a verdict needs the 99 % family-wise
    interval to miss the true 0, at most a 1 % chance per run whatever the noise; with 3 pairs the t quantile
    (17) makes it far rarer still. A second identical server (a whole start-up) would prove nothing more: two
    servers of one configuration differ by nothing ds4sync measures but their port.

    The relative ``--out`` keeps every bench result where the A/B reads it (it once nested them and passed):
    where the files land does not depend on the stall, so this run checks it too, with no run of its own.
    """
    cfg = _serving_yaml(tmp_path / "serving.yaml", vllm_server, vllm_python, tiny_model, pairs=3)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "rel" / "ab"
    stall = _stop_for(vllm_server, 15.0, once_any=[out / f"step03-{side}" / "c4.log" for side in "AB"], after_s=0.5)
    code = main(
        [
            *("ab", "--baseline", vllm_server.url, "--candidate", vllm_server.url, "--model", MODEL_NAME),
            *("--serving-config", str(cfg), "--repo", str(repo), "--state-dir", str(tmp_path / "s")),
            *("--out", "rel/ab", "--seed", "11", "--json"),
        ]
    )
    stall.join()
    captured = capsys.readouterr()
    data = cli_data(captured.out)
    # measured, never "could not measure"; same vs same is neutral or inconclusive, never a verdict
    assert data["error"] is None and code == 0 and data["verdict"] in ("neutral", "inconclusive"), data
    result = ABResult.model_validate_json(Path(data["result"]).read_text(encoding="utf-8"))
    step3 = next(s for s in result.steps if s.step == 3)
    assert step3.replaced, [(s.step, s.replaced, s.values.get("c4.max_gap_s")) for s in result.steps]
    assert step3.values["c4.max_gap_s"] >= 10, step3.values
    [rerun] = result.reruns
    assert rerun.startswith(f"pair {step3.pair} re-run") and "left /metrics unanswered" in rerun, rerun
    assert result.error is None and result.mode == "attached" and result.pairs == 3
    assert sorted(result.order) == ["A"] * 3 + ["B"] * 3
    assert result.lost == {"baseline": 0, "candidate": 0} and data["lost"] == {"baseline": 0, "candidate": 0}
    kept = [s for s in result.steps if not s.replaced]
    assert len(kept) == 6 and sorted(s.side for s in kept) == ["A"] * 3 + ["B"] * 3  # every pair judged unstalled
    assert {r.metric for r in result.rows} == {"c4.output_throughput", "c4.median_tpot_ms", "c4.median_ttft_ms"}
    assert all(r.verdict in ("neutral", "inconclusive") for r in result.rows), result.lines()
    # every measured run drew its own prompts and reset the prefix cache first
    assert len({s.seed for s in result.steps}) == len(result.steps) == 8
    assert {s.prefix_cache for s in result.steps} == {"reset"} and all(s.ok for s in result.steps)
    text = "\n".join(ab_measured_lines(result))
    assert "re-run: pair" in text and "p95" in text and "itl" in text
    # the relative --out: every run's result where the A/B read it, nothing nested under the relative path again
    assert all((out / f"step{s.step:02d}-{s.side}" / "c4.json").is_file() for s in result.steps)
    assert not (out / "rel").exists()
    assert Path(data["result"]) == out / "ab.json" and len((out / "steps.jsonl").read_text().splitlines()) == 8
    # every measured number is in --json: percentiles of every latency, and the server's /metrics
    values = data["steps"][0]["values"]
    for key in ("c4.p90_ttft_ms", "c4.p95_tpot_ms", "c4.p99_itl_ms", "c4.mean_e2el_ms", "c4.waiting_max"):
        assert key in values, sorted(values)
    assert "step 0 side" in captured.err  # progress on stderr with --json too


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
    limit_s = scaled(15)  # a stopped server is named within 15 s on an idle machine
    stall = _stop_for(vllm_server, limit_s + 5)
    time.sleep(0.5)
    start = time.monotonic()
    try:
        results, wedged = run_probes(config, vllm_server, ["exact", "health"], out_dir=tmp_path)
        named_s = time.monotonic() - start
    finally:
        stall.join()
    assert named_s < limit_s, named_s
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
    deadline = time.monotonic() + scaled(900)
    while time.monotonic() < deadline and proc.poll() is None:
        if steps.is_file() and len(steps.read_text().splitlines()) >= 2:
            break
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    start = time.monotonic()
    _out, err = proc.communicate(timeout=scaled(120))
    assert proc.returncode == 130 and time.monotonic() - start < scaled(60), err
    kept = [json.loads(line) for line in steps.read_text().splitlines()]
    assert len(kept) >= 2 and all("c4.output_throughput" in k["values"] for k in kept)
    assert "measured run(s) kept in" in err and "interrupted" in err
    assert "c4: " in err  # what was measured, printed
    partial = json.loads((out / "ab.json").read_text())
    assert partial["error"].startswith("interrupted after") and len(partial["steps"]) == len(kept)
