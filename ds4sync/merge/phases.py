"""The merge phases: prepare, merge, resolve, commit.

prepare  backup ref of the fork head, a dedicated worktree on a new ``sync/...`` branch
merge    ``git merge --no-ff`` of the upstream SHA; rerere against the run's own cache, filled
         only from the shared store (recorded resolutions replay, each naming its entry)
resolve  per-path rules, else stop for a person
commit   the merge commit (message with counts) and the remerge-diff paths

Each phase can be re-entered after a kill: it looks at the worktree before acting.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple, NoReturn

from ds4sync.core import fault
from ds4sync.core.errors import GitError, NeedsPersonError, StateError
from ds4sync.core.git import GitRepo
from ds4sync.core.model import updated
from ds4sync.core.words import many
from ds4sync.merge import markers
from ds4sync.merge.kept import with_review_facts
from ds4sync.merge.plan import merge_message, plan_merge
from ds4sync.merge.proposals import propose, with_sources
from ds4sync.merge.provenance import load_owners
from ds4sync.merge.rerere import MergeReplay, ResolutionStore, merge_with_store
from ds4sync.models.merge_results import ConflictEntry, MergeSummary
from ds4sync.models.record import RunRecord
from ds4sync.runner import Phase, PhaseOutcome, RunContext


def prepare(ctx: RunContext) -> PhaseOutcome:
    """Back up the fork head, create the sync worktree and predict the merge (idempotent).

    The prediction (``git merge-tree``, diffs) runs beside the worktree checkout: the
    checkout is I/O and one core, the prediction the other.
    """
    record, repo = ctx.record, ctx.ws.repo
    repo.update_ref(record.backup_ref, record.fork.head_before, message=f"ds4sync backup {record.run_id}")
    if record.backup_branch and not repo.ref_exists(f"refs/heads/{record.backup_branch}"):
        repo.update_ref(
            f"refs/heads/{record.backup_branch}", record.fork.head_before, message="ds4sync pre-sync backup"
        )
    base = repo.merge_base(record.fork.head_before, record.upstream.sha)
    assert base is not None, "preflight checks for a merge-base"
    worktree = Path(record.worktree)
    with ThreadPoolExecutor(max_workers=1) as pool:
        planned = pool.submit(
            plan_merge,
            repo,
            fork_sha=record.fork.head_before,
            upstream_sha=record.upstream.sha,
            merge_base=base,
            patchsets=load_owners(ctx.ws.profile / "patches"),
        )
        if not (worktree / ".git").exists():
            repo.worktree_remove(worktree)
            repo.delete_branch(record.sync_branch)
            ctx.progress(f"creating worktree {worktree}")
            try:
                repo.worktree_add(worktree, record.sync_branch, record.fork.head_before)
            except GitError as exc:  # leave nothing half made: what git left of the checkout, and the branch
                repo.worktree_remove(worktree)  # that this call made (worktree_add refuses an existing one)
                repo.delete_branch(record.sync_branch)
                exc.fix = (
                    "fix what git reports (for a missing object: `git fsck`, then fetch it), then `ds4sync resume`"
                    " (prepare runs again), or `ds4sync abort`"
                )
                raise
        summary = planned.result()
    return PhaseOutcome(
        "done",
        f"worktree {worktree} on {record.sync_branch}; {many(len(summary.conflicts), 'conflict')} predicted",
        result=summary,
    )


def _require_conflict_entries(ctx: RunContext, summary: MergeSummary, replay: MergeReplay, unmerged: set[str]) -> None:
    """Check that every predicted conflict in the index is unmerged or was replayed.

    Raises:
        GitError: git left predicted conflicts without conflict entries (what git said; a held index lock).
    """
    lost = sorted({c.path for c in summary.conflicts if c.in_index} - unmerged - set(replay.replayed))
    if not lost:
        return
    wt = ctx.worktree
    errors = [line for line in replay.said.splitlines() if line.startswith(("error:", "fatal:"))]
    locked = (wt.git_dir / "index.lock").exists()  # blame a lock only when there is one
    raise GitError(
        f"git merge left {len(lost)} predicted conflicts without conflict entries ({', '.join(lost[:5])}); "
        f"git said: {'; '.join(errors) or 'nothing'}",
        where=ctx.record.worktree,
        fix=(
            f"a git command holds {wt.git_dir / 'index.lock'}: let it finish, then `ds4sync resume`"
            if locked
            else "fix what git reports (a merge driver, a filter or an attribute of those paths), then `ds4sync resume`"
        ),
    )


def _replayed_conflicts(
    wt: GitRepo, summary: MergeSummary, replay: MergeReplay, store: ResolutionStore
) -> Iterator[ConflictEntry]:
    """The predicted conflicts with their rerere ids; a replayed one ``recorded``, naming its store entries."""
    for conflict in summary.conflicts:
        update: dict[str, object] = {"conflict_id": replay.ids.get(conflict.path)}
        if conflict.path in replay.replayed:
            names = replay.replayed[conflict.path]
            update.update(
                resolution="recorded",
                store_entry=" | ".join(str(store.root / n) for n in names),
                replayed_blob=wt.staged_blob(conflict.path),
            )
        yield updated(conflict, **update)


def _summary(record: RunRecord) -> MergeSummary:
    """The merge result prepare recorded (the later merge phases start from it)."""
    if record.results.merge is None:
        raise StateError(
            f"run {record.run_id} has no merge result", where=record.worktree, fix="abort it and start a new sync"
        )
    return record.results.merge


def rerere_cache(ctx: RunContext) -> Path:
    """This run's own rerere cache (filled only from the shared store; never the user's rr-cache)."""
    return ctx.ws.store.run_dir(ctx.record.run_id) / "rerere" / "rr-cache"


def merge(ctx: RunContext) -> PhaseOutcome:
    """``git merge --no-ff --no-commit`` of the upstream SHA, then rerere with the shared store only.

    rerere runs twice against this run's own cache: first on an empty cache (it records
    each conflict's preimage and id), then after the shared-store entries for those ids
    were imported (it replays them). A replayed resolution is staged only when git finds
    no conflict marker left in it; it is labelled ``recorded`` with its store entry.
    """
    record, wt = ctx.record, ctx.worktree
    summary = _summary(record)
    cache = rerere_cache(ctx)
    if wt.merge_head() is not None or record.phase("merge").attempts > 1:
        _reset_to_fork_head(wt, record.fork.head_before)  # a killed attempt: start the merge over
    store = ResolutionStore(ctx.ws.resolutions_dir)
    ctx.progress(f"merging {record.upstream.sha[:12]} ({many(summary.upstream_commits, 'upstream commit')})")
    replay = merge_with_store(wt, record.upstream.sha, store, cache)
    fault.point("merge.after-git-merge")
    unmerged = set(wt.unmerged_paths())
    _require_conflict_entries(ctx, summary, replay, unmerged)
    entries = [*_replayed_conflicts(wt, summary, replay, store)]
    predicted = {c.path for c in summary.conflicts}
    surprise = sorted(unmerged - predicted)
    entries += [
        ConflictEntry(path=p, kind="other", message="conflicted in the merge, not predicted by merge-tree")
        for p in surprise
    ]
    summary = updated(summary, conflicts=tuple(entries))
    notes = [f"{len(surprise)} conflicts not predicted: {', '.join(surprise)}"] if surprise else []
    notes += [f"rejected store entry {path}: {why}" for path, why in replay.imported.rejected]
    notes += [f"replayed resolution still had markers: {p}" for p in replay.still_marked]
    message = (
        f"{many(len(summary.conflicts), 'conflicted file')}, {len(replay.replayed)} replayed from "
        f"{many(replay.imported.count, 'imported store entry', 'imported store entries')}"
    )
    return PhaseOutcome("done", "; ".join([message, *notes]), result=summary, details=tuple(notes))


def resolve(ctx: RunContext) -> PhaseOutcome:
    """Classify each conflict's resolution: recorded, rule, or waiting for a person."""
    record, wt = ctx.record, ctx.worktree
    summary = _summary(record)
    unmerged = set(wt.unmerged_paths())
    entries = []
    for conflict in summary.conflicts:
        entries.append(with_sources(_resolve_one(ctx, wt, conflict, unmerged)))
    proposed = propose(ctx, wt, entries)
    entries = list(proposed.entries)
    waiting = [e for e in entries if e.resolution == "unresolved" or (e.resolution == "proposed" and not e.accepted_by)]
    summary = updated(summary, conflicts=tuple(entries))
    if not waiting:
        return PhaseOutcome("done", f"{many(len(entries), 'conflict')} resolved", result=summary)
    details = (
        tuple(
            f"{e.path}: proposed ({e.proposal}) in the worktree, not staged: review it, then"
            " `ds4sync resume --accept-proposals` (or edit it and `ds4sync resume`)"
            if e.resolution == "proposed"
            else f"{e.path} ({e.kind}{', eol-only' if e.eol_only else ''}): {e.hint}"
            for e in waiting
        )
        + proposed.notes
    )
    return PhaseOutcome(
        "needs-person",
        f"{many(len(waiting), 'conflicted file')} {'needs' if len(waiting) == 1 else 'need'} a person"
        f" in {record.worktree}",
        result=summary,
        details=details,
        next_steps=(
            "resolve each file as its hint says; files without conflict markers need your `git add`/`git rm`",
            "then `ds4sync resume`, or `ds4sync abort` to drop this run (the fork branch is untouched)",
        ),
    )


