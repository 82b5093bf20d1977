"""Find the upstream commit that broke the fork: bisect over upstream's first-parent history.

A step asks one question of one upstream commit U: *does the fork still hold after merging U?*
It merges U into the fork head with the recorded resolutions and the path rules, replays the
patch-sets whose invariants no longer hold, verifies every blocking invariant and, when asked,
runs a gate tier on the result. A step that cannot be evaluated (a conflict that no recorded
resolution or rule covers) is skipped, the way ``git bisect skip`` does.

Fast by construction: without a gate tier a step needs no work tree. ``git merge-tree
--write-tree`` gives the merged tree, the patch-sets are applied to it in a temporary index
(``git apply --cached``), and the invariants are read from the objects. Only a step with
conflicts the rules cannot settle in the index, or with a gate tier, uses a detached worktree
under the state folder. Results are cached per (upstream commit, fork head, profile digest, tier),
so a second bisect of the same range costs no evaluation.

Search: the first-parent commits after ``good`` up to ``bad`` are candidates; ``bad`` is
evaluated first (a "bad" that holds ends the search), then the range is halved. Finding the
culprit among N candidates costs at most ``ceil(log2 N) + 1`` evaluations without skips.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from ds4sync.core.errors import Ds4syncError, GitError, StateError
from ds4sync.core.files import write_json_atomic
from ds4sync.core.git import GitRepo
from ds4sync.core.model import FrozenModel, updated
from ds4sync.core.record import now_iso
from ds4sync.models.patchsets_results import CheckReport
from ds4sync.patchsets.check import check_tree, drop_evidence
from ds4sync.patchsets.model import Catalogue, PatchSet, load_catalogue
from ds4sync.patchsets.tree import CommitTree, Tree, read_many
from ds4sync.runner import Workspace, update_run

SCHEMA_VERSION = 1
_PR_RE = re.compile(r"\(#(\d+)\)\s*$")
Verdict = Literal["good", "bad", "skip"]
Status = Literal["found", "ambiguous", "bad-holds", "good-fails", "empty"]
Progress = Callable[[str], None]


class BisectStep(FrozenModel):
    """One evaluated upstream commit.

    ``verdict``: good (the fork holds after merging it), bad (``failed`` names what broke:
    invariant ids, ``patch-set:<id>`` or ``gate:<name>``), skip (it could not be evaluated).
    ``mode``: ``tree`` (merge-tree and a temporary index, no work tree) or ``worktree``.
    ``seconds``: wall time of the evaluation (0 when ``cached``).
    """

    upstream_sha: str
    subject: str
    pr: int | None = None
    verdict: Verdict
    reason: str
    failed: tuple[str, ...] = ()
    mode: Literal["tree", "worktree"] = "tree"
    cached: bool = False
    seconds: float = 0.0


class BisectResult(FrozenModel):
    """What a bisect found.

    ``status``: found (``first_bad`` is the culprit, ``last_good`` the commit before it, or
    ``good`` itself); ambiguous (skipped steps hide it: ``suspects`` lists the candidates, oldest
    first); bad-holds (the ``bad`` commit itself holds: nothing to find); good-fails (the fork does
    not hold at ``good`` either: the break is the fork's own, or older than ``good``); empty (no
    commit between ``good`` and ``bad``). ``evaluations`` counts the steps evaluated (cached ones included);
    ``bound`` is ``ceil(log2 candidates) + 2``. ``good_from``/``bad_from`` say where each end came
    from (``--good``, the last green sync, the merge-base; ``--bad``, ``upstream.ref``).
    """

    schema_version: int = SCHEMA_VERSION
    status: Status
    fork_branch: str
    fork_head: str
    good: str
    bad: str
    candidates: int
    good_from: str = ""
    bad_from: str = ""
    tier: str | None = None
    first_bad: BisectStep | None = None
    last_good: str | None = None
    suspects: tuple[str, ...] = ()
    steps: tuple[BisectStep, ...] = ()
    evaluations: int = 0
    bound: int = 0
    started_at: str = ""
    seconds: float = 0.0

    def __bool__(self) -> bool:
        return self.status == "found"

    def culprit_line(self) -> str:
        """One line naming the culprit and what broke, e.g. for a nightly report."""
        if self.first_bad is None:
            return {
                "bad-holds": f"{self.bad[:12]} holds: nothing to bisect",
                "good-fails": f"the fork does not hold at good {self.good[:12]} either: no upstream culprit after it",
                "empty": "no upstream commit between good and bad",
                "ambiguous": f"the first bad commit is one of {len(self.suspects)} skipped commits",
            }.get(self.status, self.status)
        step = self.first_bad
        pr = f" (#{step.pr})" if step.pr else ""
        return f"first bad upstream commit {step.upstream_sha[:12]}{pr} {step.subject!r}: {step.reason}"


@dataclass
class _Cache:
    """Step results on disk, one JSON file per (upstream commit, fork head, profile digest, tier)."""

    root: Path
    salt: str

    def _path(self, upstream_sha: str) -> Path:
        key = hashlib.sha256(f"{self.salt}\0{upstream_sha}".encode()).hexdigest()[:32]
        return self.root / f"{key}.json"

    def get(self, upstream_sha: str) -> BisectStep | None:
        path = self._path(upstream_sha)
        try:
            step = BisectStep.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, UnicodeDecodeError):
            return None  # a missing or damaged entry is evaluated again
        return updated(step, cached=True, seconds=0.0)

    def put(self, step: BisectStep) -> None:
        write_json_atomic(self._path(step.upstream_sha), step.model_dump(mode="json"))


@dataclass
class StepEvaluator:
    """Evaluates one upstream commit against a fixed fork head (see the module docstring).

    ``tier``: a gate tier to run on the merged (and replayed) tree; it needs a worktree.
    """

    ws: Workspace
    fork_sha: str
    tier: str | None = None
    only: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.repo = self.ws.repo
        self.catalogue, self.patchsets = _load_patchsets(self.ws, self.only)
        self.root = self.ws.store.root / "bisect"
        salt = f"{self.fork_sha}\0{self.tier}\0{','.join(self.only)}\0{self._profile_digest()}"
        self.cache = _Cache(self.root / "cache", salt=salt)
        self._worktree: GitRepo | None = None
        self._watch: set[str] = set()
        self._tainted = False

    def _profile_digest(self) -> str:
        """What a step's answer depends on besides the two commits: patch-sets, rules, the tier's gates."""
        digest = hashlib.sha256()
        folders = [self.ws.profile / "patches"] + ([self.ws.profile / "gates"] if self.tier else [])
        for folder in folders:
            for file in sorted(p for p in folder.rglob("*") if p.is_file() and "resolutions" not in p.parts):
                digest.update(str(file.relative_to(folder)).encode() + b"\0" + file.read_bytes())
        digest.update(json.dumps([r.model_dump(mode="json") for r in self.ws.config.merge.rules]).encode())
        store = self.ws.resolutions_dir
        digest.update(" ".join(sorted(p.name for p in store.iterdir()) if store.is_dir() else []).encode())
        return digest.hexdigest()

    def __call__(self, upstream_sha: str) -> BisectStep:
        cached = self.cache.get(upstream_sha)
        if cached is not None:
            return cached
        start = time.monotonic()
        subject = self.repo.subject(upstream_sha)
        match = _PR_RE.search(subject)
        verdict, reason, failed, mode = self._evaluate(upstream_sha)
        step = BisectStep(
            upstream_sha=upstream_sha,
            subject=subject,
            pr=int(match.group(1)) if match else None,
            verdict=verdict,
            reason=reason,
            failed=failed,
            mode=mode,
            seconds=round(time.monotonic() - start, 3),
        )
        self.cache.put(step)
        return step

    # -- one step ---------------------------------------------------------------------------
    def _evaluate(self, upstream_sha: str) -> tuple[Verdict, str, tuple[str, ...], Literal["tree", "worktree"]]:
        predicted = self.repo.merge_tree(self.fork_sha, upstream_sha)
        if self.tier is None:
            # With conflicts, the tree git wrote holds markers in the conflicted files only. Checks that read
            # none of those files (and patches that touch none) give the same answer however a person resolves
            # them, so the step stays in the index; otherwise it needs a real merge in a worktree.
            self._watch = {p for c in predicted.conflicts for p in (c.path, *c.related)}
            self._tainted = False
            merged = self.repo.commit_tree(
                predicted.tree, parents=(self.fork_sha, upstream_sha), message="ds4sync bisect step"
            )
            verdict, reason, failed, _ = self._replay_and_verify(merged, upstream_sha)
            self._watch = set()
            if not self._tainted:
                if predicted.conflicts:
                    reason += f" ({len(predicted.conflicts)} conflicts in files the checks do not read)"
                return verdict, reason, failed, "tree"
        try:
            return (*self._evaluate_in_worktree(upstream_sha), "worktree")
        except GitError as exc:  # a step git cannot carry out is one that cannot be evaluated
            return "skip", f"could not merge in a worktree: {exc.one_line()}", (), "worktree"

    def _replay_and_verify(self, merged: str, upstream_sha: str) -> tuple[Verdict, str, tuple[str, ...], str]:
        """Replay patch-sets whose invariants do not hold onto ``merged`` in an index, then verify.

        Returns the verdict, its reason, what failed and the commit the checks ran on.
        """
        landed = self._landed(upstream_sha)
        report = self._check(merged, landed)
        broken = [ps for ps in self.patchsets if _violated(report, ps.id)]
        tree = self.repo.tree_id(merged)
        for ps in broken:
            if not ps.patches:
                continue  # a metadata-only patch-set cannot be replayed: its invariants decide below
            if self._watch and self._watch & self.repo.patch_paths(ps.patch_files()):
                self._tainted = True
            applied = self.repo.apply_to_tree(tree, ps.patch_files())
            if applied is None:
                return "bad", f"patch-set {ps.id} no longer applies", (f"patch-set:{ps.id}",), merged
            tree = applied
        if broken:
            merged = self.repo.commit_tree(tree, parents=(merged,), message="ds4sync bisect replay")
            report = self._check(merged, landed)
        violations = report.violations()
        if violations:
            first = violations[0]
            ids = tuple(dict.fromkeys(v.invariant for v in violations))
            return "bad", f"invariant {first.invariant} of {first.patchset} violated: {first.detail}", ids, merged
        return "good", "every blocking invariant holds", (), merged

    def _check(self, commit: str, landed: set[str]) -> CheckReport:
        tree: Tree = CommitTree(self.repo, commit)
        if self._watch:
            tree = _WatchedTree(tree, self._watch, self)
        return check_tree(
            tree,
            self.catalogue,
            self.patchsets,
            patches_dir=str(self.ws.profile / "patches"),
            landed=landed,
        )

    def _landed(self, upstream_sha: str) -> set[str]:
        upstream = CommitTree(self.repo, upstream_sha)
        landed = set()
        for ps in self.patchsets:
            drop = ps.drop_when
            has = None
            if drop and drop.upstream_has_commit:
                known = self.repo.resolve_commit(drop.upstream_has_commit)
                has = bool(known) and self.repo.is_ancestor(known or "", upstream_sha)
            if drop_evidence(drop, ps, upstream=upstream, has_commit=has):
                landed.add(ps.id)
        return landed

    def _evaluate_in_worktree(self, upstream_sha: str) -> tuple[Verdict, str, tuple[str, ...]]:
        """A real ``git merge`` in a detached worktree: recorded resolutions, rules, then the checks."""
        from ds4sync.merge.rerere import ResolutionStore, merge_with_store

        wt = self._fresh_worktree()
        store = ResolutionStore(self.ws.resolutions_dir)
        replay = merge_with_store(wt, upstream_sha, store, self.root / "rerere" / "rr-cache")
        if not replay.clean:
            left = [path for path in wt.unmerged_paths() if not self._resolve_by_rule(wt, path)]
            if left:
                return "skip", f"conflict that no recorded resolution or rule covers: {', '.join(left[:5])}", ()
        merged = wt.commit(f"ds4sync bisect step: merge {upstream_sha[:12]}")
        verdict, reason, failed, final = self._replay_and_verify(merged, upstream_sha)
        if verdict != "good" or self.tier is None:
            return verdict, reason, failed
        return self._run_tier(wt, final)

    def _resolve_by_rule(self, wt: GitRepo, path: str) -> bool:
        """The merge phase's rule semantics: the first rule that applies wins; union needs three stages."""
        for rule in self.ws.config.merge.rules_for(path):
            if rule.strategy != "union":
                wt.take_side(path, rule.strategy)
                return True
            if wt.union_merge(path):
                return True
        return False

    def _run_tier(self, wt: GitRepo, final: str) -> tuple[Verdict, str, tuple[str, ...]]:
        from ds4sync.gates.runner import TierOptions, run_tier

        wt.reset_hard(final)  # the replayed tree, which the gates must see
        result = run_tier(self.ws, TierOptions(tier=self.tier or "", target=wt.path, use_cache=True))
        if result.status == "failed":
            failed = [g for g in result.gates if g.blocking and g.status in ("failed", "error")]
            first = failed[0]
            return "bad", f"gate {first.name} {first.status}: {first.reason}", tuple(f"gate:{g.name}" for g in failed)
        if not result:
            return "skip", f"tier {self.tier} is {result.status}: nothing proven", ()
        return "good", f"every blocking invariant holds; tier {self.tier} passed", ()

    def _fresh_worktree(self) -> GitRepo:
        path = self.root / "worktree"
        if self._worktree is None:
            self.repo.worktree_remove(path)
            self._worktree = self.repo.worktree_add_detached(path, self.fork_sha)
        wt = self._worktree
        with contextlib.suppress(GitError):
            wt.merge_abort()
        wt.reset_hard(self.fork_sha)
        wt.clean_untracked(ignored=True)
        return wt

    def close(self) -> None:
        """Remove the worktree a step may have made."""
        if self._worktree is not None:
            self.repo.worktree_remove(self._worktree.path)
            self._worktree = None


