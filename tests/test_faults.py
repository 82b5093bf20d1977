"""Kill -9 at every phase boundary and inside every phase, then resume or abort: nothing proven is lost.

Each case copies one generated fork (:mod:`tests.faultrepo`), runs the real CLI in a child
process with ``DS4SYNC_FAULT=<point>`` (the process SIGKILLs itself there, see
:mod:`ds4sync.core.fault`), then recovers with ``resume`` (and ``promote``) or ``abort`` and
checks, with real git:

- the promoted commit is the commit (and tree) every gate ran on, and verify's;
- every blocking invariant holds on it, and each reapplied patch-set has exactly one commit,
  carrying exactly its own files (a kill between ``git apply`` and the commit loses nothing
  and folds nothing into the next patch-set);
- no child process group of the killed attempt is alive (gate children started in the killed
  attempt run on for an hour unless stopped);
- the fork branch and the person's checkout are byte-identical, except for the fork branch
  moving to the proven commit when promote ran.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from ds4sync.cli import main
from ds4sync.core.children import start_ticks
from ds4sync.core.git import GitRepo
from ds4sync.core.proc import group_members
from ds4sync.patchsets.check import check_tree
from ds4sync.patchsets.model import load_catalogue
from ds4sync.patchsets.tree import CommitTree
from tests import faultrepo, procs

pytestmark = pytest.mark.slow

# Reached while `ds4sync merge` runs (it stops after the semantic check).
MERGE_POINTS = [
    *(
        f"phase.{p}.{w}"
        for p in ("prepare", "merge", "resolve", "commit", "replay", "verify", "semantic")
        for w in ("before", "after")
    ),
    "merge.after-git-merge",
    "commit.after-rerere",
    "commit.after-commit",  # the merge commit exists, the record does not know it yet
    "replay.applied.alpha",  # applied with --3way, not committed
    "replay.committed.alpha",
    "replay.applied.beta",
    "replay.committed.beta",
    "atomic-write.before-replace@3",  # inside an atomic record write (the first write of the `current` pointer)
    "atomic-write.before-replace@9",
    "commit.inside-index-lock",  # `git commit` killed holding index.lock (the lock is left, nobody holds it)
    "git.merge-commit.committed",  # git killed inside `git commit`: HEAD moved, MERGE_HEAD not yet removed
]
# Reached while `ds4sync resume` runs build, gate and report.
RESUME_POINTS = [
    *(f"phase.{p}.{w}" for p in ("build", "gate", "report") for w in ("before", "after")),
    "gate.child-started.children",  # a command gate's child (and its grandchild) running
    "gate.child-started.unit-tests",  # pytest running
    "atomic-write.before-replace@4",
]
PROMOTE_POINTS = ["promote.after-rollback-ref", "promote.after-update-ref"]
ABORT_AFTER = [
    "phase.prepare.after",
    "merge.after-git-merge",
    "commit.after-commit",
    "replay.applied.alpha",
    "replay.applied.beta",
    "gate.child-started.children",
    "gate.child-started.unit-tests",
    "phase.report.after",
]
ABORT_POINTS = [
    "abort.after-stop-children",
    "worktree-remove.moved-aside",  # inside the worktree removal: the folder moved aside, git's entry still there
    "worktree-remove.entry-removed",
    "abort.after-worktree-remove",
]
# Inside promote's move of a checkout that has the fork branch checked out (ds4sync.loop.forkmove).
CHECKOUT_POINTS = ["promote.after-detach", "promote.after-branch-move", "promote.after-attach"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> faultrepo.Scenario:
    return faultrepo.build(tmp_path_factory.mktemp("fault-template") / "s")


@pytest.fixture
def scenario(template: faultrepo.Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> faultrepo.Scenario:
    monkeypatch.delenv("DS4SYNC_FAULT", raising=False)
    return faultrepo.copy(template, tmp_path / "s")


def _ok(*args: str) -> None:
    assert main(list(args)) == 0


def kill_at(s: faultrepo.Scenario, point: str) -> None:
    """Drive the run to ``point`` and have the CLI process SIGKILL itself there."""
    repo = str(s.repo)
    if point in MERGE_POINTS:
        proc = s.cli("merge", "upstream/main", fault=point)
    elif point in RESUME_POINTS:
        _ok("merge", "upstream/main", "--repo", repo)
        proc = s.cli("resume", fault=point)
    else:
        _ok("merge", "upstream/main", "--repo", repo)
        _ok("resume", "--repo", repo)
        proc = s.cli("promote", fault=point)
    assert proc.returncode == -signal.SIGKILL, f"{point} was never reached: {proc.stderr[-2000:]}"


def _record(s: faultrepo.Scenario) -> dict:
    records = sorted(s.state.glob("runs/*/record.json"))
    assert len(records) == 1, records
    return json.loads(records[0].read_text())


def _children(s: faultrepo.Scenario) -> tuple[list[tuple[int, int | None]], list[procs.Identity]]:
    """Process groups the runs registered (pgid, the leader's start ticks), and the processes the gate children
    wrote down (pid and start ticks: this host reuses pids within minutes, see tests/procs.py)."""
    entries = [json.loads(path.read_text()) for path in s.state.glob("runs/*/children/*.json")]
    groups = [(e["pgid"], e.get("leader_start_ticks")) for e in entries]
    return groups, [i for path in s.pids.iterdir() for i in procs.identities(path.read_text())]


def _group_alive(group: tuple[int, int | None]) -> bool:
    """Members of that group run, and its id is not a later leader's pid (a live group's id is never reused)."""
    pgid, ticks = group
    leader = start_ticks(pgid)
    return bool(group_members(pgid)) and (leader is None or ticks is None or leader == ticks)


def _assert_no_children(groups: list[tuple[int, int | None]], pids: list[procs.Identity]) -> None:
    assert not [g for g in groups if _group_alive(g)], "a process group of the killed run is alive"
    assert not [p for p in pids if procs.alive(p)], "a gate child of the killed run is alive"


@pytest.mark.parametrize("point", [*MERGE_POINTS, *RESUME_POINTS, *PROMOTE_POINTS])
def test_kill_then_resume_promotes_exactly_what_the_gates_proved(scenario: faultrepo.Scenario, point: str) -> None:
    s, repo = scenario, str(scenario.repo)
    fork = GitRepo(s.repo)
    fork_before, checkout_before = fork.branch_head(faultrepo.BRANCH), faultrepo.checkout_digest(s.repo)
    kill_at(s, point)
    groups, pids = _children(s)
    if point.startswith("gate.child-started"):
        assert any(_group_alive(g) for g in groups), "the killed attempt should leave its gate child running"
    assert faultrepo.checkout_digest(s.repo) == checkout_before
    if point not in PROMOTE_POINTS:
        assert fork.branch_head(faultrepo.BRANCH) == fork_before
        for _ in range(3):
            if _record(s)["status"] == "done":
                break
            assert main(["resume", "--repo", repo]) == 0
        pids += _children(s)[1]
    _assert_no_children(groups, pids)
    if point in PROMOTE_POINTS:  # status reads git: a branch that already moved is not "to fast-forward"
        shown = s.cli("status").stdout
        moved = fork.branch_head(faultrepo.BRANCH) != fork_before
        assert moved == (point == "promote.after-update-ref")
        assert ("already is the proven commit" in shown) == moved and ("to fast-forward" in shown) != moved, shown
    _ok("promote", "--repo", repo)
    record = _record(s)
    promoted = fork.branch_head(faultrepo.BRANCH)
    assert record["status"] == "promoted" and record["results"]["promote"]["new_head"] == promoted
    # killed after the branch moved: this promote only recorded it, and says so
    assert record["results"]["promote"]["completed_after_kill"] == (point == "promote.after-update-ref")
    assert record["results"]["promote"]["old_head"] == fork_before
    tree = fork.out("rev-parse", "--verify", f"{promoted}^{{tree}}")
    gates = record["results"]["gates"]["unit"]["gates"]
    assert [g["name"] for g in gates] == ["children", "unit-tests"]
    assert {g["status"] for g in gates} <= {"passed", "cached"}
    assert {(g["commit"], g["tree"]) for g in gates} == {(promoted, tree)}
    assert record["results"]["verify"]["commit"] == promoted
    catalogue, patchsets = load_catalogue(s.profile / "patches")
    report = check_tree(CommitTree(fork, promoted), catalogue, patchsets, patches_dir=str(s.profile / "patches"))
    assert report.ok and not report.violations()
    merge_commit = record["results"]["merge"]["merge_commit"]
    parents = fork.out("rev-list", "--parents", "-n", "1", merge_commit).split()[1:]
    assert parents == [fork_before, record["upstream"]["sha"]], "exactly one merge, of the fork head and upstream"
    trailers = fork.out(
        "log", "--format=%H %(trailers:key=Patch-set,valueonly,separator=)", f"{merge_commit}..{promoted}"
    )
    by_ps = [line.split() for line in trailers.splitlines()]
    assert sorted(ps for _, ps in by_ps) == sorted(faultrepo.REAPPLIED), "one commit per reapplied patch-set"
    for sha, ps in by_ps:
        assert set(fork.changed_names(f"{sha}^", sha)) == faultrepo.REAPPLIED[ps]
    entries = {e["id"]: e["status"] for e in record["results"]["replay"]["entries"]}
    assert entries == {"fork-feature": "retained", "alpha": "reapplied", "beta": "reapplied"}
    assert faultrepo.checkout_digest(s.repo) == checkout_before
    assert (
        fork.is_ancestor(fork_before, promoted)
        and fork.out("rev-parse", f"refs/ds4sync/rollback/{record['run_id']}") == fork_before
    )


@pytest.mark.parametrize("point", [*ABORT_AFTER, *ABORT_POINTS])
def test_kill_then_abort_leaves_fork_and_checkout_as_they_were(scenario: faultrepo.Scenario, point: str) -> None:
    s, repo = scenario, str(scenario.repo)
    fork = GitRepo(s.repo)
    fork_before, checkout_before = fork.branch_head(faultrepo.BRANCH), faultrepo.checkout_digest(s.repo)
    if point in ABORT_POINTS:
        _ok("merge", "upstream/main", "--repo", repo)
        proc = s.cli("abort", fault=point)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
    else:
        kill_at(s, point)
    groups, pids = _children(s)
    _ok("abort", "--repo", repo)
    _assert_no_children(groups, pids)
    record = _record(s)
    assert record["status"] == "aborted"
    assert fork.branch_head(faultrepo.BRANCH) == fork_before
    assert faultrepo.checkout_digest(s.repo) == checkout_before
    assert not Path(record["worktree"]).exists()
    assert not fork.ref_exists(f"refs/heads/{record['sync_branch']}")
    assert main(["promote", "--repo", repo]) == 2


def _git(repo: Path, *args: str) -> str:
    return GitRepo(repo).out(*args)


def _consistent(repo: Path) -> None:
    """What git says of the person's checkout: nothing staged, nothing changed (a detached HEAD is fine)."""
    assert _git(repo, "status", "--porcelain", "--untracked-files=no") == "", _git(repo, "status")


