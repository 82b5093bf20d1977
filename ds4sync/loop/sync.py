"""Start, resume, abort and plan a sync: the core functions behind the CLI's run commands."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from ds4sync.core import fault
from ds4sync.core.errors import Ds4syncError, GitError, StateError
from ds4sync.core.git import SHA_RE, GitRepo, check_user_ref
from ds4sync.core.model import updated
from ds4sync.core.record import ForkRef, PhaseState, UpstreamRef, make_run_id
from ds4sync.loop.handoff import refuse_uncommitted
from ds4sync.merge.plan import plan_merge
from ds4sync.merge.provenance import load_owners
from ds4sync.models.merge_results import MergeSummary
from ds4sync.runner import (
    Phase,
    RunContext,
    RunOutcome,
    Workspace,
    clear_stale_lock,
    for_run,
    require_branch,
    require_clone_complete,
    resolve_upstream_ref,
    run_phases,
    stop_dead_run_children,
    stop_leftover_children,
    update_run,
)

if TYPE_CHECKING:
    from ds4sync.models.record import RunRecord
    from ds4sync.models.semantic_results import SemanticResult

Progress = Callable[[str], None]


def _check_inputs(ws: Workspace, ref: str) -> str:
    """Checks that need no lock and create nothing: ref and branch syntax, a complete clone."""
    where = str(ws.repo.path)
    check_user_ref(ref, what="upstream ref", where=where)
    branch = require_branch(ws)
    check_user_ref(branch, what="fork branch", where=where)
    require_clone_complete(ws.repo)
    return branch


def _refs(ws: Workspace, ref: str, *, fetch: bool = False) -> tuple[str, str, str, str]:
    """The fork branch, its head, the upstream SHA and which ref that was read from (inputs checked)."""
    branch = _check_inputs(ws, ref)
    fork_sha = ws.repo.branch_head(branch)
    upstream_sha, used = resolve_upstream_ref(ws, ref, fetch=fetch)
    return branch, fork_sha, upstream_sha, used


def _preflight(ws: Workspace, ref: str, *, fetch: bool = False) -> tuple[str, str, str, str, str]:
    branch, fork_sha, upstream_sha, used = _refs(ws, ref, fetch=fetch)
    return branch, fork_sha, upstream_sha, _merge_base(ws, ref, branch, fork_sha, upstream_sha), used


def _merge_base(ws: Workspace, ref: str, branch: str, fork_sha: str, upstream_sha: str) -> str:
    base = ws.repo.merge_base(fork_sha, upstream_sha)
    if base is None:
        raise GitError(
            f"'{ref}' and '{branch}' share no history",
            where=str(ws.repo.path),
            fix="check that the upstream ref belongs to this fork's upstream",
        )
    return base


def _upstream_branch(ws: Workspace, ref: str, sha: str, say: Progress) -> str | None:
    """The upstream branch a run may say it merges: ``ref`` when it names one; for a SHA, the configured
    upstream branch only when git finds the SHA on it (``refs/remotes/<remote>/<branch>``, or the local
    branch without an upstream remote); else None, and the report names the commit by its SHA."""
    if not SHA_RE.match(ref):
        return ref
    name, remote = ws.config.upstream.ref, ws.config.upstream.remote
    tip_ref = f"refs/remotes/{remote}/{name}" if ws.repo.remote_url(remote) is not None else f"refs/heads/{name}"
    tip = ws.repo.resolve_commit(tip_ref)
    if tip is not None and ws.repo.is_ancestor(sha, tip):
        return name
    say(f"note: {sha[:12]} is not on {tip_ref} (as git sees it here); the report names it by its SHA, not as {name}")
    return None


def _new_run_id(ws: Workspace, upstream_sha: str) -> str:
    """A run id whose time sorts after the newest run's (caller holds the store's lock): ids order the runs,
    and "the latest run" is the last; two runs started in one second would order by SHA instead. Waits for
    the next second at most; a newest run from a later time (a clock set back) is not waited for."""
    ids = ws.store.run_ids()
    newest = ids[-1][:15] if ids else ""
    run_id = make_run_id(upstream_sha)
    while run_id[:15] == newest:
        time.sleep(0.05)
        run_id = make_run_id(upstream_sha)
    return run_id


def plan(ws: Workspace, ref: str, *, fetch: bool = False, semantic: bool = True) -> MergeSummary:
    """Predict the merge of ``ref`` into the fork branch; touches no work tree, takes no lock.

    ``semantic``: also run the semantic check on merge-tree's tree (``summary.semantic``; None without it).

    Raises:
        GitError, ConfigError: bad input (a bad ref, no such branch, unrelated histories).
    """
    branch, fork_sha, upstream_sha, used = _refs(ws, ref, fetch=fetch)
    base = _merge_base(ws, ref, branch, fork_sha, upstream_sha)
    ws.repo.merge_tree(fork_sha, upstream_sha)  # kept on the repo object: the two predictions share it
    # The semantic check is Python (parsing) and the rest mostly git processes (the `git log -L` walks of the
    # conflict hunks): side by side they take about as long as the longer of the two.
    with ThreadPoolExecutor(max_workers=1) as pool:
        checked = pool.submit(_plan_semantic, ws, fork_sha, upstream_sha) if semantic else None
        summary = plan_merge(
            ws.repo,
            fork_sha=fork_sha,
            upstream_sha=upstream_sha,
            merge_base=base,
            patchsets=load_owners(ws.profile / "patches"),
        )
        found = checked.result() if checked is not None else None
        return updated(summary, fork_branch=branch, upstream_resolved_from=used, semantic=found)


def _plan_semantic(ws: Workspace, fork_sha: str, upstream_sha: str) -> SemanticResult:
    from ds4sync.semantic.plan import plan_semantic

    return plan_semantic(ws.repo, fork_sha=fork_sha, upstream_sha=upstream_sha, patches=ws.profile / "patches")


def start_merge(
    ws: Workspace,
    ref: str,
    *,
    progress: Progress | None = None,
    fetch: bool = False,
    phases: Sequence[Phase] | None = None,
    stop_after: str | None = None,
    deadline: float | None = None,
) -> RunOutcome:
    """Merge upstream ``ref`` into the fork branch in a new sync worktree.

    Checks everything first (repo, branch, upstream ref, no other run), then records
    the run and goes through the phases. The fork branch and the user's checkout are
    never modified.

    Raises:
        GitError, ConfigError, StateError: bad input; nothing was changed.
        NeedsPersonError: another run waits for a person or was interrupted.
    """
    say = progress or (lambda _m: None)
    _check_inputs(ws, ref)  # before the lock: a bad ref or a shallow clone leaves nothing behind
    with ws.store.lock(f"merge {ref}") as stale:
        _report_stale(stale, say)
        stop_dead_run_children(ws, say)
        ws.store.require_no_active_run()
        branch, fork_sha, upstream_sha, _, used = _preflight(ws, ref, fetch=fetch)
        if ws.repo.is_ancestor(upstream_sha, fork_sha):
            raise AlreadyMerged(
                f"{ref} ({upstream_sha[:12]}) is already merged into {branch}",
                where=str(ws.repo.path),
                fix="nothing to do; pick a newer upstream ref",
            )
        record = _new_record(ws, ref, branch=branch, fork_sha=fork_sha, upstream_sha=upstream_sha, used=used, say=say)
        _require_free_sync_branch(ws, record.sync_branch)
        if stale:
            record.notes.append(f"a ds4sync command (pid {stale.get('pid')}) had died holding the lock")
        update_run(ws, record)
        ctx = RunContext(ws, record, say, deadline=deadline)
        return run_phases(ctx, phases or _phases(), stop_after=stop_after or _merge_stop())


class AlreadyMerged(StateError):
    """The upstream commit is already in the fork branch: there is nothing to sync."""


class SyncBranchTaken(StateError):
    """The sync branch a new run would create belongs to an earlier run (``run_id``, ``run_status``)."""

    def __init__(
        self,
        branch: str,
        *,
        run_id: str | None,
        run_status: str | None,
        where: str,
        state_dir: str | None = None,
        searched: str | None = None,
    ) -> None:
        """``state_dir``: the other state dir whose run owns it (None: this one); ``searched``: this state dir."""
        opt = f" --state-dir {state_dir}" if state_dir else ""
        owner = f"run {run_id} ({run_status})" + (f" of the state dir {state_dir}" if state_dir else "")
        if not run_id:
            owner = f"no run in {searched or 'this state dir'} made it (a branch of your own, or of another state dir)"
            fix = "delete or rename that branch, set merge.sync_branch, or pass the --state-dir of the run that made it"
        elif run_status == "done":
            fix = (
                f"promote it (`ds4sync promote{opt} --run {run_id}`), or drop it with "
                f"`ds4sync abort{opt} --run {run_id}`"
            )
        elif run_status in ("promoted", "aborted"):  # the run is over; only its branch is left
            fix = (
                f"that run is over: keep its branch under another name (`git branch -m {branch} {branch}-{run_id}`) "
                f"or delete it (`git branch -D {branch}`), or set merge.sync_branch"
            )
        else:
            fix = f"go on with `ds4sync resume{opt}`, or drop it with `ds4sync abort{opt} --run {run_id}`"
        super().__init__(f"sync branch {branch} already exists: {owner}", where=where, fix=fix)
        self.run_id = run_id
        self.run_status = run_status


def _new_record(
    ws: Workspace, ref: str, *, branch: str, fork_sha: str, upstream_sha: str, used: str, say: Progress
) -> RunRecord:
    """The record of a new run merging ``ref`` into ``branch``, under a run id no run folder holds yet."""
    from ds4sync.merge.phases import backup_branch_name
    from ds4sync.models.record import RunRecord

    run_id = _free_run_id(ws, upstream_sha)
    config = ws.config
    return RunRecord(
        run_id=run_id,
        repo=str(ws.repo.path),
        state_dir=str(ws.store.root),
        profile=str(ws.profile),
        upstream=UpstreamRef(
            remote=config.upstream.remote,
            url=config.upstream.url,
            ref=ref,
            sha=upstream_sha,
            name=config.upstream.name,
            branch=_upstream_branch(ws, ref, upstream_sha, say),
            resolved_from=used,
        ),
        fork=ForkRef(branch=branch, head_before=fork_sha, name=config.fork.name),
        sync_branch=config.merge.sync_branch.format(
            branch=branch.replace("/", "-"), upstream=upstream_sha[:12], run=run_id
        ),
        worktree=str(ws.store.worktree_path(run_id)),
        backup_ref=f"refs/ds4sync/backup/{run_id}",
        backup_branch=backup_branch_name(config.merge.backup_branch, branch=branch),
        required_tiers=config.gates.required_for_promote,
    )


def _free_run_id(ws: Workspace, upstream_sha: str) -> str:
    """A new run id for ``upstream_sha``; ``-2``, ``-3``... on it while a run folder of that id exists."""
    run_id = _new_run_id(ws, upstream_sha)
    suffix = 1
    while ws.store.run_dir(run_id).exists():
        suffix += 1
        run_id = f"{make_run_id(upstream_sha)}-{suffix}"
    return run_id


def _require_free_sync_branch(ws: Workspace, branch: str) -> None:
    if not ws.repo.ref_exists(f"refs/heads/{branch}"):
        return
    records = (ws.store.load(run_id) for run_id in reversed(ws.store.run_ids()))
    owner = next((record for record in records if record.sync_branch == branch), None)
    other = None if owner else _owner_elsewhere(ws, branch)
    if other is not None:
        owner = other
    raise SyncBranchTaken(
        branch,
        run_id=owner.run_id if owner else None,
        run_status=owner.status if owner else None,
        where=str(ws.repo.path),
        state_dir=other.state_dir if other is not None else None,
        searched=str(ws.store.root),
    )


def _owner_elsewhere(ws: Workspace, branch: str) -> RunRecord | None:
    """The run of another state dir whose sync branch ``branch`` is: git says where it is checked out, and a
    sync worktree lives at ``<state dir>/worktrees/<run id>`` beside that state dir's ``runs/<run id>/``."""
    from ds4sync.models.record import RecordStore

    path = ws.repo.checked_out_in(branch)
    if path is None or Path(path).parent.name != "worktrees":
        return None
    store = RecordStore(Path(path).parent.parent)
    try:
        record = store.load(Path(path).name)
    except StateError:
        return None
    return record if record.sync_branch == branch else None