class _WatchedTree:
    """A tree whose reads of watched (conflicted) paths mark the step as needing a real merge."""

    def __init__(self, tree: Tree, watched: set[str], owner: StepEvaluator) -> None:
        self._tree, self._watched, self._owner = tree, watched, owner
        self.label = tree.label

    def paths(self) -> list[str]:
        return self._tree.paths()

    def read(self, path: str) -> str | None:
        if path in self._watched:
            self._owner._tainted = True
        return self._tree.read(path)

    def read_many(self, paths: list[str]) -> dict[str, str]:
        if self._watched.intersection(paths):
            self._owner._tainted = True
        return read_many(self._tree, paths)


def _violated(report: CheckReport, patchset: str) -> bool:
    return any(ps.id == patchset and ps.status == "violated" for ps in report.patchsets)


def _load_patchsets(ws: Workspace, only: tuple[str, ...]) -> tuple[Catalogue, list[PatchSet]]:
    folder = ws.profile / "patches"
    if not folder.is_dir():
        raise StateError("the profile has no patches/ folder", where=str(ws.profile), fix="pass --profile DIR")
    catalogue, patchsets = load_catalogue(folder)
    unknown = sorted(set(only) - {ps.id for ps in patchsets})
    if unknown:
        raise StateError(
            f"no patch-set {', '.join(unknown)} in {folder}", where="--patchset", fix="see `ds4sync patches list`"
        )
    return catalogue, [ps for ps in patchsets if not only or ps.id in only]


