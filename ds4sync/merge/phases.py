"""The merge phases: prepare, merge, resolve, commit.

prepare  backup ref of the fork head, a dedicated worktree on a new ``sync/...`` branch
merge    ``git merge --no-ff`` of the upstream SHA with rerere on (shared store imported)
resolve  recorded resolutions replay, then per-path rules, else stop for a person
commit   the merge commit (message with counts) and the remerge-diff paths

Each phase can be re-entered after a kill: it looks at the worktree before acting.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from ds4sync.core import fault
from ds4sync.core.errors import GitError, NeedsPersonError
from ds4sync.core.git import GitRepo
from ds4sync.core.words import many
from ds4sync.merge.plan import ConflictEntry, MergeSummary, merge_message, plan_merge
from ds4sync.merge.rerere import ResolutionStore, forget
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
            plan_merge, repo, fork_sha=record.fork.head_before, upstream_sha=record.upstream.sha, merge_base=base
        )
        if not (worktree / ".git").exists():
            repo.worktree_remove(worktree)
            repo.delete_branch(record.sync_branch)
            ctx.progress(f"creating worktree {worktree}")
            repo.worktree_add(worktree, record.sync_branch, record.fork.head_before)
        summary = planned.result()
    return PhaseOutcome(
        "done",
        f"worktree {worktree} on {record.sync_branch}; {many(len(summary.conflicts), 'conflict')} predicted",
        result=summary,
    )


def merge(ctx: RunContext) -> PhaseOutcome:
    """Import recorded resolutions and run ``git merge --no-ff --no-commit`` with rerere on."""
    record, repo, wt = ctx.record, ctx.ws.repo, ctx.worktree
    summary = MergeSummary.model_validate(record.results["merge"])
    imported = ResolutionStore(ctx.ws.resolutions_dir).import_into(repo.common_dir / "rr-cache")
    if wt.merge_head() == record.upstream.sha:
        ctx.progress("merge already in progress in the worktree; going on")
    else:
        if record.phase("merge").attempts > 1:
            _reset_to_fork_head(wt, record.fork.head_before)
        ctx.progress(f"merging {record.upstream.sha[:12]} ({many(summary.upstream_commits, 'upstream commit')})")
        wt.merge_no_commit(record.upstream.sha)
        fault.point("merge.after-git-merge")
    return PhaseOutcome(
        "done",
        f"{many(len(summary.conflicts), 'conflicted file')}, {many(imported, 'recorded resolution')} imported",
        result=summary,
    )


def resolve(ctx: RunContext) -> PhaseOutcome:
    """Classify each conflict's resolution: recorded, rule, or waiting for a person."""
    record, wt = ctx.record, ctx.worktree
    summary = MergeSummary.model_validate(record.results["merge"])
    unmerged = set(wt.unmerged_paths())
    entries = []
    for conflict in summary.conflicts:
        entries.append(_resolve_one(ctx, wt, conflict, unmerged))
    waiting = [e for e in entries if e.resolution == "unresolved"]
    summary = summary.model_copy(update={"conflicts": tuple(entries)})
    if not waiting:
        return PhaseOutcome("done", f"{many(len(entries), 'conflict')} resolved", result=summary)
    details = tuple(f"{e.path} ({e.kind})" for e in waiting)
    return PhaseOutcome(
        "needs-person",
        f"{many(len(waiting), 'conflicted file')} {'needs' if len(waiting) == 1 else 'need'} a person"
        f" in {record.worktree}",
        result=summary,
        details=details,
        next_steps=(
            "edit the files in the worktree, then `ds4sync resume`",
            "or `ds4sync abort` to drop this run (the fork branch is untouched)",
        ),
    )


def _resolve_one(ctx: RunContext, wt: GitRepo, conflict: ConflictEntry, unmerged: set[str]) -> ConflictEntry:
    if conflict.resolution in ("recorded", "rule", "person"):
        return conflict
    if conflict.path not in unmerged:
        # rerere (rerere.autoupdate) already replayed and staged a recorded resolution.
        if conflict.resolution is None and not wt.has_markers(conflict.path):
            return conflict.model_copy(update={"resolution": "recorded"})
        return conflict.model_copy(update={"resolution": "person"})
    if conflict.resolution == "unresolved":
        return conflict  # resume decides about these
    for rule in ctx.ws.config.merge.rules_for(conflict.path):
        if _apply_rule(wt, conflict, rule.strategy):
            return conflict.model_copy(update={"resolution": "rule", "rule": f"{rule.glob} -> {rule.strategy}"})
    return conflict.model_copy(update={"resolution": "unresolved"})


def _apply_rule(wt: GitRepo, conflict: ConflictEntry, strategy: str) -> bool:
    if strategy == "union":
        return conflict.kind in ("content", "add/add") and wt.union_merge(conflict.path)
    wt.take_side(conflict.path, strategy)
    return True