def _report_stale(stale: dict | None, say: Progress) -> None:
    if stale:
        say(
            f"warning: a ds4sync command (pid {stale.get('pid')}, `{stale.get('command')}` since "
            f"{stale.get('since')}) died holding this repository's lock; checking its run"
        )


def resume(
    ws: Workspace,
    *,
    progress: Progress | None = None,
    phases: Sequence[Phase] | None = None,
    stop_after: str | None = None,
    deadline: float | None = None,
    accept_markers: Sequence[str] = (),
    accept_proposals: bool = False,
) -> RunOutcome:
    """Go on with the active run from its first unfinished phase.

    A failed run is resumed too: its failed phase runs again (after the person's fix); so is a
    finished run that was not promoted (a commit added to its sync branch is proven). Child
    process groups a killed run left behind are stopped first, before the worktree is touched.
    When the sync branch moved since verify or the gates ran (a fix committed in the worktree),
    the proving phases (verify, build, gate, report) run again on the new head. A run waiting
    in ``resolve`` first has the person's resolutions accepted (refused while conflict markers
    remain, except in the paths named in ``accept_markers``, recorded as kept on purpose; validated proposals
    are staged only with ``accept_proposals``).

    Raises:
        StateError: no active or failed run, ``accept_markers`` given while no conflict waits, or changes no
            commit holds in the worktree once the phases that take a person's work are done
            (:func:`~ds4sync.loop.handoff.refuse_uncommitted`).
        NeedsPersonError: conflict markers or unmerged paths remain.
    """
    say = progress or (lambda _m: None)
    with ws.store.lock("resume") as stale:
        _report_stale(stale, say)
        record = ws.store.current() or _failed_latest(ws)
        if record is None:
            raise StateError(
                "no run to resume", where=str(ws.store.root), fix="start one with `ds4sync merge <upstream-ref>`"
            )
        ws = for_run(ws, record)  # the profile the run was started with, not the shipped one
        stop_leftover_children(ws, record, say)
        refuse_uncommitted(record)
        _reprove_if_moved(record, say)
        ctx = RunContext(
            ws,
            record,
            say,
            deadline=deadline,
            accept_markers=tuple(accept_markers),
            accept_proposals=accept_proposals,
        )
        if accept_markers and record.phase("resolve").status != "needs-person":
            raise StateError(
                f"--accept-markers {' '.join(accept_markers)}: no conflict of run {record.run_id} waits for a person",
                where=record.worktree,
                fix="run `ds4sync resume` without it",
            )
        clear_stale_lock(ctx)
        return run_phases(ctx, phases or _phases(), stop_after=stop_after)


