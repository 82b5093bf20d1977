"""``ds4sync bisect`` on generated histories with one planted breaking upstream commit of each kind."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import git
import pytest
import yaml

from ds4sync.cli import main
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.loop.bisect import BisectResult, bisect, search
from ds4sync.loop.bisect import BisectStep as Step

sys.path.insert(0, str(Path(__file__).resolve().parent))
from history import (
    BREAK_GATE,
    BREAK_INVARIANT,
    BREAK_PATCH,
    CONFLICT,
    CONFLICT_ELSEWHERE,
    HOOKS,
    RESTORE,
    History,
    make_history,
)


def run(
    history: History, *, tier: str | None = None, rules: list[dict] | None = None, good: str | None = None
) -> BisectResult:
    ws = history.workspace(rules=rules)
    return bisect(ws, fork_branch="fork", good=good or history.base, bad=history.upstream[-1], tier=tier)


def bound(n: int) -> int:
    return math.ceil(math.log2(n)) + 2


@pytest.mark.parametrize(
    ("kind", "planted", "failed"),
    [
        ("invariant", BREAK_INVARIANT, ("on-load-hook",)),
        ("patch-set", BREAK_PATCH, ("patch-set:sched-tweak",)),
    ],
)
@pytest.mark.parametrize(("n", "k"), [(1, 0), (2, 1), (3, 0), (17, 16), (64, 37), (64, 0)])
def test_culprit_of_each_tree_kind_found_within_the_bound(
    tmp_path: Path, kind: str, planted: dict, failed: tuple, n: int, k: int
) -> None:
    history = make_history(tmp_path, n, {k: planted})
    result = run(history)
    assert result.status == "found", result
    assert result.first_bad is not None and result.first_bad.upstream_sha == history.upstream[k]
    assert result.first_bad.failed == failed
    assert result.first_bad.pr == 1000 + k
    assert result.last_good == (history.upstream[k - 1] if k else history.base)
    assert result.evaluations <= bound(n) and result.evaluations == len(result.steps)
    assert all(s.mode == "tree" for s in result.steps)  # no worktree for a step without conflicts or gates
    # every step's verdict is right for its commit: bad at or after the culprit, good before it
    assert result.steps[1].upstream_sha == history.base and result.steps[1].verdict == "good"
    for step in result.steps:
        position = history.upstream.index(step.upstream_sha) if step.upstream_sha != history.base else -1
        assert step.verdict == ("bad" if position >= k else "good")


def test_a_second_bisect_is_served_from_the_cache(tmp_path: Path) -> None:
    history = make_history(tmp_path, 200, {123: BREAK_INVARIANT})
    first = run(history)
    again = run(history)
    assert first.first_bad and again.first_bad and again.first_bad.upstream_sha == history.upstream[123]
    assert not any(s.cached for s in first.steps)
    assert all(s.cached and s.seconds == 0 for s in again.steps)
    assert [s.upstream_sha for s in again.steps] == [s.upstream_sha for s in first.steps]
    # the cache is keyed by the profile: a changed invariant is evaluated anew
    spec = tmp_path / "profile" / "patches" / "hooks-used" / "patchset.yaml"
    spec.write_text(spec.read_text().replace("on_load", "on_startup"))
    changed = run(history)
    assert not any(s.cached for s in changed.steps)
    assert changed.status == "bad-holds"  # with the invariant following upstream, nothing broke


def test_an_unresolvable_conflict_is_skipped_and_the_culprit_still_found(tmp_path: Path) -> None:
    # 64 candidates: the first midpoint (31) conflicts on the fork's own line; 32 restores it.
    history = make_history(tmp_path, 64, {31: CONFLICT, 32: RESTORE, 45: BREAK_INVARIANT})
    result = run(history)
    assert result.status == "found" and result.first_bad is not None
    assert result.first_bad.upstream_sha == history.upstream[45]
    skipped = [s for s in result.steps if s.verdict == "skip"]
    assert [s.upstream_sha for s in skipped] == [history.upstream[31]]
    assert "vllm/hooks.py" in skipped[0].reason and skipped[0].mode == "worktree"
    assert result.evaluations <= bound(64) + len(skipped)


def test_skips_next_to_the_culprit_make_it_ambiguous_not_wrong(tmp_path: Path) -> None:
    broken = HOOKS.replace("def on_load():", "def on_startup():")
    conflict_and_break = {"vllm/hooks.py": broken.replace("VALUE = 'base'", "VALUE = 'upstream'")}
    history = make_history(tmp_path, 64, {31: conflict_and_break, 32: {"vllm/hooks.py": broken}})
    result = run(history)
    assert result.status == "ambiguous" and result.first_bad is None
    assert result.suspects == (history.upstream[31], history.upstream[32])
    assert "skipped" in result.culprit_line()


def test_a_rule_settles_the_conflict_in_a_worktree_step(tmp_path: Path) -> None:
    history = make_history(tmp_path, 64, {31: CONFLICT, 32: RESTORE, 45: BREAK_INVARIANT})
    result = run(history, rules=[{"glob": "vllm/hooks.py", "strategy": "ours"}])
    assert result.first_bad is not None and result.first_bad.upstream_sha == history.upstream[45]
    step31 = next(s for s in result.steps if s.upstream_sha == history.upstream[31])
    assert step31.verdict == "good" and step31.mode == "worktree"


@pytest.mark.slow
def test_a_failing_gate_is_bisected_in_a_worktree(tmp_path: Path) -> None:
    history = make_history(tmp_path, 24, {9: BREAK_GATE})
    result = run(history, tier="unit")
    assert result.first_bad is not None and result.first_bad.upstream_sha == history.upstream[9]
    assert result.first_bad.failed == ("gate:version-check",)
    assert all(s.mode == "worktree" for s in result.steps)
    assert result.evaluations <= bound(24)
    assert not (tmp_path / "state" / "bisect" / "worktree").exists()  # the step worktree is removed


def test_bad_that_holds_ends_at_once(tmp_path: Path) -> None:
    history = make_history(tmp_path, 40, {})
    result = run(history)
    assert result.status == "bad-holds" and result.evaluations == 1


def test_good_must_be_an_ancestor_of_bad(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = make_history(tmp_path, 4, {})
    code = main(
        [
            "bisect",
            "--repo",
            str(history.root),
            "--branch",
            "fork",
            "--profile",
            str(tmp_path / "profile"),
            "--good",
            history.upstream[3],
            "--bad",
            history.upstream[1],
            "--state-dir",
            str(tmp_path / "state"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "not an ancestor" in err


@pytest.mark.slow
def test_cli_names_the_culprit_and_sync_to_green_stops_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = make_history(tmp_path, 30, {20: BREAK_INVARIANT})
    common = [
        "--repo",
        str(history.root),
        "--branch",
        "fork",
        "--profile",
        str(tmp_path / "profile"),
        "--state-dir",
        str(tmp_path / "state"),
    ]
    code = main(["bisect", *common, "--bad", history.upstream[-1], "--json"])
    out = json.loads(capsys.readouterr().out)
    data = out.get("data", out)
    assert code == 0 and data["first_bad"]["upstream_sha"] == history.upstream[20] and data["first_bad"]["pr"] == 1020
    assert (data["good_from"], data["bad_from"]) == (
        "the merge-base (no green sync on record)",
        f"--bad {history.upstream[-1]}",
    )
    code = main(["sync", *common, "--to-green", history.upstream[-1]])
    captured = capsys.readouterr()
    assert code in (0, 4), captured.err
    record_path = next((tmp_path / "state" / "runs").glob("*/record.json"))
    record = json.loads(record_path.read_text())
    assert record["upstream"]["sha"] == history.upstream[19]
    assert any(history.upstream[20][:12] in note and "#1020" in note for note in record["notes"])
    # the run waits after verify; once its remaining phases pass it is a green sync, and the next
    # bisect starts from it and says so (the record is marked done here as those phases would)
    from ds4sync.models.record import RecordStore

    store = RecordStore(tmp_path / "state")
    run_id = record_path.parent.name
    store.save(store.load(run_id).model_copy(update={"status": "done"}))
    assert main(["bisect", *common, "--bad", history.upstream[-1]]) == 0
    title = capsys.readouterr().out
    assert f"after {history.upstream[19][:12]} (good: the last green sync {run_id}; bad" in title


def test_search_alone_is_logarithmic_for_every_culprit_position() -> None:
    for n in (1, 2, 3, 5, 8, 100, 1000):
        for k in sorted({0, 1, n // 3, n // 2, n - 2, n - 1} - {-1}):
            if not 0 <= k < n:
                continue
            calls: list[int] = []

            def evaluate(sha: str, k: int = k, calls: list[int] = calls) -> Step:
                calls.append(int(sha))
                return Step(upstream_sha=sha, subject="", verdict="bad" if int(sha) >= k else "good", reason="")

            status, _steps, index = search([str(i) for i in range(n)], evaluate)
            assert (status, index) == ("found", k)
            assert len(calls) <= math.ceil(math.log2(n)) + 1 if n > 1 else len(calls) == 1
            status, _steps, _ = search([str(i) for i in range(n)], evaluate, good=str(-1))
            assert status == "found" and len(calls) <= 2 * (math.ceil(math.log2(n)) + 2)


def test_generated_history_is_real_git(tmp_path: Path) -> None:
    history = make_history(tmp_path, 5, {})
    log = subprocess.run(
        ["git", "log", "--first-parent", "--format=%s", "main"],
        cwd=history.root,
        capture_output=True,
        text=True,
        check=True,
    )
    assert log.stdout.splitlines()[0] == "upstream change 4 (#1004)"


def test_patchset_filter_bisects_one_feature(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = make_history(tmp_path, 16, {5: BREAK_PATCH, 11: BREAK_INVARIANT})
    common = ["--repo", str(history.root), "--branch", "fork", "--profile", str(tmp_path / "profile")]
    common += ["--state-dir", str(tmp_path / "state"), "--good", history.base, "--bad", history.upstream[-1], "--json"]
    assert main(["bisect", *common, "--patchset", "hooks-used"]) == 0
    only_hooks = json.loads(capsys.readouterr().out)["data"]
    assert only_hooks["first_bad"]["upstream_sha"] == history.upstream[11]
    assert (only_hooks["good_from"], only_hooks["bad_from"]) == (
        f"--good {history.base}",
        f"--bad {history.upstream[-1]}",
    )
    assert main(["bisect", *common]) == 0
    everything = json.loads(capsys.readouterr().out)["data"]
    assert everything["first_bad"]["upstream_sha"] == history.upstream[5]
    assert main(["bisect", *common, "--patchset", "no-such"]) == 2
    assert "no patch-set no-such" in json.loads(capsys.readouterr().out)["error"]["message"]


def test_a_conflict_in_a_file_no_check_reads_is_evaluated_in_the_index(tmp_path: Path) -> None:
    history = make_history(tmp_path, 64, {31: CONFLICT_ELSEWHERE, 45: BREAK_INVARIANT})
    result = run(history)
    assert result.first_bad is not None and result.first_bad.upstream_sha == history.upstream[45]
    assert all(s.mode == "tree" and s.verdict != "skip" for s in result.steps)
    later = [s for s in result.steps if s.upstream_sha in history.upstream[31:]]
    assert later and all("1 conflicts in files the checks do not read" in s.reason for s in later)
    assert result.evaluations <= bound(64)


def test_a_fork_broken_at_good_has_no_upstream_culprit(tmp_path: Path) -> None:
    """The fork itself lost the hook: every candidate is bad, and blaming the first one would be wrong."""
    history = make_history(tmp_path, 32, {})
    fork = RepoBuilder(history.root)
    fork.checkout("fork")
    fork.commit({"vllm/hooks.py": HOOKS.replace("def on_load():", "def on_start():")}, "fork drops the hook")
    fork.checkout("main")
    result = run(history)
    assert result.status == "good-fails" and result.first_bad is None and result.evaluations == 2
    assert [s.verdict for s in result.steps] == ["bad", "bad"]
    assert "no upstream culprit" in result.culprit_line()


def test_a_failed_nightly_names_the_culprit_in_its_record_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = make_history(tmp_path, 30, {20: BREAK_INVARIANT})
    git.Repo(history.root).git.remote("add", "upstream", str(history.root))
    config = {
        "upstream": {"remote": "upstream", "ref": "main"},
        "fork": {"branch": "fork"},
        "profile": str(tmp_path / "profile"),
        "state_dir": str(tmp_path / "state"),
        "nightly": {"bisect_on_failure": True},
    }
    (history.root / "ds4sync.yaml").write_text(yaml.safe_dump(config))
    code = main(["nightly", "--repo", str(history.root)])
    captured = capsys.readouterr()
    assert code == 4, captured.err  # replay stops: the metadata-only patch-set needs adapting by a person
    (record_path,) = (tmp_path / "state" / "runs").glob("*/record.json")
    record = json.loads(record_path.read_text())
    assert record["status"] == "needs-person" and record["phases"]["replay"]["status"] == "needs-person"
    (note,) = [n for n in record["notes"] if n.startswith("bisect:")]
    assert history.upstream[20][:12] in note and "#1020" in note and "on-load-hook" in note
    assert note in (record_path.parent / "report.md").read_text()
    assert "#1020" in captured.out + captured.err
    # the report phase never ran, yet a report is there: status names it and says what it is
    assert record["phases"].get("report", {}).get("status", "pending") == "pending"
    assert main(["status", "--repo", str(history.root)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    report = record_path.parent / "report.md"
    assert f"report: {report} (of the run as it stopped; the report phase has not run)" in text