def accept_person_resolutions(ctx: RunContext) -> list[str]:
    """On resume: stage what a person resolved, refusing while conflict markers remain.

    Returns the paths accepted.

    Raises:
        NeedsPersonError: a file still holds conflict markers (nothing is staged then).
    """
    summary = MergeSummary.model_validate(ctx.record.results["merge"])
    wt = ctx.worktree
    waiting = [c for c in summary.conflicts if c.resolution == "unresolved"]
    marked = [c.path for c in waiting if wt.has_markers(c.path)]
    if marked:
        raise NeedsPersonError(
            f"conflict markers remain in {len(marked)} file(s): {', '.join(marked)}",
            where=ctx.record.worktree,
            fix="resolve them, then run `ds4sync resume` again",
        )
    for conflict in waiting:
        wt.stage_resolved(conflict.path)
        for other in conflict.related:
            with contextlib.suppress(GitError):  # the person may have resolved it away already
                wt.stage_resolved(other)
    leftover = wt.unmerged_paths()
    if leftover:
        raise NeedsPersonError(
            f"unmerged paths remain: {', '.join(leftover)}",
            where=ctx.record.worktree,
            fix="resolve or `git add`/`git rm` them, then `ds4sync resume`",
        )
    accepted = {c.path for c in waiting}
    entries = tuple(
        c.model_copy(update={"resolution": "person"}) if c.path in accepted else c for c in summary.conflicts
    )
    ctx.record.results["merge"] = summary.model_copy(update={"conflicts": entries}).model_dump(mode="json")
    ctx.record.phases["resolve"].status = "done"
    ctx.record.phases["resolve"].message = f"{len(accepted)} conflicts resolved by a person"
    return sorted(accepted)


def commit(ctx: RunContext) -> PhaseOutcome:
    """Record resolutions to the shared store, commit the merge, list remerge-diff paths."""
    record, repo, wt = ctx.record, ctx.ws.repo, ctx.worktree
    summary = MergeSummary.model_validate(record.results["merge"])
    if wt.merge_head() is None and summary.merge_commit:
        return PhaseOutcome("done", f"merge commit {summary.merge_commit[:12]}", result=summary)
    if wt.merge_head() is None and is_run_merge(wt, wt.head(), record.fork.head_before, record.upstream.sha):
        # Committed before a kill, the record not saved yet: the commit is this run's own.
        sha = wt.head()
        remerged = tuple(repo.remerge_diff_paths(sha))
        summary = summary.model_copy(update={"merge_commit": sha, "remerge_diff_paths": remerged})
        return PhaseOutcome("done", f"merge commit {sha[:12]} (made before an interruption)", result=summary)
    rr_cache = repo.common_dir / "rr-cache"
    merge_rr = wt.merge_rr()
    wt.rerere()
    by_rule = {c.path for c in summary.conflicts if c.resolution == "rule"}
    forget(rr_cache, {digest for path, digest in merge_rr.items() if path in by_rule})
    person = {c.path: merge_rr[c.path] for c in summary.conflicts if c.resolution == "person" and c.path in merge_rr}
    stored = ResolutionStore(ctx.ws.resolutions_dir).export_from(rr_cache, person, run_id=record.run_id)
    fault.point("commit.after-rerere")
    message = merge_message(
        summary,
        upstream_name=record.upstream.name or record.upstream.url or record.upstream.remote,
        upstream_ref=record.upstream.ref,
        fork_name=record.fork.name or "fork",
        fork_branch=record.fork.branch,
        run_id=record.run_id,
    )
    sha = wt.commit(message)
    fault.point("commit.after-commit")
    remerged = tuple(repo.remerge_diff_paths(sha))
    summary = summary.model_copy(update={"merge_commit": sha, "remerge_diff_paths": remerged})
    note = f", {len(stored)} resolutions recorded to the shared store" if stored else ""
    return PhaseOutcome("done", f"merge commit {sha[:12]}{note}", result=summary)


def is_run_merge(wt: GitRepo, sha: str, fork_head: str, upstream_sha: str) -> bool:
    """Whether ``sha`` is the merge commit of this run: exactly the parents (fork head, upstream SHA)."""
    parents = wt.out("rev-list", "--parents", "-n", "1", "--end-of-options", sha).split()[1:]
    return parents == [fork_head, upstream_sha]


def _reset_to_fork_head(wt: GitRepo, fork_head: str) -> None:
    """Undo a merge that was killed before MERGE_HEAD was written (stale lock, half index)."""
    lock = wt.git_dir / "index.lock"
    lock.unlink(missing_ok=True)
    if wt.head() != fork_head or wt.status_porcelain():
        wt.run("reset", "--quiet", "--hard", fork_head)
        wt.run("clean", "-fdq")


def backup_branch_name(template: str | None, *, branch: str, when: datetime | None = None) -> str | None:
    """The optional pre-sync backup branch name, e.g. ``backup/<branch>-<date>-pre-sync``."""
    if not template:
        return None
    date = (when or datetime.now(UTC)).strftime("%Y%m%d")
    return template.format(branch=branch.replace("/", "-"), date=date)


MERGE_PHASES = (
    Phase("prepare", prepare, "merge"),
    Phase("merge", merge),
    Phase("resolve", resolve, "merge"),
    Phase("commit", commit, "merge"),
)