@pytest.mark.parametrize("then", ["promote", "abort"])
@pytest.mark.parametrize("point", [*CHECKOUT_POINTS, "promote.after-update-ref"])
def test_kill_inside_the_checkout_move_leaves_git_clean_and_the_next_command_recovers(
    scenario: faultrepo.Scenario, point: str, then: str
) -> None:
    """The person has the fork branch checked out; promote is killed while moving it and that checkout.

    Every kill leaves a checkout git calls clean (the old head, or the new one detached); the next
    `promote` finishes the move, or the next `abort` undoes a move whose branch had not moved yet, and
    refuses (naming the promote) once the branch holds the promoted commit: never "untouched"."""
    s, repo = scenario, str(scenario.repo)
    s.fork.checkout(faultrepo.BRANCH)
    fork_before = GitRepo(s.repo).branch_head(faultrepo.BRANCH)
    _ok("merge", "upstream/main", "--repo", repo)
    _ok("resume", "--repo", repo)
    proven = _record(s)["results"]["gates"]["unit"]["head"]
    proc = s.cli("promote", fault=point)
    assert proc.returncode == -signal.SIGKILL, f"{point} was never reached: {proc.stderr[-2000:]}"
    _consistent(s.repo)
    moved = point != "promote.after-detach"
    assert GitRepo(s.repo).branch_head(faultrepo.BRANCH) == (proven if moved else fork_before)
    done = s.cli(then, *(["--yes"] if then == "abort" else []))  # abort: the run is done, unpromoted
    if then == "promote" or not moved:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 2 and "is promoted, not untouched" in done.stderr, done.stderr
        assert "untouched;" not in done.stdout
    head = proven if moved or then == "promote" else fork_before
    assert GitRepo(s.repo).branch_head(faultrepo.BRANCH) == head
    assert _git(s.repo, "symbolic-ref", "HEAD") == f"refs/heads/{faultrepo.BRANCH}"
    _consistent(s.repo)
    assert _git(s.repo, "rev-parse", "HEAD^{tree}") == _git(s.repo, "rev-parse", f"{head}^{{tree}}")
    assert not (s.state / "promote-journal.json").exists()
    record = _record(s)
    if then == "promote":
        assert record["results"]["promote"]["new_head"] == proven
        assert record["results"]["promote"]["completed_after_kill"] == moved
    elif moved:
        assert record["status"] == "done" and main(["promote", "--repo", repo]) == 0
        assert _record(s)["results"]["promote"]["completed_after_kill"] is True
    else:
        assert record["status"] == "aborted"


def test_at_least_thirty_kill_points() -> None:
    assert len({*MERGE_POINTS, *RESUME_POINTS, *PROMOTE_POINTS, *ABORT_POINTS, *CHECKOUT_POINTS}) >= 30