# -- the search -----------------------------------------------------------------------------
def first_parent_candidates(repo: GitRepo, good: str, bad: str) -> list[str]:
    """Upstream's first-parent commits after ``good`` up to and including ``bad``, oldest first.

    Raises:
        StateError: ``good`` is not an ancestor of ``bad``.
    """
    if not repo.is_ancestor(good, bad):
        raise StateError(
            f"{good[:12]} is not an ancestor of {bad[:12]}",
            where=str(repo.path),
            fix="pass --good with an older upstream commit than --bad",
        )
    return repo.first_parent_commits(good, bad)


def search(
    candidates: Sequence[str], evaluate: Callable[[str], BisectStep], *, good: str | None = None
) -> tuple[Status, list[BisectStep], int]:
    """Binary search for the first bad candidate; returns (status, steps in order, index).

    ``bad`` (the last candidate) is evaluated first, then ``good`` when given: a fork that does
    not hold at ``good`` either has no upstream culprit in the range (``good-fails``). The index is
    that of the first bad candidate (``found``), or of the oldest suspect (``ambiguous``). A skipped
    candidate is replaced by its nearest untested neighbour inside the open range, alternately later
    and earlier, as ``git bisect skip`` does.
    """
    steps: list[BisectStep] = []
    if not candidates:
        return "empty", steps, -1
    last = evaluate(candidates[-1])
    steps.append(last)
    if last.verdict == "good":
        return "bad-holds", steps, -1
    if last.verdict == "skip":
        return "ambiguous", steps, 0
    if good is not None:
        first = evaluate(good)
        steps.append(first)
        if first.verdict == "bad":
            return "good-fails", steps, -1
    low, high = -1, len(candidates) - 1
    skipped: set[int] = set()
    while high - low > 1:
        pick = _pick(low, high, skipped)
        if pick is None:
            return "ambiguous", steps, low + 1
        step = evaluate(candidates[pick])
        steps.append(step)
        if step.verdict == "good":
            low = pick
        elif step.verdict == "bad":
            high = pick
        else:
            skipped.add(pick)
    return "found", steps, high


