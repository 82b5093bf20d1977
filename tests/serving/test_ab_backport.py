"""`ds4sync ab` on recorded runs, and backport decisions from real git, a real build command and A/B."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from ds4sync.cli import main
from ds4sync.core.git import GitRepo
from ds4sync.core.record import ForkRef, UpstreamRef
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.models.record import RecordStore, RunRecord
from ds4sync.models.serving_abstats import MetricRule, compare_metric, schedule
from ds4sync.models.serving_settings import BackportConfig, ServingConfig
from ds4sync.serving.backport import Trees, decide, evaluate_backport
from tests.cli_json import data as cli_data


def bench_file(path: Path, tok_s: float, tpot_ms: float, *, completed: int = 8) -> Path:
    """A `vllm bench serve --save-result` shaped file."""
    path.write_text(
        json.dumps(
            {
                "num_prompts": 8,
                "completed": completed,
                "output_throughput": tok_s,
                "median_tpot_ms": tpot_ms,
                "median_ttft_ms": 40.0,
            }
        )
    )
    return path


def test_ab_cli_on_recorded_runs(builder: RepoBuilder, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    builder.commit({"a.txt": "a"}, "init")
    rng = random.Random(5)
    args = []
    for i in range(5):
        base = 298.9 * (1 + rng.gauss(0, 0.002))
        args += ["--baseline", str(bench_file(tmp_path / f"a{i}.json", base, 3.35))]
        args += ["--candidate", str(bench_file(tmp_path / f"b{i}.json", base * 0.979, 3.42))]
    state = tmp_path / "state"
    store = RecordStore(state)
    store.save(
        RunRecord(
            run_id="r1",
            repo=str(builder.path),
            state_dir=str(state),
            sync_branch="sync/x",
            worktree=str(builder.path),
            backup_ref="refs/x",
            status="paused",
            upstream=UpstreamRef(remote="upstream", ref="main", sha="0" * 40),
            fork=ForkRef(branch="main", head_before="0" * 40),
        )
    )
    code = main(
        ["ab", *args, "--repo", str(builder.path), "--state-dir", str(state), "--out", str(tmp_path / "ab"), "--json"]
    )
    data = cli_data(capsys.readouterr().out)
    rows = {r["metric"]: r for r in data["rows"]}
    assert code == 1  # a regression fails the command
    assert data["verdict"] == "regression" and data["pairs"] == 5 and data["confidence"] == 0.99
    assert set(rows) == {"output_throughput", "median_tpot_ms", "median_ttft_ms"}
    tok = rows["output_throughput"]
    assert tok["verdict"] == "regression" and tok["delta_pct"] == pytest.approx(-2.1, abs=0.3)
    assert tok["ci_low_pct"] < tok["mean_delta_pct"] < tok["ci_high_pct"] < 0
    assert tok["confidence"] == pytest.approx(1 - 0.01 / 3)  # Bonferroni over the three judged metrics
    assert rows["median_tpot_ms"]["verdict"] == "regression"  # lower is better for TPOT
    assert rows["median_ttft_ms"]["verdict"] == "neutral"
    # every run is kept: the result file and one history line per run, per metric
    code = main(["ab", *args, "--repo", str(builder.path), "--state-dir", str(state), "--json"])
    second = cli_data(capsys.readouterr().out)
    history = [json.loads(line) for line in (state / "ab" / "history.jsonl").read_text().splitlines()]
    assert [h["verdict"] for h in history] == ["regression", "regression"]
    assert history[0]["metrics"]["output_throughput"]["verdict"] == "regression"
    assert Path(second["result"]).is_file() and Path(second["result"]) != tmp_path / "ab" / "ab.json"
    assert json.loads((tmp_path / "ab" / "ab.json").read_text())["verdict"] == "regression"
    results = store.load("r1").results  # the active run keeps the latest and every run
    assert results.ab is not None and results.ab.verdict == "regression" and len(results.ab_runs) == 2
    assert second["run_id"] == "r1"


def test_ab_lost_requests_are_a_regression_not_a_usage_error(
    builder: RepoBuilder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    builder.commit({"a.txt": "a"}, "init")
    args = []
    for i in range(4):
        args += ["--baseline", str(bench_file(tmp_path / f"a{i}.json", 300 + i, 3.3))]
        lost = 6 if i == 2 else 8  # one run completed 6 of 8 prompts
        args += ["--candidate", str(bench_file(tmp_path / f"b{i}.json", 300 + i, 3.3, completed=lost))]
    code = main(["ab", *args, "--repo", str(builder.path), "--state-dir", str(tmp_path / "s"), "--json"])
    data = cli_data(capsys.readouterr().out)
    assert code == 1 and data["verdict"] == "regression"
    assert data["lost"] == {"baseline": 0, "candidate": 2}
    assert data["reasons"][0] == "candidate lost 2 request(s) (baseline 0)"


def test_ab_refuses_an_attached_side_against_a_started_one(
    builder: RepoBuilder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    builder.commit({"a.txt": "a"}, "init")
    started = tmp_path / "cand.yaml"
    started.write_text("serving:\n  server: {command: [python, -m, server], model: m}\n")
    code = main(
        [
            *("ab", "--baseline", "http://127.0.0.1:9", "--candidate", str(started), "--model", "m"),
            *("--repo", str(builder.path), "--state-dir", str(tmp_path / "s")),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "a warm server against a cold one" in err and "both attached" in err


def test_unknown_ab_metric_keys_are_errors(tmp_path: Path) -> None:
    from ds4sync.core.errors import ConfigError
    from ds4sync.serving.ab import compare_samples

    with pytest.raises(ValueError, match=r"unknown metric key.*c1\.output_throughtput"):
        ServingConfig.model_validate(
            {
                "server": {"base_url": "http://127.0.0.1:9", "model": "m"},
                "bench": {"rows": [{"name": "c1", "input_len": 8, "output_len": 8}]},
                "ab_metrics": {"c1.output_throughtput": {"direction": "higher"}},
            }
        )
    ok = ServingConfig.model_validate(
        {
            "server": {"base_url": "http://127.0.0.1:9", "model": "m"},
            "bench": {"rows": [{"name": "c1", "input_len": 8, "output_len": 8}]},
            "ab_metrics": {"c1.p99_ttft_ms": {"direction": "lower"}, "kv_cache_tokens": {}},
        }
    )
    assert set(ok.ab_metrics) == {"c1.p99_ttft_ms", "kv_cache_tokens"}
    # a rule for a metric the run did not measure is an error too, never silently ignored
    with pytest.raises(ConfigError, match=r"not measured: c1\.p99_ttft_ms"):
        compare_samples(
            {"c1.output_throughput": [1.0] * 3}, {"c1.output_throughput": [1.0] * 3}, ok.ab_metrics, labels=("a", "b")
        )


def test_ab_cli_refuses_unpaired_runs(builder: RepoBuilder, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    builder.commit({"a.txt": "a"}, "init")
    code = main(
        [
            "ab",
            "--baseline",
            str(bench_file(tmp_path / "a.json", 1, 1)),
            "--baseline",
            str(bench_file(tmp_path / "a2.json", 1, 1)),
            "--candidate",
            str(bench_file(tmp_path / "b.json", 1, 1)),
            "--repo",
            str(builder.path),
            "--out",
            str(tmp_path / "ab"),
        ]
    )
    assert code == 2 and "pairs need both" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kv", "verdicts", "decision", "phrases"),
    [
        (
            -3.8,
            [
                ("c1.output_throughput", [300] * 5, [291] * 5),
                ("c8.output_throughput", [900, 905, 898, 902, 901], [915, 890, 920, 895, 905]),
            ],
            "exclude",
            [
                "reduced KV capacity by 3.80%",
                "slowed c1.output_throughput by 3.00%",
                "undecided c8.output_throughput",
            ],
        ),
        (0.0, [("c1.output_throughput", [300] * 5, [309] * 5)], "include", ["improved c1.output_throughput by 3.00%"]),
        (0.0, [("c1.output_throughput", [300] * 5, [300] * 5)], "exclude", ["no measurable benefit"]),
        (None, [("c1.median_tpot_ms", [3.0] * 5, [3.3] * 5)], "exclude", ["raised c1.median_tpot_ms by 10.00%"]),
    ],
)
def test_decide(kv: float | None, verdicts: list, decision: str, phrases: list[str]) -> None:
    rows = [compare_metric(m, a, b, MetricRule(direction="lower" if "tpot" in m else "higher")) for m, a, b in verdicts]
    got, reasons = decide(rows, kv_change_pct=kv, config=BackportConfig())
    assert got == decision
    text = "; ".join(reasons)
    assert all(p in text for p in phrases), text


ENGINE = "SPEED = {speed}\nKV_TOKENS = {kv}\n"
BUILD = (
    "import json, runpy; ns = runpy.run_path('engine.py'); "
    "json.dump({'speed': ns['SPEED'], 'kv': ns['KV_TOKENS']}, open('build.json', 'w'))"
)


def _fork(builder: RepoBuilder) -> dict[str, str]:
    builder.commit({"engine.py": ENGINE.format(speed=300, kv=1000), "README": "r\n"}, "init")
    builder.branch("upstream")
    slower = builder.commit({"engine.py": ENGINE.format(speed=291, kv=962)}, "Upstream #54674: new scheduler")
    builder.checkout("main")
    builder.branch("sync/main-x")
    builder.commit({"README": "fork\n"}, "fork change")
    builder.checkout("main")
    builder.branch("upstream-fast")
    faster = builder.commit({"engine.py": ENGINE.format(speed=309, kv=1000)}, "Upstream: faster decode")
    builder.checkout("main")
    builder.branch("upstream2")
    conflict = builder.commit({"README": "other\n"}, "conflicting readme")
    builder.checkout("main")
    return {"slower": slower, "faster": faster, "conflict": conflict}


def _measure_build(trees: Trees):
    rng = random.Random(11)

    def measure(side: str, _step: int) -> dict[str, float]:
        tree = trees.base if side == "A" else trees.candidate
        built = json.loads((tree.path / "build.json").read_text())
        return {"c1.output_throughput": built["speed"] * (1 + rng.gauss(0, 0.002)), "kv_cache_tokens": built["kv"]}

    return measure, lambda: None


def _serving(tmp_path: Path) -> ServingConfig:
    return ServingConfig.model_validate(
        {
            "server": {"base_url": "http://127.0.0.1:9", "model": "m"},
            "backport": {"build_command": [sys.executable, "-c", BUILD], "pairs": 5},
        }
    )


def test_backport_excluded_with_measured_reasons(builder: RepoBuilder, tmp_path: Path) -> None:
    shas = _fork(builder)
    decision = evaluate_backport(
        GitRepo(builder.path),
        shas["slower"],
        _serving(tmp_path),
        base_ref="sync/main-x",
        base_tree=None,
        work_dir=tmp_path / "bp",
        python=sys.executable,
        measure_factory=_measure_build,
        patch_dir=tmp_path / "patches",
    )
    assert decision.decision == "exclude"
    assert decision.kv_change_pct == pytest.approx(-3.8)
    line = decision.line()
    assert line.startswith(
        f"{shas['slower'][:10]} excluded: reduced KV capacity by 3.80%; slowed c1.output_throughput by "
    )
    slowed = float(line.split("slowed c1.output_throughput by ")[1].split("%")[0])
    assert 2.5 < slowed < 3.5 and "benefit" not in line
    assert decision.ab is not None and decision.ab.seed is not None
    assert decision.ab.order == tuple(schedule(5, seed=decision.ab.seed)) and decision.ab.pairs == 5
    assert decision.patchset is None and not (tmp_path / "patches").exists()
    # the candidate really carries the upstream change on top of the sync branch
    cand = GitRepo(tmp_path / "bp" / f"backport-{shas['slower'][:10]}")
    assert "SPEED = 291" in (cand.path / "engine.py").read_text() and (cand.path / "README").read_text() == "fork\n"


def test_backport_included_becomes_a_patchset(builder: RepoBuilder, tmp_path: Path) -> None:
    shas = _fork(builder)
    decision = evaluate_backport(
        GitRepo(builder.path),
        shas["faster"],
        _serving(tmp_path),
        base_ref="sync/main-x",
        base_tree=None,
        work_dir=tmp_path / "bp",
        python=sys.executable,
        measure_factory=_measure_build,
        patch_dir=tmp_path / "patches",
    )
    assert decision.decision == "include", decision.reasons
    folder = Path(decision.patchset or "")
    meta = (folder / "patchset.yaml").read_text()
    assert "kind: backport" in meta and shas["faster"] in meta and "improved c1.output_throughput" in meta
    assert any(p.suffix == ".patch" for p in folder.iterdir())


def test_backport_that_does_not_apply_is_excluded(builder: RepoBuilder, tmp_path: Path) -> None:
    shas = _fork(builder)
    decision = evaluate_backport(
        GitRepo(builder.path),
        shas["conflict"],
        _serving(tmp_path),
        base_ref="sync/main-x",
        base_tree=None,
        work_dir=tmp_path / "bp",
        python=sys.executable,
        measure_factory=_measure_build,
    )
    assert decision.decision == "exclude" and "does not apply cleanly" in decision.reasons[0]
    assert not GitRepo(builder.path).ref_exists(f"refs/heads/backport/{shas['conflict'][:10]}")


def test_backport_that_loses_requests_is_excluded_not_raised(builder: RepoBuilder, tmp_path: Path) -> None:
    shas = _fork(builder)

    def lossy(trees: Trees):
        def measure(side: str, step: int) -> dict[str, float]:
            if side == "B" and step % 3 == 0:  # the candidate's bench completed 3 of 4 prompts
                return {"c1.output_throughput": 300.0, "c1.lost_requests": 1.0}
            return {"c1.output_throughput": 300.0, "c1.lost_requests": 0.0}

        return measure, lambda: None

    decision = evaluate_backport(
        GitRepo(builder.path),
        shas["faster"],
        _serving(tmp_path),
        base_ref="sync/main-x",
        base_tree=None,
        work_dir=tmp_path / "bp",
        python=sys.executable,
        measure_factory=lossy,
        seed=3,
    )
    assert decision.decision == "exclude"
    assert decision.reasons[0].startswith("lost ") and "(baseline lost 0)" in decision.reasons[0]
    assert decision.ab is not None and decision.ab.verdict == "regression" and decision.ab.lost["candidate"] >= 1