def _resolve_one(ctx: RunContext, wt: GitRepo, conflict: ConflictEntry, unmerged: set[str]) -> ConflictEntry:
    if conflict.resolution in ("recorded", "rule", "person", "proposed"):
        return conflict
    if not conflict.in_index:
        return updated(conflict, resolution="unresolved")  # only a person can look at it
    if conflict.path not in unmerged and not any(p in unmerged for p in conflict.related):
        if markers_left(ctx, [conflict]):  # staged with its markers: not a resolution
            return updated(conflict, resolution="unresolved")
        return updated(conflict, resolution="person")  # staged by a person after a kill
    if conflict.resolution == "unresolved":
        return conflict  # resume decides about these
    for rule in ctx.ws.config.merge.rules_for(conflict.path):
        if _apply_rule(wt, conflict, rule.strategy):
            return updated(conflict, resolution="rule", rule=f"{rule.glob} -> {rule.strategy}")
    return updated(conflict, resolution="unresolved")


#: Kinds a per-path rule never resolves: git moved a path aside or changed its type, and
#: "ours"/"theirs" of one path cannot say what to do with the other.
_NO_RULE_KINDS = frozenset({"file/directory", "distinct types", "directory rename split", "directory rename collision"})


def _apply_rule(wt: GitRepo, conflict: ConflictEntry, strategy: str) -> bool:
    if conflict.kind in _NO_RULE_KINDS or conflict.path not in wt.unmerged_paths():
        return False
    if strategy == "union":
        return conflict.kind in ("content", "add/add") and wt.union_merge(conflict.path)
    wt.take_side(conflict.path, strategy)
    return True


