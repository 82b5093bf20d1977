"""``ds4sync bisect`` on generated histories with one planted breaking upstream commit of each kind."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.loop.bisect import BisectResult, bisect, search
from ds4sync.loop.bisect import BisectStep as Step
from ds4sync.runner import Workspace, open_workspace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from history import fast_import

SCHED = "".join(f"LINE_{i} = {i}\n" for i in range(30))
BASE = {
    "vllm/hooks.py": "def on_load():\n    return 'loaded'\n",
    "vllm/sched.py": SCHED,
    "vllm/version.py": "VERSION = 1\n",
    "vllm/envs.py": "A = 1\nB = 2\nC = 3\n",
}
TWEAKED = SCHED.replace("LINE_15 = 15\n", "LINE_15 = 15\nSCHED_TWEAK = True\n")

# What each kind of planted upstream commit changes.
BREAK_INVARIANT = {"vllm/hooks.py": "def on_startup():\n    return 'loaded'\n"}
BREAK_PATCH = {"vllm/sched.py": SCHED.replace("LINE_14 = 14\nLINE_15 = 15\nLINE_16 = 16\n", "LINES_14_TO_16 = ()\n")}
BREAK_GATE = {"vllm/version.py": "VERSION = 5\n"}
CONFLICT = {"vllm/envs.py": "A = 1\nB = 'upstream'\nC = 3\n"}
RESTORE = {"vllm/envs.py": "A = 1\nB = 2\nC = 3\n"}


@dataclass
class History:
    """A fork repository with upstream's first-parent line on ``main`` and the fork on ``fork``."""

    root: Path
    base: str
    upstream: list[str]  # the N upstream commits after base, oldest first

    def workspace(self, *, rules: list[dict] | None = None) -> Workspace:
        config = self.root / "ds4sync.yaml"
        config.write_text(yaml.safe_dump({"merge": {"rules": rules or []}}))
        return open_workspace(
            self.root,
            config_path=config,
            branch="fork",
            profile=self.root.parent / "profile",
            state_dir=self.root.parent / "state",
        )


def _patchset(folder: Path, data: dict, patch: str | None = None) -> None:
    folder.mkdir(parents=True)
    if patch is not None:
        (folder / "0001.patch").write_text(patch)
        data = {**data, "patches": ["0001.patch"]}
    (folder / "patchset.yaml").write_text(yaml.safe_dump(data))


def _profile(root: Path, base_repo: RepoBuilder) -> None:
    patches = root / "patches"
    _patchset(
        patches / "hooks-used",
        {
            "id": "hooks-used",
            "title": "the fork's loader calls upstream's on_load hook",
            "kind": "fork-feature",
            "invariants": [
                {"id": "on-load-hook", "kind": "contains", "files": "vllm/hooks.py", "pattern": r"^def on_load\("}
            ],
        },
    )
    (base_repo.path / "vllm/sched.py").write_text(TWEAKED)
    diff = base_repo.repo.git.diff("--", "vllm/sched.py") + "\n"
    base_repo.repo.git.checkout("--", "vllm/sched.py")
    _patchset(
        patches / "sched-tweak",
        {
            "id": "sched-tweak",
            "title": "a carry patch replayed on every sync",
            "kind": "fork-feature",
            "invariants": [
                {
                    "id": "sched-tweak-flag",
                    "kind": "contains",
                    "files": "vllm/sched.py",
                    "pattern": "^SCHED_TWEAK = True$",
                }
            ],
        },
        patch=diff,
    )
    (root / "gates").mkdir()
    check = "import runpy, sys; v = runpy.run_path('vllm/version.py')['VERSION']; sys.exit(0 if v < 5 else 1)"
    (root / "gates" / "unit.yaml").write_text(
        yaml.safe_dump(
            {
                "tier": "unit",
                "gates": [{"name": "version-check", "kind": "command", "run": {"argv": ["{python}", "-c", check]}}],
            }
        )
    )


def make_history(tmp_path: Path, n: int, planted: dict[int, dict]) -> History:
    """Base, then ``n`` upstream commits on main (``planted[i]`` added to the i-th); the fork edits envs.py."""
    repo = RepoBuilder(tmp_path / "fork")
    base = repo.commit(BASE, "base")
    _profile(tmp_path / "profile", repo)
    commits = [
        (f"upstream change {i} (#{1000 + i})", {f"log/{i:04}.txt": f"{i}\n", **planted.get(i, {})}) for i in range(n)
    ]
    upstream = fast_import(repo.path, branch="main", parent=base, commits=commits) if n else []
    repo.repo.git.reset("-q", "--hard", "main")
    repo.branch("fork", base)
    repo.commit(
        {"vllm/envs.py": "A = 1\nB = 'fork'\nC = 3\n", "vllm/fork_feature.py": "ENABLED = True\n"}, "fork feature"
    )
    repo.checkout("main")
    return History(repo.path, base, upstream)


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
    for step in result.steps:
        assert step.verdict == ("bad" if history.upstream.index(step.upstream_sha) >= k else "good")


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
    assert "vllm/envs.py" in skipped[0].reason and skipped[0].mode == "worktree"
    assert result.evaluations <= bound(64) + len(skipped)


def test_skips_next_to_the_culprit_make_it_ambiguous_not_wrong(tmp_path: Path) -> None:
    history = make_history(tmp_path, 64, {31: {**CONFLICT, **BREAK_INVARIANT}, 32: RESTORE})
    result = run(history)
    assert result.status == "ambiguous" and result.first_bad is None
    assert result.suspects == (history.upstream[31], history.upstream[32])
    assert "skipped" in result.culprit_line()


def test_a_rule_settles_the_conflict_in_a_worktree_step(tmp_path: Path) -> None:
    history = make_history(tmp_path, 64, {31: CONFLICT, 32: RESTORE, 45: BREAK_INVARIANT})
    result = run(history, rules=[{"glob": "vllm/envs.py", "strategy": "ours"}])
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
    code = main(["sync", *common, "--to-green", history.upstream[-1]])
    captured = capsys.readouterr()
    assert code in (0, 4), captured.err
    record = json.loads(next((tmp_path / "state" / "runs").glob("*/record.json")).read_text())
    assert record["upstream"]["sha"] == history.upstream[19]
    assert any(history.upstream[20][:12] in note and "#1020" in note for note in record["notes"])


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