def _pick(low: int, high: int, skipped: set[int]) -> int | None:
    middle = (low + high) // 2
    for offset in range(high - low):
        for index in (middle + offset, middle - offset):
            if low < index < high and index not in skipped:
                return index
    return None


def bisect(
    ws: Workspace,
    *,
    fork_branch: str,
    good: str,
    bad: str,
    tier: str | None = None,
    patchsets: tuple[str, ...] = (),
    progress: Progress | None = None,
) -> BisectResult:
    """Find the first upstream commit between ``good`` (exclusive) and ``bad`` that breaks the fork.

    ``good`` and ``bad`` are commit SHAs of upstream's first-parent line (``good`` an ancestor
    of ``bad``); the fork head is ``fork_branch``'s.

    Raises:
        StateError: ``good`` is not an ancestor of ``bad``; the profile has no patch-sets folder.
        ConfigError: a malformed patch-set or gate file.
    """
    say = progress or (lambda _m: None)
    started, start = now_iso(), time.monotonic()
    fork_head = ws.repo.branch_head(fork_branch)
    candidates = first_parent_candidates(ws.repo, good, bad)
    evaluator = StepEvaluator(ws, fork_head, tier=tier, only=patchsets)

    def evaluate(sha: str) -> BisectStep:
        step = evaluator(sha)
        say(f"{sha[:12]} {step.verdict}{' (cached)' if step.cached else ''}: {step.reason}")
        return step

    try:
        status, steps, index = search(candidates, evaluate, good=good)
    finally:
        evaluator.close()
    by_sha = {s.upstream_sha: s for s in steps}
    first_bad = by_sha.get(candidates[index]) if status == "found" else None
    suspects: tuple[str, ...] = ()
    if status == "ambiguous":
        lows = [i for i, c in enumerate(candidates) if by_sha.get(c) and by_sha[c].verdict == "good"]
        start_at = max(lows) + 1 if lows else 0
        highs = [i for i, c in enumerate(candidates) if by_sha.get(c) and by_sha[c].verdict == "bad"]
        end_at = min(highs) if highs else len(candidates) - 1
        suspects = tuple(candidates[start_at : end_at + 1])
    return BisectResult(
        status=status,
        fork_branch=fork_branch,
        fork_head=fork_head,
        good=good,
        bad=bad,
        candidates=len(candidates),
        tier=tier,
        first_bad=first_bad,
        last_good=(candidates[index - 1] if index > 0 else good) if status == "found" else None,
        suspects=suspects,
        steps=tuple(steps),
        evaluations=len(steps),
        bound=math.ceil(math.log2(len(candidates))) + 2 if candidates else 0,
        started_at=started,
        seconds=round(time.monotonic() - start, 3),
    )