def accept_person_resolutions(ctx: RunContext) -> PhaseOutcome:
    """The resolve phase's ``on_person`` hook, on resume: accept what a person resolved, as git sees it;
    refuse (changing nothing) otherwise. ``ctx.accept_markers`` and ``ctx.accept_proposals`` carry what
    the person said (``resume --accept-markers PATH``, ``--accept-proposals``).

    No path a waiting conflict touched (its path, its related paths, the copies git wrote beside
    it) may hold a conflict hunk, in the work tree or staged, at any size git may have written
    (:mod:`ds4sync.merge.markers`), whatever the conflict's kind, unless the person names it in
    ``accept_markers`` (a file that legitimately holds a whole hunk, e.g. a test fixture): it is
    then recorded on its conflict (``markers_accepted``). A conflict of a kind git always marks
    (content, add/add) is staged for the person once its markers are gone; every other kind is
    accepted only when the person staged it (``git add``/``git rm``), i.e. when ``git ls-files -u``
    no longer lists it. Unstaged edits to other files are refused too: they would silently miss
    the merge commit.

    A file holding a validated proposal (resolution ``proposed``) is staged only with
    ``accept_proposals`` (a person's ``resume --accept-proposals``) and stays ``proposed``; one the
    person edited after it was written is the person's resolution.

    Returns the phase's outcome: done, with the merge summary whose conflicts say who resolved them.

    Raises:
        NeedsPersonError: markers remain, an unmarked conflict is not staged, files have unstaged
            edits, or ``accept_markers`` names a path that holds no markers of this merge (nothing
            is staged then); one message names every problem, and the resolve phase's message (what
            ``status`` shows) the paths still unmerged.
    """
    summary = _summary(ctx.record)
    left = _left_by_person(ctx, summary)
    problems = _person_problems(left, accept_proposals=ctx.accept_proposals)
    if problems:
        _refuse_person_resolutions(ctx, left, problems)
    for path in [*left.to_stage, *left.untouched]:
        ctx.worktree.stage_resolved(path)
    return _accepted_outcome(summary, left, accept_markers=ctx.accept_markers)


