"""Promote: the one command that moves the fork branch, and only forward, only when green.

The fork branch is fast-forwarded to the sync branch's head with a compare-and-swap
(``git update-ref <ref> <new> <old>``), so a fork that moved meanwhile is never
overwritten. The old head stays reachable at ``refs/ds4sync/rollback/<run-id>``.
"""

from __future__ import annotations

from ds4sync.core.errors import GitError, StateError
from ds4sync.core.git import GitRepo
from ds4sync.core.record import now_iso
from ds4sync.loop.results import PromoteResult
from ds4sync.record import RunRecord
from ds4sync.runner import Workspace


class AlreadyPromoted(StateError):
    """The run was promoted before; ``result`` is what that promote did."""

    def __init__(self, run_id: str, result: PromoteResult) -> None:
        super().__init__(
            f"run {run_id} already promoted at {result.promoted_at}: {result.branch} "
            f"{result.old_head[:12]} -> {result.new_head[:12]} (rollback: {result.rollback_ref})"
        )
        self.run_id = run_id
        self.result = result


def blockers(record: RunRecord) -> list[str]:
    """Why ``record`` may not be promoted (empty when it may)."""
    reasons = []
    merge = record.results.merge
    if merge is None or not merge.merge_commit:
        reasons.append("the merge is not committed")
    for name, state in record.phases.items():
        if state.status in ("failed", "needs-person", "running"):
            reasons.append(f"phase '{name}' is {state.status}")
    for tier, tier_result in record.results.gates.items():
        for gate in tier_result.gates:
            # Environment-only failures (incomplete) never count as passing.
            if gate.required and gate.status in ("failed", "error", "incomplete"):
                reasons.append(f"required gate {tier}/{gate.name} is {gate.status}")
    return reasons


def _clean_checkout_of(repo: GitRepo, branch: str) -> GitRepo | None:
    """The checkout where ``branch`` is checked out, if any, which must be clean to be updated.

    Like git's ``receive.denyCurrentBranch=updateInstead``: a clean work tree follows the
    branch; one with changes to tracked files is refused, naming them.

    Raises:
        StateError: that checkout has uncommitted changes.
    """
    where = repo.checked_out_in(branch)
    if where is None:
        return None
    holder = GitRepo(where)
    dirty = holder.tracked_changes()
    if dirty:
        shown = ", ".join(dirty[:10]) + (f" and {len(dirty) - 10} more" if len(dirty) > 10 else "")
        raise StateError(
            f"{branch} is checked out in {where} with uncommitted changes: {shown}",
            where=where,
            fix="commit or stash them (promote then updates that checkout), or check out another branch there",
        )
    return holder


def promote(ws: Workspace, *, run_id: str | None = None, allow: bool = False) -> PromoteResult:
    """Fast-forward the fork branch to the run's sync branch.

    Args:
        run_id: the run (default: the active one, else the latest).
        allow: promote despite blockers other than a moved fork branch (recorded).

    Raises:
        AlreadyPromoted: the run was promoted before (a StateError).
        StateError: blockers remain, the fork branch moved since the run started, or
            the branch is checked out in a work tree with uncommitted changes.
    """
    with ws.store.lock("promote"):
        record = ws.store.resolve(run_id)
        if record.results.promote is not None:
            raise AlreadyPromoted(record.run_id, record.results.promote)
        repo, branch = ws.repo, record.fork.branch
        reasons = blockers(record)
        if reasons and not allow:
            raise StateError(
                f"run {record.run_id} cannot be promoted: {'; '.join(reasons)}",
                where=str(ws.store.record_path(record.run_id)),
                fix="fix and `ds4sync resume`, or pass --allow-blockers to promote anyway",
            )
        current = repo.branch_head(branch)
        if current != record.fork.head_before:
            raise StateError(
                f"{branch} moved since the run started ({record.fork.head_before[:12]} -> {current[:12]})",
                where=str(repo.path),
                fix="run a new sync from the current fork head",
            )
        new_head = repo.branch_head(record.sync_branch)
        if not repo.is_ancestor(current, new_head):
            raise StateError(
                f"{record.sync_branch} does not contain {branch}",
                where=str(repo.path),
                fix="the sync branch was rewritten; start a new sync",
            )
        holder = _clean_checkout_of(repo, branch)
        rollback = f"refs/ds4sync/rollback/{record.run_id}"
        repo.update_ref(rollback, current, message=f"ds4sync rollback {record.run_id}")
        if holder is not None:
            holder.update_checkout(current, new_head)
        try:
            repo.run("update-ref", "-m", f"ds4sync promote {record.run_id}", f"refs/heads/{branch}", new_head, current)
        except GitError:
            if holder is not None:  # the branch did not move: put its checkout back
                holder.update_checkout(new_head, current)
            raise
        result = PromoteResult(
            branch=branch,
            old_head=current,
            new_head=new_head,
            rollback_ref=rollback,
            promoted_at=now_iso(),
            worktree_updated=str(holder.path) if holder is not None else None,
        )
        record.results.promote = result
        record.status = "promoted"
        if reasons:
            record.notes.append(f"promoted despite: {'; '.join(reasons)}")
        ws.store.save(record)
        if record.results.report is not None:  # the report says what happened to the run
            from ds4sync.report.files import write_report

            write_report(ws.store, record, ws.profile)
        return result
