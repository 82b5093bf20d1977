"""Promote: the one command that moves the fork branch, and only forward, only to a proven commit.

A commit is proven when the merge is committed, replay and verify passed on it, and every
tier required for promotion (``gates.promote_tiers``, default ``gates.tiers``) passed on
exactly that commit and tree: each gate result records the commit and tree id it ran on.
The sync branch's head must still be that commit; commits added after the gates are named
and refused. Without configured tiers promote refuses unless ``--allow-ungated``, which the
record and the report state.

The fork branch is fast-forwarded with a compare-and-swap (``git update-ref <ref> <new>
<old>``), so a fork that moved meanwhile is never overwritten. The old head stays reachable
at ``refs/ds4sync/rollback/<run-id>``. A checkout of the fork branch moves with it, one atomic git
step at a time (:mod:`ds4sync.loop.forkmove`), and a move a kill interrupted is finished or undone
by the next ``promote`` or ``abort``. A promote killed after the branch moved but before the record
was saved is recognised by the next promote (the branch at the proven commit, the rollback ref at
the old head) and recorded; ``abort`` refuses such a run instead of calling the fork untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ds4sync.core import fault
from ds4sync.core.errors import StateError
from ds4sync.core.git import GitRepo
from ds4sync.core.record import PhaseState, now_iso
from ds4sync.loop.forkmove import ForkMove, move_fork, recover
from ds4sync.models.gates_results import TierResult
from ds4sync.models.gates_status import gate_green, gate_ran
from ds4sync.models.loop_results import PromoteResult
from ds4sync.models.record import RunRecord
from ds4sync.runner import Workspace, for_run, update_run

UNGATED_NOTE = "PROMOTED UNGATED: no gate tier was configured for promotion; no test proved this commit"


class AlreadyPromoted(StateError):
    """The run was promoted before; ``result`` is what that promote did."""

    def __init__(self, run_id: str, result: PromoteResult) -> None:
        super().__init__(
            f"run {run_id} already promoted at {result.promoted_at}: {result.branch} "
            f"{result.old_head[:12]} -> {result.new_head[:12]} (rollback: {result.rollback_ref})"
        )
        self.run_id = run_id
        self.result = result


@dataclass
class Proof:
    """What the record proves about ``commit`` (the sync branch's head).

    ``hard``: reasons nothing overrides (no merge commit, gates that ran on another commit,
    a head that moved after the gates); ``soft``: failures ``--allow-blockers`` may override;
    ``ungated``: no tier is required for promotion.
    """

    commit: str | None
    hard: list[str] = field(default_factory=list)
    soft: list[str] = field(default_factory=list)
    proven_by: list[str] = field(default_factory=list)
    ungated: bool = False


def blockers(ws: Workspace, record: RunRecord) -> list[str]:
    """Why ``record`` may not be promoted (empty when it may), checked against the tier definitions."""
    tiers = ws.config.gates.required_for_promote
    proof = prove(record, required_tiers=tiers, repo=ws.repo, definitions=required_gates(ws, record, tiers))
    return [*proof.hard, *proof.soft] + (["no gate tier is configured for promotion"] if proof.ungated else [])


def required_gates(ws: Workspace, record: RunRecord, tiers: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The names of the required gates of each tier in ``tiers``, read from the run's own gate definitions.

    Raises:
        ConfigError: a tier's gate file is missing or malformed, or the run's profile is gone.
    """
    from ds4sync.gates.tiers import load_tier

    profile = for_run(ws, record).profile
    return {tier: tuple(g.name for g in load_tier(profile, tier) if g.definition.required) for tier in tiers}


def prove(
    record: RunRecord,
    *,
    required_tiers: tuple[str, ...],
    definitions: Mapping[str, tuple[str, ...]],
    repo: GitRepo | None = None,
) -> Proof:
    """Check that the run proves its sync branch's head; see :class:`Proof`.

    ``definitions`` maps each required tier to the names of its required gates (:func:`required_gates`):
    each must have a green result on the head, whatever the record happens to hold.
    """
    head = _sync_head(record, repo)
    proof = Proof(commit=head, ungated=not required_tiers)
    _check_merge(record, proof, repo)
    _check_phases(record, proof)
    tree = _tree(repo, head)
    ran_on: set[str] = set()
    for tier in required_tiers:
        result = record.results.gates.get(tier)
        if result is None:
            proof.hard.append(f"required tier '{tier}' has not run")
            continue
        ran_on |= _check_tier(result, definitions.get(tier, ()), proof, tree)
    moved = _moved_after(repo, ran_on - {str(head)}, head)
    if moved:
        proof.hard.insert(0, moved)
    return proof


def _check_merge(record: RunRecord, proof: Proof, repo: GitRepo | None) -> None:
    merged = record.results.merge.merge_commit if record.results.merge is not None else None
    head = proof.commit
    if head is None:
        proof.hard.append(f"the sync branch {record.sync_branch} does not exist")
    if not merged:
        proof.hard.append("the merge is not committed")
    elif repo is not None and head is not None and not repo.is_ancestor(merged, head):
        proof.hard.append(f"{record.sync_branch} does not contain the merge commit {merged[:12]}")


def _check_phases(record: RunRecord, proof: Proof) -> None:
    """Every phase before promote, in pipeline order: one that failed or waits is a blocker
    ``--allow-blockers`` may override; one that never ran before any such phase is no proof at all."""
    from ds4sync.pipeline import PHASES  # the phase names, in order; imported only when promoting

    states = {p.name: record.phases.get(p.name, PhaseState()) for p in PHASES}
    stopped = False
    for name, state in states.items():
        if state.status in ("failed", "needs-person", "running"):
            proof.soft.append(f"phase '{name}' is {state.status}")
            stopped = True
        elif state.status == "pending" and not stopped:  # after a stopped phase, it follows from that one
            proof.hard.append(f"phase '{name}' has not run")
    verify = record.results.verify
    head = proof.commit
    if states["verify"].status != "done" or head is None or verify is None:
        return
    if verify.commit != head:
        proof.hard.append(f"verify ran on {_short(verify.commit)}, not on the head {head[:12]}")
    elif verify.dirty:
        proof.hard.append(f"verify ran on uncommitted changes ({', '.join(verify.dirty[:3])})")


def _check_tier(result: TierResult, required: tuple[str, ...], proof: Proof, tree: str | None) -> set[str]:
    """Add the tier's blockers to ``proof``; return the commits its gates ran on.

    Every gate ``required`` by the tier's definition must have a result that ran (a gate skipped by
    selection counts only as ``cached``: a pass on identical inputs); a missing one is no proof.
    """
    tier, head, untracked = result.tier, proof.commit, result.untracked
    before = (len(proof.hard), len(proof.soft))
    recorded = {g.name: g for g in result.gates}
    missing = [name for name in required if name not in recorded]
    if missing:
        proof.hard.append(
            f"required gate(s) {', '.join(f'{tier}/{n}' for n in missing)} have no result "
            f"(recorded: {', '.join(recorded) or 'none'})"
        )
    if not result.gates:
        proof.hard.append(f"required tier '{tier}' has no gates")
    ran_on = set()
    for gate in result.gates:
        label = f"{tier}/{gate.name}"
        ran_on.add(str(gate.commit))
        if gate.commit != head:
            proof.hard.append(f"gate {label} ran on {_short(gate.commit)}, not on {_short(head)}")
        elif tree is not None and gate.tree != tree:
            extra = f"; untracked: {', '.join(untracked[:5])}" if untracked else ""
            proof.hard.append(f"gate {label} ran on a tree with uncommitted changes ({_short(gate.tree)}{extra})")
        if not (gate.required or gate.name in required) or gate_green(gate.status):
            continue
        if not gate_ran(gate.status):  # skipped by selection with no pass on identical inputs, or not runnable
            why = gate.reason or "no reason recorded"
            proof.hard.append(f"required gate {label} is {gate.status} ({why}): not proven")
        else:  # failed, error, or environment-only failures (incomplete), which never count as passing
            proof.soft.append(f"required gate {label} is {gate.status}")
    if not result and before == (len(proof.hard), len(proof.soft)):  # e.g. only optional gates, none green
        proof.hard.append(f"required tier '{tier}' is {result.status}: none of its gates proved anything")
    proof.proven_by.append(f"{tier}: {len(result.gates)} gates")
    return ran_on


def _moved_after(repo: GitRepo | None, ran_on: set[str], head: str | None) -> str | None:
    """``the sync branch moved after the gates: <new commits>`` when the gates ran on an ancestor of ``head``."""
    if repo is None or head is None or len(ran_on) != 1:
        return None
    gated = next(iter(ran_on))
    if gated == "None" or not repo.resolve_commit(gated):
        return None
    if not repo.is_ancestor(gated, head):
        return f"the sync branch was rewritten after the gates ran on {gated[:12]} (now {head[:12]})"
    log = repo.oneline_log(gated, head)
    shown = "; ".join(log[:5]) + (f"; and {len(log) - 5} more" if len(log) > 5 else "")
    return f"the sync branch moved after the gates ran on {gated[:12]}: {len(log)} new commit(s): {shown}"


def _sync_head(record: RunRecord, repo: GitRepo | None) -> str | None:
    if repo is None:
        return record.results.merge.merge_commit if record.results.merge is not None else None
    return repo.resolve_commit(f"refs/heads/{record.sync_branch}")


def _notes(result: PromoteResult, proof: Proof) -> list[str]:
    """The record's notes on a promote: what was overridden or left behind, and a finish after a kill."""
    notes = [f"promoted despite: {'; '.join(proof.soft)}"] if proof.soft else []
    if proof.ungated:
        notes.append(UNGATED_NOTE)
    if result.left_behind:
        notes.append(f"not promoted, left in the sync worktree: {', '.join(result.left_behind[:10])}")
    if result.completed_after_kill:
        notes.append(f"{result.branch} had moved to {result.new_head[:12]} before an interruption; promote recorded it")
    return notes


def _left_behind(record: RunRecord) -> list[str]:
    """Paths of the sync worktree that differ from its HEAD or are untracked (not ignored): in no commit."""
    path = Path(record.worktree)
    if not (path / ".git").exists():
        return []
    worktree = GitRepo(path)
    return sorted({*worktree.tracked_changes(), *worktree.untracked_paths()})


def _tree(repo: GitRepo | None, commit: str | None) -> str | None:
    if repo is None or commit is None:
        return None
    return repo.tree_id(commit)


def _short(sha: Any) -> str:
    return str(sha)[:12] if sha else "no recorded commit"


def promote(
    ws: Workspace,
    *,
    run_id: str | None = None,
    allow: bool = False,
    allow_ungated: bool = False,
    progress: Callable[[str], None] | None = None,
) -> PromoteResult:
    """Fast-forward the fork branch to the run's proven sync head.

    Args:
        run_id: the run (default: the active one, else the latest).
        allow: promote despite failed gates or phases (recorded); never despite an unproven commit.
        allow_ungated: promote although no tier is configured for promotion (recorded loudly).

    When the fork branch is checked out in a clean work tree, that tree is updated too.

    Raises:
        AlreadyPromoted: the run was promoted before (a StateError).
        StateError: the commit is not proven, blockers remain, the fork branch moved since the
            run started, or the branch is checked out in a work tree with uncommitted changes.
    """
    with ws.store.lock("promote"):
        recovered = recover(ws.repo, ws.store.root)
        record = ws.store.resolve(run_id)
        from ds4sync.runner import stop_leftover_children

        stop_leftover_children(ws, record, progress or (lambda _m: None))
        repo, branch = ws.repo, record.fork.branch
        if record.results.promote is not None:
            raise AlreadyPromoted(record.run_id, record.results.promote)
        tiers = ws.config.gates.required_for_promote
        proof = prove(record, required_tiers=tiers, repo=repo, definitions=required_gates(ws, record, tiers))
        _refuse_unproven(ws, record, proof, allow=allow, allow_ungated=allow_ungated)
        new_head = proof.commit
        assert new_head is not None, "a proof without hard blockers names its commit"
        rollback = f"refs/ds4sync/rollback/{record.run_id}"
        after_kill = promoted_before_kill(repo, record, new_head)
        if after_kill:  # promoted before a kill; the record write is what is left
            current, holder = record.fork.head_before, None
        else:
            current, holder = _fast_forward(ws, record, new_head, rollback)
        result = PromoteResult(
            branch=branch,
            old_head=current,
            new_head=new_head,
            rollback_ref=rollback,
            promoted_at=now_iso(),
            tree=_tree(repo, new_head),
            proven_by=tuple(proof.proven_by),
            ungated=proof.ungated,
            overridden=tuple(proof.soft),
            worktree_updated=str(holder.path) if holder is not None else None,
            left_behind=tuple(_left_behind(record)),
            completed_after_kill=after_kill,
        )
        record.results.promote = result
        record.status = "promoted"
        record.notes.extend([*([recovered] if recovered else []), *_notes(result, proof)])
        update_run(ws, record, report=record.results.report is not None)  # the report says what happened to it
        return result


def _fast_forward(ws: Workspace, record: RunRecord, new_head: str, rollback: str) -> tuple[str, GitRepo | None]:
    """Move the fork branch from the head the run started from to ``new_head``, the old head kept at
    ``rollback``; the old head, and the clean work tree that had the branch checked out (updated too), if any.

    Raises:
        StateError: the branch moved since the run started, the sync branch does not contain it, or it is
            checked out in a work tree with uncommitted changes.
    """
    repo, branch = ws.repo, record.fork.branch
    current = repo.branch_head(branch)
    if current != record.fork.head_before:
        raise StateError(
            f"{branch} moved since the run started ({record.fork.head_before[:12]} -> {current[:12]})",
            where=str(repo.path),
            fix="run a new sync from the current fork head",
        )
    if not repo.is_ancestor(current, new_head):
        raise StateError(
            f"{record.sync_branch} does not contain {branch}",
            where=str(repo.path),
            fix="the sync branch was rewritten; start a new sync",
        )
    holder = _clean_checkout_of(repo, branch)
    repo.update_ref(rollback, current, message=f"ds4sync rollback {record.run_id}")
    fault.point("promote.after-rollback-ref")
    move = ForkMove(
        run_id=record.run_id,
        branch=branch,
        old=current,
        new=new_head,
        holder=str(holder.path) if holder is not None else None,
    )
    move_fork(repo, ws.store.root, move, message=f"ds4sync promote {record.run_id}")
    fault.point("promote.after-update-ref")
    return current, holder


def promoted_before_kill(repo: GitRepo, record: RunRecord, proven: str | None = None) -> bool:
    """Whether a promote of ``record`` moved the fork branch and was killed before it recorded that.

    The branch is at ``proven`` (default: the sync branch's head) and the run's rollback ref at the
    fork head the run started from; ``promote`` then only records it.
    """
    if record.results.promote is not None:
        return False
    target = proven or repo.resolve_commit(f"refs/heads/{record.sync_branch}")
    rollback = repo.resolve_commit(f"refs/ds4sync/rollback/{record.run_id}")
    now = repo.resolve_commit(f"refs/heads/{record.fork.branch}")
    return target is not None and now == target != record.fork.head_before and rollback == record.fork.head_before


def _refuse_unproven(ws: Workspace, record: RunRecord, proof: Proof, *, allow: bool, allow_ungated: bool) -> None:
    """Raise the StateError that says why ``proof`` does not allow promoting (nothing when it does)."""
    where = str(ws.store.record_path(record.run_id))
    if proof.hard:
        raise StateError(
            f"run {record.run_id} does not prove {record.sync_branch}: {'; '.join(proof.hard)}",
            where=where,
            fix="commit (or remove) what changed in the sync worktree, then `ds4sync resume`: it runs the "
            "proving phases again on the sync head",
        )
    if proof.soft and not allow:
        raise StateError(
            f"run {record.run_id} cannot be promoted: {'; '.join(proof.soft)}",
            where=where,
            fix="fix and `ds4sync resume`, or pass --allow-blockers to promote anyway",
        )
    if proof.ungated and not allow_ungated:
        raise StateError(
            f"run {record.run_id}: no gate tier is configured for promotion, so nothing proved {record.sync_branch}",
            where=str(ws.config.source or ws.repo.path),
            fix="set gates.tiers (or gates.promote_tiers) in ds4sync.yaml and `ds4sync resume`, "
            "or pass --allow-ungated (recorded in the run and its report)",
        )


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