class _LeftByPerson(NamedTuple):
    """The worktree after a person's turn, as git sees it (paths, sorted where a message lists them)."""

    waiting: list[ConflictEntry]  # the conflicts a person had to resolve (a proposal they edited included)
    untouched: list[str]  # validated proposals nobody edited
    to_stage: list[str]  # conflicts of a kind git marks, still unmerged: staged for the person
    marks: dict[str, str]  # path -> where it still holds a conflict hunk
    not_marked: list[str]  # named in accept_markers, holding no hunk of this merge
    marked: list[str]  # holding a hunk not named in accept_markers
    unstaged_marker_less: list[str]  # conflicts without markers the person has not staged
    leftover: list[str]  # other unmerged paths
    unstaged: list[str]  # unstaged edits to other files


def _left_by_person(ctx: RunContext, summary: MergeSummary) -> _LeftByPerson:
    """What the person left: waiting conflicts, proposals, hunks, unmerged and unstaged paths."""
    wt, accept_markers = ctx.worktree, ctx.accept_markers
    proposals = [c for c in summary.conflicts if c.resolution == "proposed" and not c.accepted_by]
    edited = {c.path for c in proposals if _worktree_blob(wt, c.path) != c.proposed_blob}
    untouched = [c.path for c in proposals if c.path not in edited]
    waiting = [c for c in summary.conflicts if c.resolution == "unresolved" or c.path in edited]
    unmerged = set(wt.unmerged_paths())
    marks = markers_left(ctx, waiting)
    to_stage = [c.path for c in waiting if c.has_markers_kind and c.path in unmerged]
    unstaged_marker_less = sorted(
        {p for c in waiting if not c.has_markers_kind for p in (c.path, *c.related) if p in unmerged}
    )
    return _LeftByPerson(
        waiting=waiting,
        untouched=untouched,
        to_stage=to_stage,
        marks=marks,
        not_marked=sorted(set(accept_markers) - set(marks)),
        marked=sorted(set(marks) - set(accept_markers)),
        unstaged_marker_less=unstaged_marker_less,
        leftover=sorted(unmerged - set(to_stage) - set(unstaged_marker_less) - set(untouched)),
        unstaged=[p for p in wt.unstaged_paths() if p not in to_stage and p not in unmerged],
    )


def _person_problems(left: _LeftByPerson, *, accept_proposals: bool) -> list[str]:
    """Every reason to refuse the person's resolutions, at once: a person fixes them all before the next resume."""
    problems: list[str] = []
    if left.not_marked:
        problems.append(
            f"--accept-markers names paths without conflict markers of this merge: {', '.join(left.not_marked)}"
        )
    if left.untouched and not accept_proposals:
        problems.append(
            f"{len(left.untouched)} file(s) hold a validated model proposal that no person accepted: "
            f"{', '.join(left.untouched)}"
            " (review each with `git diff`; accept with `ds4sync resume --accept-proposals`)"
        )
    if left.marked:
        named = ", ".join(f"{p} ({left.marks[p]})" for p in left.marked)
        problems.append(f"conflict markers remain in {len(left.marked)} file(s): {named}")
    if left.unstaged_marker_less:
        kinds = {c.path: c.kind for c in left.waiting}
        named = ", ".join(f"{p} ({kinds[p]})" if p in kinds else p for p in left.unstaged_marker_less)
        problems.append(f"conflicts without markers are not resolved until you stage them: {named}")
    if left.leftover:
        problems.append(f"unmerged paths remain: {', '.join(left.leftover)}")
    if left.unstaged:
        problems.append(f"unstaged edits would be left out of the merge commit: {', '.join(left.unstaged)}")
    return problems


def _refuse_person_resolutions(ctx: RunContext, left: _LeftByPerson, problems: Sequence[str]) -> NoReturn:
    """Refuse, changing nothing but the resolve phase's message (the paths still unmerged).

    Raises:
        NeedsPersonError: always; one message naming every problem.
    """
    still = sorted({*left.marked, *left.unstaged_marker_less, *left.leftover})
    if still:  # status says what is left, as git sees it now (the runner saves the record)
        ctx.record.phases["resolve"].message = f"{many(len(still), 'path')} still need a person: {', '.join(still)}"
    fix = (
        "`git add` what belongs to the merge, `git checkout -- FILE` or delete the rest, then `ds4sync resume`"
        if not still
        else "resolve the files with markers (a file meant to hold a whole conflict hunk: `ds4sync resume "
        "--accept-markers PATH`), decide each conflict without markers and `git add`/`git rm` it "
        "in the worktree (see `ds4sync status`), then `ds4sync resume`"
    )
    raise NeedsPersonError("; ".join(problems), where=ctx.record.worktree, fix=fix)