def abort(ws: Workspace, *, run_id: str | None = None) -> RunRecord:
    """Throw a run away: remove its worktree and sync branch; keep the backup ref.

    Works when the worktree is locked or its folder was deleted; no other worktree (the
    user's own, missing or not) is pruned.

    Without ``run_id``: the active run, else the latest run if it failed or finished
    without being promoted. The fork branch is not touched.

    Raises:
        StateError: no such run, or it was already aborted or promoted.
    """
    with ws.store.lock("abort"):
        from ds4sync.loop.forkmove import recover
        from ds4sync.loop.promote import promoted_before_kill

        recover(ws.repo, ws.store.root)
        record = abort_target(ws, run_id=run_id)
        if promoted_before_kill(ws.repo, record):
            branch, rollback = record.fork.branch, f"refs/ds4sync/rollback/{record.run_id}"
            raise StateError(
                f"run {record.run_id} is promoted, not untouched: {branch} already is its sync head "
                f"(a promote moved it and was stopped before it recorded that); nothing dropped",
                where=str(ws.repo.path),
                fix=f"`ds4sync promote` records it; the fork head before it is kept at {rollback}",
            )
        stop_leftover_children(ws, record, lambda _m: None)
        fault.point("abort.after-stop-children")
        repo = ws.repo.main_worktree()  # not the sync worktree itself, when the command was run inside it
        repo.worktree_remove(Path(record.worktree))
        fault.point("abort.after-worktree-remove")
        repo.delete_branch(record.sync_branch)
        from ds4sync.merge.rerere import ResolutionStore

        ResolutionStore(for_run(ws, record).resolutions_dir).drop_staging()  # a killed export's half entry
        record.status = "aborted"
        record.notes.append(f"aborted; backup kept at {record.backup_ref}")
        report = record.results.report is not None  # the written report and summary state the final status too
        try:
            ws = for_run(ws, record)
        except Ds4syncError as exc:
            report = False
            record.notes.append(f"the report was not written again after the abort: {exc}")
        update_run(ws, record, report=report)
        return record