def last_green_upstream(ws: Workspace, fork_sha: str, upstream_sha: str) -> tuple[str, str]:
    """The default ``good``: the upstream commit of the newest run that finished green, else the merge-base.

    Returns (sha, where it came from: ``the last green sync <run-id>`` or ``the merge-base``).

    Raises:
        StateError: the fork and upstream share no history.
    """
    for run_id in reversed(ws.store.run_ids()):
        with contextlib.suppress(Ds4syncError):  # a damaged record, or a commit gone: not a green point
            record = ws.store.load(run_id)
            sha = record.upstream.sha
            if record.status == "done" and ws.repo.is_ancestor(sha, upstream_sha):
                return sha, f"the last green sync {run_id}"
    base = ws.repo.merge_base(fork_sha, upstream_sha)
    if base is None:
        raise StateError("the fork and upstream share no history", where=str(ws.repo.path))
    return base, "the merge-base (no green sync on record)"


def save_result(ws: Workspace, result: BisectResult) -> Path:
    """Keep ``result`` under ``<state>/bisect/results/`` (newest last by name); returns the path."""
    stamp = result.started_at.replace(":", "").replace("-", "")
    path = ws.store.root / "bisect" / "results" / f"{stamp}-{result.bad[:12]}.json"
    write_json_atomic(path, result.model_dump(mode="json"))
    return path