def _accepted_outcome(summary: MergeSummary, left: _LeftByPerson, *, accept_markers: Sequence[str]) -> PhaseOutcome:
    """Done: the waiting conflicts are the person's, the untouched proposals accepted by them."""
    accepted = {c.path for c in left.waiting}
    by_person = "person (resume --accept-proposals)"
    entries = tuple(
        updated(_by_person(c), **_accepted_markers(c, accept_markers))
        if c.path in accepted
        else updated(c, accepted_by=by_person)
        if c.path in left.untouched
        else c
        for c in summary.conflicts
    )
    kept = f"; conflict markers kept on purpose in {', '.join(sorted(accept_markers))}" if accept_markers else ""
    message = f"{len(accepted)} conflicts resolved by a person{kept}" + (
        f", {len(left.untouched)} validated proposals accepted" if left.untouched else ""
    )
    return PhaseOutcome("done", message, result=updated(summary, conflicts=entries))


def _worktree_blob(wt: GitRepo, path: str) -> str | None:
    """The blob id of the worktree file (None when it is gone)."""
    file = wt.path / path
    return wt.blob_id(file.read_bytes()) if file.is_file() else None


def _by_person(conflict: ConflictEntry) -> ConflictEntry:
    """A conflict a person resolved: a proposal they edited is theirs now, its hunks too."""
    if conflict.resolution != "proposed":
        return updated(conflict, resolution="person")
    hunks = tuple(updated(h, source="person") for h in conflict.hunks)
    return updated(conflict, resolution="person", proposal=None, hunks=hunks)


def markers_left(ctx: RunContext, conflicts: Iterable[ConflictEntry]) -> dict[str, str]:
    """The paths the given conflicts touched that still hold a conflict hunk: path -> where it is
    (``work tree``, ``index``); see :mod:`ds4sync.merge.markers`."""
    record, wt = ctx.record, ctx.worktree
    paths = markers.touched_paths(wt, [p for c in conflicts for p in (c.path, *c.related)])
    sizes = markers.sizes_git_used(wt, paths, commits=(record.fork.head_before, record.upstream.sha))
    return markers.marked_paths(wt, sizes)


def _accepted_markers(conflict: ConflictEntry, accept: Sequence[str]) -> dict[str, object]:
    own = (conflict.path, *conflict.related)
    mine = tuple(sorted(p for p in accept if p in own or p.startswith(f"{conflict.path}~")))
    return {"markers_accepted": mine} if mine else {}


def commit(ctx: RunContext) -> PhaseOutcome:
    """Record the person's resolutions to the shared store, commit the merge, list remerge-diff paths.

    Only resolutions by a person are stored (rules and replays are not), through this
    run's own rerere cache; each conflict names the store entry it went to (``stored_as``).
    """
    record, repo, wt = ctx.record, ctx.ws.repo, ctx.worktree
    summary = _summary(record)
    if wt.merge_head() is None and summary.merge_commit:
        return PhaseOutcome("done", f"merge commit {summary.merge_commit[:12]}", result=summary)
    if is_run_merge(wt, wt.head(), record.fork.head_before, record.upstream.sha):
        return _commit_made_before_kill(ctx, summary)
    summary, new = _store_person_resolutions(ctx, summary)
    fault.point("commit.after-rerere")
    message = merge_message(
        summary,
        upstream_name=record.upstream.name or record.upstream.url or record.upstream.remote,
        upstream_ref=record.upstream.ref,
        fork_name=record.fork.name or "fork",
        fork_branch=record.fork.branch,
        run_id=record.run_id,
    )
    fault.point_holding_lock("commit.inside-index-lock", wt.git_dir / "index.lock")
    sha = wt.commit(message, point="merge-commit")
    fault.point("commit.after-commit")
    remerged = tuple(repo.remerge_diff_paths(sha))
    summary = with_review_facts(repo, updated(summary, merge_commit=sha, remerge_diff_paths=remerged), sha)
    note = f", {many(new, 'resolution')} recorded to the shared store" if new else ""
    return PhaseOutcome("done", f"merge commit {sha[:12]}{note}", result=summary)


