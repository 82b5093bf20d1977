"""What makes a serving verdict trustworthy, on recorded data and small real child processes: outlying runs
re-run, the pairs an undecided interval would need, errors that are not verdicts, exit codes, request errors,
the process watch, and every measured number in the text."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted import Response, ScriptedServer, healthy_routes
from servinghelp import ROOT, free_port

from ds4sync.cli import main
from ds4sync.cli.serving import ab_exit, backport_exit, gate_exit
from ds4sync.core.errors import ExitCode
from ds4sync.core.proc import group_members
from ds4sync.models.serving_abstats import (
    MetricRule,
    compare_metric,
    log_ratios,
    outlying_pairs,
    outlying_runs,
    pairs_needed,
    t_interval,
    to_pct,
)
from ds4sync.models.serving_results import BackportDecision, ServingResult, StepRecord
from ds4sync.models.serving_settings import BackportConfig, ExactCase, ServerConfig
from ds4sync.serving import probes
from ds4sync.serving.ab import compare_samples, rerun_outliers, samples_from_steps, unmeasured
from ds4sync.serving.backport import decide
from ds4sync.serving.client import OpenAIClient, server_message
from ds4sync.serving.render import ab_measured_lines, row_line
from ds4sync.serving.server import ServerHandle, Watch, process_sign
from tests.timing import scaled

HIGHER = MetricRule(direction="higher", threshold_pct=1.0)
TOK = "c4.output_throughput"


@pytest.mark.parametrize(
    ("values", "flagged"),
    [
        ([290, 295, 2.5, 288, 301], [2]),  # the stalled run among its side's others
        ([290, 295, 140, 288, 301, 297], [2]),  # half speed
        ([290, 295, 292, 288, 301, 297], []),  # plain noise
        ([300, 300, 300, 400], []),  # a third off a side of equal runs: under the 1.5x floor
        ([300, 300, 300, 460], [3]),  # 1.53 times: flagged
        ([290, 295, 2.5], []),  # three runs: too few to tell an outlier from noise
        ([100, 150, 60, 220, 90, 130], []),  # a noisy side: nothing stands out
    ],
)
def test_outlying_runs_by_median_and_mad(values: list[float], flagged: list[int]) -> None:
    assert sorted(outlying_runs(values)) == flagged


def test_outlying_pairs_name_the_side_and_put_the_farthest_first() -> None:
    base = {TOK: [290.0, 295.0, 150.0, 288.0, 301.0]}
    cand = {TOK: [291.0, 2.5, 296.0, 289.0, 300.0]}
    found = outlying_pairs(base, cand)
    assert list(found) == [1, 2]
    assert found[1] == f"candidate {TOK} 2.5 vs median 291 of its side"
    assert found[2].startswith(f"baseline {TOK} 150 vs median 290")


@pytest.mark.parametrize("spread", [0.02, 0.05, 0.1])
@pytest.mark.parametrize("mean", [0.0, 0.03, -0.04])
def test_pairs_needed_is_the_first_count_that_decides(spread: float, mean: float) -> None:
    deltas = [mean + spread * x for x in (-1.2, 0.4, 1.0, -0.3, 0.1)]
    n = pairs_needed(deltas, HIGHER, confidence=0.99)
    assert n is not None and n >= len(deltas)
    m, s = sum(deltas) / len(deltas), math.sqrt(sum((d - sum(deltas) / 5) ** 2 for d in deltas) / 4)

    def decides(k: int) -> bool:
        # k pairs with the same mean and spread: the same verdict rule, through compare_metric
        ks = [m + s * z for z in _unit_sample(k)]
        base = [100.0] * k
        return compare_metric("m", base, [100 * math.exp(d) for d in ks], HIGHER, confidence=0.99).verdict != (
            "inconclusive"
        )

    assert decides(n) and (n == len(deltas) or not decides(n - 1))


def _unit_sample(k: int) -> list[float]:
    """k values with mean 0 and sample standard deviation 1."""
    raw = [(-1) ** i * (1 + i // 2) for i in range(k)]
    mean = sum(raw) / k
    sd = math.sqrt(sum((x - mean) ** 2 for x in raw) / (k - 1))
    return [(x - mean) / sd for x in raw]


def test_an_inconclusive_row_says_how_many_pairs_it_would_need() -> None:
    row = compare_metric("m", [300, 301, 299, 300, 302], [312, 298, 315, 303, 318], HIGHER)
    assert row.verdict == "inconclusive" and row.pairs_needed and row.pairs_needed > 5
    assert f"about {row.pairs_needed} pairs at this spread would decide" in row.reason
    assert row.brief()["pairs_needed"] == row.pairs_needed
    decided = compare_metric("m", [300] * 5, [309] * 5, HIGHER)
    assert decided.verdict == "improvement" and decided.pairs_needed is None


def test_one_stalled_pair_blinds_the_t_interval_and_its_rerun_restores_it() -> None:
    base = [295.0, 296.0, 294.0, 297.0, 295.5, 296.5]
    cand = [b * 1.05 for b in base]
    cand[3] = 2.5  # a stalled candidate run
    assert compare_metric(TOK, base, cand, HIGHER).verdict == "inconclusive"
    steps = _steps(base, cand)
    redo = {TOK: 297.0 * 1.05}
    lines = rerun_outliers(steps, lambda side, step: redo if side == "B" else {TOK: 297.0}, [TOK])
    assert len(lines) == 1 and lines[0].startswith("pair 3 re-run (runs ")
    assert f"candidate {TOK} 2.5 vs median" in lines[0] and "server metrics: run" in lines[0]
    assert "preemptions 0" in lines[0] and "waiting_max 7" in lines[0]
    a, b = samples_from_steps(steps)
    assert 2.5 not in b[TOK] and len(b[TOK]) == 6 and sum(s.replaced for s in steps) == 2
    assert compare_metric(TOK, a[TOK], b[TOK], HIGHER).verdict == "improvement"


def _steps(base: list[float], cand: list[float], **extra: float) -> list[StepRecord]:
    steps = []
    for pair, (x, y) in enumerate(zip(base, cand, strict=True)):
        evidence = {"c4.preemptions": 0.0, "c4.waiting_max": 7.0 if y < 10 else 0.0}
        steps.append(StepRecord(step=2 * pair, side="A", pair=pair, values={TOK: x, **extra}))
        steps.append(StepRecord(step=2 * pair + 1, side="B", pair=pair, values={TOK: y, **evidence, **extra}))
    return steps


def test_a_run_the_server_left_unanswered_is_rerun_whatever_the_spread() -> None:
    # the machine's load swung 8x in one session: the stalled 0.3 tok/s run is not 5 robust SDs from its side,
    # but the server left /metrics unanswered for 90 s during it (measured live: tests/serving/test_live_verdicts.py)
    steps = _steps([5.0, 0.3, 9.8, 19.7], [5.1, 6.6, 41.6, 32.2])
    steps[2] = steps[2].model_copy(update={"values": {**steps[2].values, "c4.max_gap_s": 90.4}})
    assert outlying_pairs({TOK: [5.0, 0.3, 9.8, 19.7]}, {TOK: [5.1, 6.6, 41.6, 32.2]}) == {}
    lines = rerun_outliers(steps, lambda side, step: {TOK: 10.0}, [TOK])
    assert lines and lines[0].startswith("pair 1 re-run") and "unanswered for 90.4 s during run 2 (A)" in lines[0]
    quiet = _steps([5.0, 5.2, 9.8, 19.7], [5.1, 6.6, 41.6, 32.2], **{"c4.max_gap_s": 1.2})
    assert rerun_outliers(quiet, lambda side, step: {TOK: 10.0}, [TOK]) == []


def test_reruns_stay_within_a_third_of_the_pairs() -> None:
    base = [295.0, 2.0, 294.0, 3.0, 295.5, 296.5]
    steps = _steps(base, [295.0] * 6)
    measured: list[tuple[str, int]] = []

    def measure(side: str, step: int) -> dict[str, float]:
        measured.append((side, step))
        return {TOK: 295.0}

    lines = rerun_outliers(steps, measure, [TOK])
    assert len(lines) == 2 and [s for s, _ in measured] == ["A", "B", "A", "B"]
    assert [step for _, step in measured] == [12, 13, 14, 15]  # after the schedule, numbered on


@pytest.mark.parametrize(
    ("steps", "lost", "paired", "words"),
    [
        (
            [StepRecord(step=0, side="A", unreadable=("c4",), detail="no readable result JSON")],
            {},
            True,
            "side A run 0",
        ),
        ([], {"baseline": 3.0}, True, "the baseline lost 3 request(s)"),
        ([], {}, False, "no metric could be paired"),
        ([StepRecord(step=0, side="B", unreadable=("c4",), replaced=True)], {}, True, None),  # re-run: judged anew
        ([], {"candidate": 5.0}, True, None),  # a measured regression, not an error
    ],
)
def test_what_makes_an_ab_unmeasured(steps: list[StepRecord], lost: dict, paired: bool, words: str | None) -> None:
    found = unmeasured(steps, lost, paired=paired)
    assert (found is None) if words is None else (words in (found or ""))


def test_both_sides_without_results_are_an_error_with_its_own_exit_code() -> None:
    steps = [
        StepRecord(step=i, side=side, pair=i // 2, unreadable=("c4",), values={"boot_s": 50.0})
        for i, side in enumerate("ABBA")
    ]
    base, cand = samples_from_steps(steps)
    result = compare_samples(base, cand, {}, labels=("a", "b"), steps=steps, strict_pairs=False)
    assert result.error and "no readable result" in result.error and result.verdict == "inconclusive"
    assert ab_exit(result) == ExitCode.NOT_MEASURED == 7
    assert result.summary().startswith("could not measure: side A run 0")
    lost_cand = compare_samples(
        {TOK: [1.0, 1.0, 1.0], "c4.lost_requests": [0, 0, 0]},
        {TOK: [1.0, 1.0, 1.0], "c4.lost_requests": [1, 0, 0]},
        {},
        labels=("a", "b"),
    )
    assert lost_cand.error is None and lost_cand.verdict == "regression" and ab_exit(lost_cand) == 1


def test_exit_codes_tell_a_regression_from_could_not_measure() -> None:
    started = {"status": "failed", "base_url": "http://x", "started": True}
    assert gate_exit(ServingResult(**started, startup_error="server did not start")) == 7
    assert gate_exit(ServingResult(**started)) == 1
    assert gate_exit(ServingResult(**{**started, "status": "passed"})) == 0
    common = {"upstream_sha": "a" * 40, "reasons": ("r",)}
    assert backport_exit(BackportDecision(decision="include", **common)) == 0
    assert backport_exit(BackportDecision(decision="exclude", **common)) == 1
    assert backport_exit(BackportDecision(decision="exclude", basis="undecided", **common)) == 7
    assert backport_exit(BackportDecision(decision="exclude", basis="unmeasured", **common)) == 7


@pytest.mark.parametrize("require_benefit", [True, False])
def test_an_undecided_interval_never_includes_a_backport(require_benefit: bool) -> None:
    rows = [
        compare_metric("c1.output_throughput", [300, 301, 299, 300, 302], [312, 298, 315, 303, 318], HIGHER),
        compare_metric("c8.output_throughput", [300] * 5, [300.2] * 5, HIGHER),
    ]
    got, reasons = decide(rows, kv_change_pct=0.0, config=BackportConfig(require_benefit=require_benefit))
    assert got == "exclude"
    assert any(r.startswith("undecided c1.output_throughput") and "pairs would decide" in r for r in reasons)
    neutral = [compare_metric("c1.output_throughput", [300] * 5, [300.2] * 5, HIGHER)]
    got, _ = decide(neutral, kv_change_pct=0.0, config=BackportConfig(require_benefit=require_benefit))
    assert got == ("exclude" if require_benefit else "include")


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('{"error": {"message": "unexpected \'}\'", "type": "BadRequestError", "code": 400}}', "unexpected '}'"),
        ('{"object": "error", "message": "template error", "code": 400}', "template error"),
        ('{"detail": "Not Found"}', "Not Found"),
        ('{"error": "boom"}', "boom"),
        ("Internal Server Error", "Internal Server Error"),
        ("", ""),
    ],
)
def test_the_servers_own_message(body: str, said: str) -> None:
    assert server_message(body) == said


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer(healthy_routes())
    yield server
    server.close()


CASE = ExactCase(name="two", messages=({"role": "user", "content": "1+1?"},), expect="2")


@pytest.mark.parametrize(
    ("response", "status", "said"),
    [
        (Response(status=400, json_body={"error": {"message": "jinja2: unexpected '}'", "code": 400}}), 400, "jinja2"),
        (Response(status=500, json_body={"error": {"message": "EngineCore died", "code": 500}}), 500, "EngineCore"),
        (Response(hang=True), None, "no answer within"),
    ],
)
def test_a_request_error_is_an_error_not_a_wrong_answer(
    scripted: ScriptedServer, response: Response, status: int | None, said: str
) -> None:
    scripted.routes[("POST", "/v1/chat/completions")] = lambda _b: response
    with OpenAIClient(scripted.url, "m", timeout_s=scaled(0.5)) as client:
        result = probes.probe_exact(client, [CASE])
    assert result.status == "error" and not result and "wrong" not in result.summary
    assert result.brief()["error"]["status"] == status and said in result.summary
    if status:
        assert result.summary.startswith(f"error: HTTP {status} from POST /v1/chat/completions: ")


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def _handle(proc: subprocess.Popen[bytes]) -> ServerHandle:
    config = ServerConfig(base_url="http://127.0.0.1:9", model="m", guard_timeout_s=60)
    return ServerHandle(config=config, proc=proc)


def test_the_watch_names_a_stopped_group_on_the_second_look() -> None:
    proc = _child("import time; time.sleep(60)")
    try:
        handle = _handle(proc)
        watch = Watch(handle)
        assert process_sign(handle) is None
        os.killpg(proc.pid, signal.SIGSTOP)
        time.sleep(0.2)
        assert watch.check() is None  # once may be a passing stop
        sign = watch.check()
        assert sign is not None and "stopped (state T" in sign and str(proc.pid) in sign
        os.killpg(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()
        assert watch.check() == "server process exited with code -9"  # an exit at once
    finally:
        os.killpg(proc.pid, signal.SIGCONT) if proc.poll() is None else None
        proc.kill()
        proc.wait()


def test_the_watch_names_a_zombie_in_the_group() -> None:
    # the leader forks a child that exits and is never reaped (an engine core that died unnoticed)
    proc = _child("import os, time\nif os.fork() == 0:\n    os._exit(0)\ntime.sleep(60)")
    try:
        deadline = time.monotonic() + 10
        sign = None
        while time.monotonic() < deadline and not (sign := process_sign(_handle(proc))):
            time.sleep(0.05)
        assert sign is not None and "zombies (state Z" in sign
    finally:
        proc.kill()
        proc.wait()


def test_every_measured_number_in_one_compact_line() -> None:
    values = {
        "output_throughput": 295.14,
        "request_throughput": 3.2,
        "lost_requests": 0.0,
        **{f"{s}_{lat}_ms": v for lat, v in (("ttft", 12.0), ("itl", 3.0)) for s, v in (("mean", v), ("median", v))},
        **{f"p{p}_{lat}_ms": v + p / 100 for lat, v in (("ttft", 12.0), ("itl", 3.0)) for p in (50, 90, 95, 99)},
        "std_ttft_ms": 1.5,
        "preemptions": 0.0,
        "running_max": 3.0,
        "waiting_max": 2.0,
        "kv_usage_max_pct": 12.5,
    }
    assert row_line("c4", values) == (
        "c4: 295.1 tok/s, 3.20 req/s, lost 0; ttft ms mean/p50/p90/p95/p99/std 12.0/12.5/12.9/12.9/13.0/1.5; "
        "itl ms mean/p50/p90/p95/p99 3/3.5/3.9/3.95/3.99; "
        "server: preemptions 0, running max 3, waiting max 2, KV usage max % 12.5"
    )


def test_ab_text_shows_medians_of_every_number_boot_times_and_reruns() -> None:
    steps = [
        StepRecord(step=0, side="A", pair=0, boot_s=51.0, values={TOK: 290.0, "c4.p95_itl_ms": 3.0, "boot_s": 51.0}),
        StepRecord(step=1, side="B", pair=0, boot_s=49.5, values={TOK: 300.0, "c4.p95_itl_ms": 2.0, "boot_s": 49.5}),
        StepRecord(step=2, side="B", pair=1, values={TOK: 310.0, "c4.p95_itl_ms": 4.0}),
        StepRecord(step=3, side="A", pair=1, values={TOK: 292.0, "c4.p95_itl_ms": 5.0}),
    ]
    base, cand = samples_from_steps(steps)
    result = compare_samples(base, cand, {}, labels=("a", "b"), steps=steps, strict_pairs=False, reruns=("pair 1 x",))
    assert ab_measured_lines(result) == [
        "A baseline median of 2 run(s): c4: 291.0 tok/s; itl ms p95 4",
        "A baseline boot s: 51.0",
        "B candidate median of 2 run(s): c4: 305.0 tok/s; itl ms p95 3",
        "B candidate boot s: 49.5",
        "re-run: pair 1 x",
    ]


def test_the_t_interval_of_the_verdict_is_unchanged_without_outliers() -> None:
    base, cand = [300, 301, 299, 300, 302], [303, 305, 301, 304, 306]
    row = compare_metric("m", base, cand, HIGHER, confidence=0.99)
    low, high = t_interval(log_ratios(base, cand), confidence=0.99)
    assert (row.ci_low_pct, row.ci_high_pct) == pytest.approx((to_pct(low), to_pct(high)))


def test_the_bench_logs_inter_token_latency_header_is_not_redacted() -> None:
    from ds4sync.core.redact import redact_secrets

    header = "---------------Inter-token Latency----------------"
    assert redact_secrets(header) == header


def test_status_ends_and_announces_a_killed_commands_server(
    builder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    builder.commit({"a.txt": "a"}, "init")
    state = tmp_path / "state"
    # a ds4sync stand-in starts a server through the state dir's registry, then is SIGKILLed
    owner = f"""
import sys, time
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from ds4sync.core.children import ChildRegistry
from ds4sync.models.serving_settings import ServerConfig
from ds4sync.serving.server import start_server
config = ServerConfig(command=({sys.executable!r}, "-c", "import time; time.sleep(600)"), port={free_port()}, model="m")
registry = ChildRegistry(Path({str(state / "children")!r}))
handle = start_server(config, log_path=Path({str(tmp_path / "server.log")!r}), registry=registry)
print(handle.proc.pid, flush=True)
time.sleep(600)
"""
    proc = subprocess.Popen([sys.executable, "-c", owner], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pgid = int(proc.stdout.readline())
    proc.kill()
    proc.wait()
    assert group_members(pgid)
    main(["status", "--repo", str(builder.path), "--state-dir", str(state), "--json"])
    err = capsys.readouterr().err
    assert f"ended 1 orphaned server group(s) left by a killed ds4sync: pgid {pgid} (server http://" in err
    assert group_members(pgid) == []