def run_bisect(
    ws: Workspace,
    *,
    good: str | None,
    bad: str | None,
    tier: str | None = None,
    patchsets: tuple[str, ...] = (),
    progress: Progress | None = None,
) -> BisectResult:
    """``ds4sync bisect``: refs resolved (``bad``: upstream.ref; ``good``: the last green sync), result kept.

    Raises:
        StateError: no fork branch; ``good`` not an ancestor of ``bad``.
        GitError: a ref that names no commit.
    """
    from ds4sync.runner import require_branch, resolve_upstream

    branch = require_branch(ws)
    fork_head = ws.repo.branch_head(branch)
    bad_sha = resolve_upstream(ws, bad or ws.config.upstream.ref)
    bad_from = f"--bad {bad}" if bad else f"upstream.ref {ws.config.upstream.ref}"
    if good:
        good_sha, good_from = resolve_upstream(ws, good), f"--good {good}"
    else:
        good_sha, good_from = last_green_upstream(ws, fork_head, bad_sha)
    result = updated(
        bisect(ws, fork_branch=branch, good=good_sha, bad=bad_sha, tier=tier, patchsets=patchsets, progress=progress),
        good_from=good_from,
        bad_from=bad_from,
    )
    save_result(ws, result)
    return result


def sync_to_green(
    ws: Workspace, target: str | None, *, good: str | None, tier: str | None = None, progress: Progress | None = None
):  # -> RunOutcome (ds4sync.runner), kept untyped here to leave the pipeline import lazy
    """``ds4sync sync --to-green [TARGET]``: bisect up to TARGET, then a normal sync to the furthest green commit.

    The run record's notes say what was left out and why (the culprit, its PR and what failed).

    Raises:
        StateError: nothing after the last green sync holds (the culprit is the very next commit), or
            skipped commits hide where green ends.
    """
    from ds4sync.loop import sync

    result = run_bisect(ws, good=good, bad=target, tier=tier, progress=progress)
    if result.status in ("bad-holds", "empty"):
        destination, left_out = result.bad, None
    elif result.status == "found" and result.last_good and result.last_good != result.good:
        destination, left_out = result.last_good, result.culprit_line()
    else:
        raise StateError(
            f"no upstream commit after {result.good[:12]} holds: {result.culprit_line()}",
            where=str(ws.repo.path),
            fix="fix the fork for that commit (or add a resolution or rule), then sync again",
        )
    outcome = sync.start_merge(ws, destination, progress=progress)
    record = outcome.record
    line = first_parent_candidates(ws.repo, result.good, result.bad)
    behind = len(line) - 1 - line.index(destination)
    if left_out:
        record.notes.append(f"sync --to-green: {behind} upstream commit(s) left out; {left_out}")
    else:
        record.notes.append(f"sync --to-green: {result.bad[:12]} holds; nothing left out")
    update_run(ws, record)
    return outcome
