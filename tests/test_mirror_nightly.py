"""benchmarks/mirror_nightly.py: a clone of a mirror that lacks some blobs still checks out, with real ids; the pair
picked exercises the store; the store prepared from a person's rebase replays it byte for byte; a semantic break is
fixed as the person's result has the path; a static failure on a file the merge left alone was there before."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from ds4sync.core.git import GitRepo
from ds4sync.core.record import ForkRef, UpstreamRef
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.models.gates_results import GateResult, TestFailure, TierResult
from ds4sync.models.record import RecordStore, RunRecord

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "mirror_nightly.py"


def _script():
    spec = importlib.util.spec_from_file_location("mirror_nightly_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def test_blobs_a_mirror_lacks_are_stood_in_for_and_named(builder: RepoBuilder, tmp_path: Path) -> None:
    builder.commit({"src/a.py": "A = 1\n", "docs/big.html": "<html>big</html>\n"}, "base")
    head = builder.head()
    tree = _git("rev-parse", f"{head}^{{tree}}", cwd=builder.path).stdout.strip()
    blob = _git("rev-parse", f"{head}:docs/big.html", cwd=builder.path).stdout.strip()
    clone = tmp_path / "clone"
    cloned = _git("clone", "-q", "--no-local", "--no-checkout", str(builder.path), str(clone), cwd=tmp_path)
    assert cloned.returncode == 0
    _git("repack", "-a", "-d", "-q", cwd=clone)
    # Drop the blob from the clone, as the public mirror lacks its largest files.
    pack = next((clone / ".git" / "objects" / "pack").glob("*.pack"))
    kept = _git("rev-list", "--objects", "--all", cwd=clone).stdout.split("\n")
    wanted = "\n".join(line.split()[0] for line in kept if line and not line.startswith(blob)) + "\n"
    subprocess.run(["git", "pack-objects", "-q", str(pack.parent / "pack")], cwd=clone, input=wanted, text=True)
    for old in pack.parent.glob(f"{pack.stem}.*"):
        old.unlink()
    assert _git("worktree", "add", "-q", str(tmp_path / "before"), head, cwd=clone).returncode != 0
    missing = _script()._stand_in_for_missing_blobs(clone, (head,))
    assert missing == ["docs/big.html"]
    assert _git("worktree", "add", "-q", "--detach", str(tmp_path / "wt"), head, cwd=clone).returncode == 0
    assert (tmp_path / "wt" / "src" / "a.py").read_text() == "A = 1\n"
    # The ids stay git's own: the checkout's index writes the commit's own tree.
    assert _git("write-tree", cwd=tmp_path / "wt").stdout.strip() == tree


def _history(builder: RepoBuilder) -> None:
    """A fork that rebased: ``backup/feat`` on the old base, ``feat`` the person's result on the newer one (two
    content conflicts and a modify/delete, each resolved by the person); then ``old-clean`` -> ``clean``, a newer
    rebase that merges cleanly."""
    lines = "".join(f"x{i} = {i}\n" for i in range(8))
    builder.commit(
        {"a.py": f"A = 1\n{lines}", "b.py": f"B = 1\n{lines}", "c.py": "C = 1\n", "z.py": "Z = 1\n"},
        "base",
        date="2026-01-01T00:00:00",
    )
    base = builder.head()
    builder.branch("backup/feat", base)
    builder.commit({"a.py": f"A = 'fork'\n{lines}"}, "feat: a", date="2026-01-02T00:00:00")
    builder.commit({"b.py": f"B = 'fork'\n{lines}"}, "feat: b", date="2026-01-02T00:01:00")
    builder.commit({"c.py": "C = 'fork'\n"}, "feat: c", date="2026-01-02T00:02:00")
    builder.checkout("main")
    builder.commit(
        {"a.py": f"A = 'up'\n{lines}", "b.py": f"B = 'up'\n{lines}", "c.py": None},
        "upstream: a, b, drop c",
        date="2026-01-03T00:00:00",
    )
    builder.branch("feat")
    builder.commit({"a.py": f"A = ('fork', 'up')\n{lines}"}, "feat: a", date="2026-01-03T00:01:00")
    builder.commit({"b.py": f"B = 'fork'  # was 'up'\n{lines}"}, "feat: b", date="2026-01-03T00:02:00")
    builder.commit({"c.py": "C = 'fork'\n"}, "feat: c", date="2026-01-03T00:03:00")
    builder.branch("old-clean", "main")
    builder.commit({"y.py": "Y = 1\n"}, "side: y", date="2026-01-04T00:00:00")
    builder.checkout("main")
    builder.commit({"z.py": "Z = 2\n"}, "upstream: z", date="2026-01-05T00:00:00")
    builder.branch("clean")
    builder.commit({"y.py": "Y = 1\n"}, "side: y", date="2026-01-06T00:00:00")
    builder.checkout("main")


def test_pick_pair_prefers_a_pair_whose_merge_conflicts(builder: RepoBuilder) -> None:
    _history(builder)
    script = _script()
    repo = GitRepo(builder.path)
    pairs = script.find_real_syncs(repo, upstream="main")
    assert [(s.before, s.after) for s in pairs] == [("backup/feat", "feat"), ("old-clean", "clean")]
    # The newest pair merges cleanly: the store would replay nothing, so the older one with conflicts wins.
    picked = script.pick_pair(repo, pairs, branch=None, conflicts=(1, 30))
    assert picked is not None and (picked[0].before, picked[1]) == ("backup/feat", 3)
    # None in the range: the newest that conflicts at all, never the clean one.
    picked = script.pick_pair(repo, pairs, branch=None, conflicts=(5, 30))
    assert picked is not None and (picked[0].before, picked[1]) == ("backup/feat", 3)
    # A named branch is taken as asked, with its prediction.
    picked = script.pick_pair(repo, pairs, branch="old-clean")
    assert picked is not None and (picked[0].before, picked[1]) == ("old-clean", 0)
    assert script.pick_pair(repo, pairs, branch="no-such-branch") is None
    assert script.pick_pair(repo, [], branch=None) is None


def test_the_store_prepared_from_the_persons_result_replays_it_byte_for_byte(
    builder: RepoBuilder, tmp_path: Path
) -> None:
    _history(builder)
    script = _script()
    sync = next(s for s in script.find_real_syncs(GitRepo(builder.path), upstream="main") if s.before == "backup/feat")
    profile = tmp_path / "profile"
    (profile / "patches").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    log: list[str] = []
    prep = script.prepare_store(str(builder.path), work, sync, sync.new_base, profile, log)
    # rerere records content conflicts; the modify/delete has no preimage, so no entry, and it is named.
    assert (prep.conflicts, prep.entries, prep.not_stored) == (3, 2, (("c.py", "modify/delete"),)), log
    # The nightly's merge in a fresh clone: the same conflicts, replayed from the store.
    fork = script._clone(str(builder.path), work / "fork")
    script._check_out(fork, sync.before)
    config = script._config(
        work / "night.yaml", branch=sync.before, to=sync.new_base, profile=profile, build=False, budget_s=None
    )
    code = script._ds4sync(
        "merge", sync.new_base, "--branch", sync.before, "--repo", str(fork.path), "--config", str(config), log=log
    )
    assert code == 4, log  # the modify/delete still needs a person
    runs = RecordStore(fork.path / ".git" / "ds4sync")
    record = runs.load(runs.run_ids()[-1])
    replay = script.store_replay(fork, record, sync.after_head)
    assert replay is not None
    assert (replay.conflicts, replay.replayed, replay.left) == (3, ("a.py", "b.py"), (("c.py", "modify/delete"),))
    assert (replay.identical, replay.differing) == (("a.py", "b.py"), ())
    worktree = Path(record.worktree)
    for path in ("a.py", "b.py"):
        assert (worktree / path).read_text() == builder.read(path, sync.after_head)
    lines = script.store_lines(3, prep, replay)
    assert lines[1:] == [
        "- resolution store: 2 entries recorded from the person's result (3 conflicted paths taken from it; "
        "no entry for c.py (modify/delete))",
        "- nightly merge: 3 conflicted paths, 2 replayed from the store, 1 left for a person (c.py (modify/delete))",
        "- replayed files byte-identical to the person's result: 2 of 2",
    ]


def test_a_semantic_break_is_fixed_as_the_persons_result_has_the_path(builder: RepoBuilder, tmp_path: Path) -> None:
    # The fork adds a test of a helper upstream then removes; the person's rebase dropped that test.
    builder.commit(
        {"pkg/__init__.py": "", "pkg/mod.py": "def helper():\n    return 1\n\n\ndef other():\n    return 2\n"},
        "base",
        date="2026-01-01T00:00:00",
    )
    base = builder.head()
    builder.branch("backup/feat", base)
    test = "from pkg.mod import helper\n\n\ndef test_helper():\n    assert helper() == 1\n"
    for n, files in enumerate(({"b.py": "B = 1\n"}, {"c.py": "C = 1\n"}, {"d.py": "D = 1\n"})):
        builder.commit(files, f"feat: {n}", date=f"2026-01-02T00:0{n}:00")
    builder.commit({"tests/test_helper.py": test}, "feat: test helper", date="2026-01-02T00:05:00")
    builder.checkout("main")
    builder.commit({"pkg/mod.py": "def other():\n    return 2\n"}, "upstream: drop helper", date="2026-01-03T00:00:00")
    builder.branch("feat")
    for n, files in enumerate(({"b.py": "B = 1\n"}, {"c.py": "C = 1\n"}, {"d.py": "D = 1\n"})):
        builder.commit(files, f"feat: {n}", date=f"2026-01-03T00:0{n + 1}:00")
    builder.checkout("main")
    script = _script()
    sync = next(s for s in script.find_real_syncs(GitRepo(builder.path), upstream="main") if s.before == "backup/feat")
    profile = tmp_path / "profile"
    (profile / "patches").mkdir(parents=True)
    work = tmp_path / "work"
    fork = script._clone(str(builder.path), work / "fork")
    script._check_out(fork, sync.before)
    config = script._config(
        work / "night.yaml", branch=sync.before, to=sync.new_base, profile=profile, build=False, budget_s=None
    )
    log: list[str] = []
    script._ds4sync(
        "merge", sync.new_base, "--branch", sync.before, "--repo", str(fork.path), "--config", str(config), log=log
    )
    runs = RecordStore(fork.path / ".git" / "ds4sync")
    record = runs.load(runs.run_ids()[-1])
    assert record.phase("semantic").status == "failed", log
    # A result that has the path as the merge does (here the fork head's) holds the same break: nothing to take.
    head = GitRepo(Path(record.worktree)).head()
    assert script.fix_as_person(record, sync.before_head, log) == ()
    assert GitRepo(Path(record.worktree)).head() == head
    assert script.fix_as_person(record, sync.after_head, log) == ("tests/test_helper.py",)
    script.resume_within(fork.path, config, None, log)
    record = runs.load(record.run_id)
    assert record.phase("semantic").status == "done", log
    assert not (Path(record.worktree) / "tests" / "test_helper.py").exists()


@pytest.mark.parametrize("check", ["ruff-format", "ruff-check", "diff-check"])
def test_a_static_failure_on_a_file_the_merge_left_alone_was_there_before(
    builder: RepoBuilder, tmp_path: Path, check: str
) -> None:
    builder.commit({"a.py": "x=1\n", "b.py": "y=2\n", "c.py": "z = 3\n"}, "fork head")
    fork_head = builder.head()
    builder.commit({"b.py": "y=3\n", "d.py": "w=4\n"}, "merged")
    merged = builder.head()
    # ruff-format names files; ruff-check and diff-check name path:line(:col).
    where = {"ruff-format": "{}", "ruff-check": "{}:1:2", "diff-check": "{}:1"}[check]
    failures = tuple(TestFailure(node_id=where.format(p), message="x") for p in ("a.py", "a.py", "b.py", "d.py"))

    def gate(name: str, status: str) -> GateResult:
        return GateResult(name=name, tier="static", kind="static", status=status, failures=failures, commit=merged)

    gates = (gate(check, "failed"), gate("pip-check", "failed"), gate("other", "passed"))
    record = RunRecord(
        run_id="r",
        repo=str(builder.path),
        state_dir=str(tmp_path),
        upstream=UpstreamRef(remote="upstream", ref="main", sha=merged),
        fork=ForkRef(branch="main", head_before=fork_head),
        sync_branch="sync",
        worktree=str(builder.path),
        backup_ref="refs/backup",
    )
    record.results.gates["static"] = TierResult(
        tier="static", repo=str(builder.path), started_at="2026-01-01T00:00:00", duration_s=1.0, gates=gates
    )
    assert _script().failing_before(GitRepo(builder.path), record) == [
        f"- {check} (static): 1 of 3 failing files are byte-identical on the fork head before the merge "
        "(already failing there); changed by the merge: b.py, d.py"
    ]