PROVING_PHASES = ("verify", "semantic", "build", "gate", "report")


def _failed_latest(ws: Workspace) -> RunRecord | None:
    """The latest run when it failed or finished unpromoted: resume runs its failed phase again, or
    proves a sync head that moved since."""
    latest = ws.store.latest()
    if latest is not None and latest.status in ("failed", "done") and latest.results.promote is None:
        return latest
    return None


def _reprove_if_moved(record: RunRecord, say: Progress) -> None:
    """Send the proving phases back to pending when the sync worktree's HEAD is not what they proved, or
    when a gate tier ran on a tree that is not HEAD's (uncommitted changes, or untracked files, since
    committed or removed): such a green proves no commit."""
    from ds4sync.runner import worktree_head

    head = worktree_head(record)
    verify = record.results.verify
    proved = verify.commit if verify is not None and record.phase("verify").status == "done" else None
    if head is None or proved is None:
        return
    if proved == head:
        head_tree = GitRepo(Path(record.worktree)).tree_id(head)
        off = sorted(tier for tier, result in record.results.gates.items() if result.tree not in (None, head_tree))
        if not off:
            return
        tiers = ", ".join(off)
        say(f"tier(s) {tiers} ran on a tree that is not {head[:12]}'s (uncommitted or untracked files); gating again")
        record.notes.append(f"gates of {tiers} ran on a tree other than {head[:12]}'s; proving phases run again")
    else:
        say(f"the sync branch moved since verify ({proved[:12]} -> {head[:12]}); verifying and gating the new head")
        record.notes.append(f"sync branch moved {proved[:12]} -> {head[:12]} after verify; proving phases run again")
    for name in PROVING_PHASES:
        if name in record.phases:
            record.phases[name] = PhaseState()
    record.results.gates = {}


def abort_target(ws: Workspace, *, run_id: str | None = None) -> RunRecord:
    """The run ``abort`` would drop: ``run_id``, else the active run, else the latest.

    Raises:
        StateError: no such run, or it was already aborted or promoted.
    """
    record = ws.store.load(run_id) if run_id else (ws.store.current() or ws.store.latest())
    if record is None or record.status in ("aborted", "promoted") or record.results.promote is not None:
        what = f"run {record.run_id} is {record.status}" if record is not None else "there is no run"
        raise StateError(f"nothing to abort: {what}", where=str(ws.store.root), fix="see `ds4sync status --all`")
    return record


def _phases() -> tuple[Phase, ...]:
    from ds4sync.pipeline import PHASES  # imported only by commands that run phases: `plan` stays light

    return PHASES


def _merge_stop() -> str:
    from ds4sync.pipeline import MERGE_STOP_PHASE

    return MERGE_STOP_PHASE