def _commit_made_before_kill(ctx: RunContext, summary: MergeSummary) -> PhaseOutcome:
    """Done with the merge commit this run made before a kill (HEAD is it), its merge state forgotten."""
    repo, wt = ctx.ws.repo, ctx.worktree
    # Committed before a kill, the record not saved yet: the commit is this run's own. A kill inside
    # `git commit` after HEAD moved leaves MERGE_HEAD too (git removes it after the ref update): committing
    # again would make a second merge on top of the first. Forget that merge state; the commit stands.
    if wt.merge_head() is not None:
        wt.merge_quit()
    sha = wt.head()
    remerged = tuple(repo.remerge_diff_paths(sha))
    summary = with_review_facts(repo, updated(summary, merge_commit=sha, remerge_diff_paths=remerged), sha)
    return PhaseOutcome("done", f"merge commit {sha[:12]} (made before an interruption)", result=summary)


def _store_person_resolutions(ctx: RunContext, summary: MergeSummary) -> tuple[MergeSummary, int]:
    """Export what a person resolved to the shared store, through this run's rerere cache.

    Returns the summary whose conflicts name their store entries (``stored_as``; a replay a person
    changed is theirs) and how many resolutions were newly recorded.
    """
    record, wt = ctx.record, ctx.worktree
    cache = rerere_cache(ctx)
    ids = wt.merge_rr()
    wt.rerere(cache)  # records the postimages of what a person resolved
    store = ResolutionStore(ctx.ws.resolutions_dir)
    new = 0
    entries = []
    for conflict in summary.conflicts:
        conflict_id = ids.get(conflict.path) or conflict.conflict_id
        if conflict.resolution == "recorded" and conflict.replayed_blob:
            conflict = _changed_replay(wt, store, cache, conflict, run_id=record.run_id)
        if conflict.resolution == "person" and conflict_id and not conflict.stored_as and not conflict.replay_changed:
            stored = store.export_from(cache, conflict_id, path=conflict.path, run_id=record.run_id)
            if stored is not None:
                new += stored[1]
                conflict = updated(conflict, stored_as=str(store.root / stored[0]))
        entries.append(conflict)
    return updated(summary, conflicts=tuple(entries)), new


def _changed_replay(
    wt: GitRepo, store: ResolutionStore, cache: Path, conflict: ConflictEntry, *, run_id: str
) -> ConflictEntry:
    """A replayed resolution as the commit will have it: unchanged, it stays ``recorded``; edited or deleted
    by a person after the replay (git's index differs from the blob the replay staged), it is the person's,
    and its store entries hold the edit (this run's preimage with the staged content) or are forgotten."""
    staged = wt.staged_blob(conflict.path)
    if staged == conflict.replayed_blob:
        return conflict
    names = [Path(entry).name for entry in (conflict.store_entry or "").split(" | ") if entry]
    if staged is None:
        for name in names:
            store.forget(name)
        return updated(conflict, resolution="person", replay_changed="deleted", stored_as=None)
    postimage = wt.blob(staged)
    folders = [
        store.replace(
            name, cache=cache, conflict_id=conflict.conflict_id, postimage=postimage, path=conflict.path, run_id=run_id
        )
        for name in names
    ]
    return updated(conflict, resolution="person", replay_changed="edited", stored_as=" | ".join(map(str, folders)))


def is_run_merge(wt: GitRepo, sha: str, fork_head: str, upstream_sha: str) -> bool:
    """Whether ``sha`` is the merge commit of this run: exactly the parents (fork head, upstream SHA)."""
    return wt.parents(sha) == [fork_head, upstream_sha]


def _reset_to_fork_head(wt: GitRepo, fork_head: str) -> None:
    """Undo an earlier, killed merge attempt (stale lock, half index, MERGE_HEAD) back to the fork head."""
    wt.clear_stale_index_lock()
    if wt.head() != fork_head or wt.merge_head() is not None or wt.status_porcelain():
        wt.reset_hard(fork_head)
        wt.clean_untracked()


def backup_branch_name(template: str | None, *, branch: str, when: datetime | None = None) -> str | None:
    """The optional pre-sync backup branch name, e.g. ``backup/<branch>-<date>-pre-sync``."""
    if not template:
        return None
    date = (when or datetime.now(UTC)).strftime("%Y%m%d")
    return template.format(branch=branch.replace("/", "-"), date=date)


MERGE_PHASES = (
    Phase("prepare", prepare, "merge"),
    Phase("merge", merge),
    Phase("resolve", resolve, "merge", on_person=accept_person_resolutions),
    Phase("commit", commit, "merge"),
)
