"""The ``replay`` and ``verify`` phases: re-apply patch-sets after the merge, then prove them.

replay   in dependency order, per patch-set: the fork branch does not carry it (catalogue
         ``branches`` / ``carried_when``, decided on the fork head before the merge) ->
         not-carried; drop_when holds on upstream -> landed-upstream; invariants hold ->
         retained (only advisory ones fail -> unconfirmed, never counted as holding);
         else ``git apply --3way`` of its patches -> reapplied
         (one commit with a ``Patch-set: <id>`` trailer); apply fails -> needs-adaptation
         (stops for a person; ``ds4sync resume`` commits the adapted tree and goes on).
verify   every invariant of every patch-set on the final tree; a blocking violation fails.

Both run in the sync worktree (``record.worktree``) after the merge commit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ds4sync.core import fault
from ds4sync.core.errors import ConfigError
from ds4sync.core.git import GitRepo
from ds4sync.core.model import updated
from ds4sync.models.patchsets_results import CarryScope, ReplayEntry, ReplayResult, VerifyResult, verify_message
from ds4sync.patchsets.check import (
    applies,
    check_tree,
    drop_evidence,
    not_carried,
    status_of,
    with_baseline,
)
from ds4sync.patchsets.invariants import evaluate
from ds4sync.patchsets.model import Catalogue, PatchSet, load_catalogue
from ds4sync.patchsets.tree import CommitTree, FolderTree
from ds4sync.runner import Phase, PhaseOutcome, RunContext

TRAILER = "Patch-set"


def patches_dir(ctx: RunContext) -> Path:
    """``<profile>/patches`` of the run's workspace."""
    return ctx.ws.profile / "patches"


def _catalogue_or_stop(ctx: RunContext) -> tuple[Path, Catalogue, list[PatchSet]] | PhaseOutcome:
    """The run's patches folder and its catalogue, or a needs-person outcome naming the malformed file (fix it,
    then resume)."""
    folder = patches_dir(ctx)
    try:
        return (folder, *load_catalogue(folder))
    except ConfigError as exc:
        return PhaseOutcome(
            "needs-person",
            exc.one_line(),
            details=(exc.one_line(),),
            next_steps=("fix the patch-set file, then `ds4sync resume`",),
        )


def fork_carry(ctx: RunContext, catalogue: Catalogue, patchsets: list[PatchSet]) -> tuple[dict[str, str], CarryScope]:
    """``({id: why not carried}, scope)`` for the run's fork branch, decided on the fork head before the merge.

    Carried-ness is a property of the fork branch, never of the merged tree: a merge that
    drops a feature must fail verify, not turn the feature into not-carried.
    """
    from ds4sync.patchsets.commands import history_lookup

    head = ctx.record.fork.head_before
    fork_tree = CommitTree(ctx.ws.repo, head)
    why = not_carried(
        catalogue,
        patchsets,
        branch=ctx.record.fork.branch,
        fork_tree=fork_tree,
        history_has=history_lookup(ctx.ws.repo, head),
    )
    return why, CarryScope(branch=ctx.record.fork.branch, head=head, tree_label=fork_tree.label)


def replay(ctx: RunContext) -> PhaseOutcome:
    """Replay every patch-set onto the merged tree; stop at the first that needs adaptation."""
    loaded = _catalogue_or_stop(ctx)
    if isinstance(loaded, PhaseOutcome):
        return loaded
    folder, catalogue, patchsets = loaded
    wt = ctx.worktree
    ok, detail = applies(FolderTree(wt.path), catalogue)
    if not ok:
        result = ReplayResult(patches_dir=str(folder), applicable=False, applies_detail=detail)
        return PhaseOutcome("skipped", detail, result=result)
    prior = ctx.record.results.replay
    entries = {e.id: e for e in prior.entries} if prior else {}
    by_id = {ps.id: ps for ps in patchsets}
    if ctx.recovering:
        recovered = recover(ctx, wt, by_id, pending=prior.pending if prior else None)
        entries.update(recovered)
        if prior and prior.pending in recovered:
            prior = updated(prior, pending=None)
    dirty = None if prior and prior.pending in by_id else _foreign_changes(wt)
    if dirty:
        return PhaseOutcome(
            "needs-person",
            f"the sync worktree has uncommitted changes replay did not make: {', '.join(dirty[:5])}",
            details=tuple(dirty),
            next_steps=(f"commit or discard them in {wt.path} (`git status`), then `ds4sync resume`",),
        )
    if prior and prior.pending in by_id:
        entry = accept_adaptation(ctx, wt, by_id[prior.pending], entries[prior.pending])
        entries[entry.id] = entry
        if entry.status == "needs-adaptation":
            return _stop(ctx, folder, entries, entry)
    uncarried, _scope = fork_carry(ctx, catalogue, patchsets)
    for ps in patchsets:
        if ps.id in entries and entries[ps.id].status != "needs-adaptation":
            continue
        ctx.progress(f"replay {ps.id}")
        if ps.id in uncarried:
            entries[ps.id] = ReplayEntry(id=ps.id, title=ps.title, status="not-carried", detail=uncarried[ps.id])
            continue
        entry = replay_one(ctx, wt, ps)
        entries[ps.id] = entry
        if entry.status == "needs-adaptation":
            return _stop(ctx, folder, entries, entry)
    result = ReplayResult(patches_dir=str(folder), entries=tuple(entries[ps.id] for ps in patchsets))
    counts = ", ".join(f"{n} {status}" for status, n in sorted(result.counts().items())) or "no patch-sets"
    return PhaseOutcome(
        "done",
        f"patch-sets: {counts}",
        result=result,
        details=tuple(f"{e.id}: {e.status}: {e.detail}" for e in result.entries),
    )


def replay_one(ctx: RunContext, wt: GitRepo, ps: PatchSet) -> ReplayEntry:
    """Decide and do one patch-set: landed-upstream, retained, reapplied or needs-adaptation."""
    results = tuple(evaluate(FolderTree(wt.path), ps))
    upstream_sha = ctx.record.upstream.sha
    drop = ps.drop_when
    has_commit = None
    if drop and drop.upstream_has_commit:
        sha = ctx.ws.repo.resolve_commit(drop.upstream_has_commit)
        has_commit = sha is not None and ctx.ws.repo.is_ancestor(sha, upstream_sha)
    evidence = drop_evidence(drop, ps, upstream=CommitTree(ctx.ws.repo, upstream_sha), has_commit=has_commit)
    base: dict[str, Any] = {"id": ps.id, "title": ps.title, "invariants": results}
    if evidence:
        return ReplayEntry(
            **base,
            status="landed-upstream",
            evidence=tuple(evidence),
            detail="upstream makes it unnecessary: candidate to delete from the catalogue",
        )
    checked = [r for r in results if r.status != "deferred"]
    held = sum(r.status == "holds" for r in checked)
    if checked and status_of(results) == "holds":
        return ReplayEntry(**base, status="retained", detail=f"{held} invariant(s) hold on the merged tree")
    if checked and status_of(results) == "advisory-violations":
        advisory = len(checked) - held
        return ReplayEntry(
            **base,
            status="unconfirmed",
            detail=(
                f"{held} of {len(checked)} invariant(s) hold; {advisory} advisory invariant(s) violated "
                "(not counted as holding; confirm or fix them in patchset.yaml)"
            ),
        )
    if not checked and ps.patches and all(wt.apply_check(p, reverse=True) for p in ps.patch_files()):
        return ReplayEntry(**base, status="retained", detail="its patches are already in the merged tree")
    failing = "; ".join(r.detail for r in results if r.blocking_violation)
    if not ps.patches:
        return ReplayEntry(
            **base,
            status="needs-adaptation",
            detail=f"metadata-only patch-set and its invariants do not hold: {failing}",
        )
    return _apply(wt, ps, base)


def _apply(wt: GitRepo, ps: PatchSet, base: dict[str, Any]) -> ReplayEntry:
    for patch in ps.patch_files():
        outcome = wt.apply_3way(patch)
        if not outcome.ok:
            missing = not_applied(wt, patch, outcome.conflicted, outcome.rejects)
            what = (
                f"conflicts in {', '.join(outcome.conflicted)}"
                if outcome.conflicted
                else f"rejected hunks in {', '.join(outcome.rejects) or 'the patch'}"
            )
            said = f"; git said: {' | '.join(outcome.messages)}" if outcome.messages else ""
            return ReplayEntry(
                **base,
                status="needs-adaptation",
                conflicted=outcome.conflicted,
                rejects=outcome.rejects,
                not_applied=missing,
                git_said=outcome.messages,
                detail=f"{patch.name} does not apply: {what}; not applied: {', '.join(missing) or 'none'}{said}",
            )
    after = tuple(evaluate(FolderTree(wt.path), ps))
    note = "" if status_of(after) != "violated" else "; its invariants still fail (see verify)"
    if not wt.has_staged_changes():
        return ReplayEntry(
            **{**base, "invariants": after},
            status="retained",
            detail=f"its patches are already in the merged tree{note}",
        )
    fault.point(f"replay.applied.{ps.id}")
    sha = wt.commit(commit_message(ps, "Reapplied by ds4sync replay after the upstream merge."))
    fault.point(f"replay.committed.{ps.id}")
    return ReplayEntry(
        **{**base, "invariants": after},
        status="reapplied",
        commit=sha,
        detail=f"{len(ps.patches)} patch(es) applied with a three-way apply{note}",
    )


def not_applied(wt: GitRepo, patch: Path, conflicted: tuple[str, ...], rejects: tuple[str, ...]) -> tuple[str, ...]:
    """The files of ``patch`` that a failed apply left as HEAD has them (git skipped or refused them) or only
    half applied (conflicts, ``.rej`` files): every file a person must still bring in."""
    half = {*conflicted, *(r.removesuffix(".rej") for r in rejects)}
    return tuple(sorted(p for p in wt.patch_paths([patch]) if p in half or not _differs_from_head(wt, p)))


def _differs_from_head(wt: GitRepo, path: str) -> bool:
    """Whether the work-tree file differs from HEAD's (content or presence); the index does not count: a
    conflict git "resolved" to our side is still the old content."""
    file = wt.path / path
    now = file.read_bytes() if file.is_file() else None
    return now != wt.blob_bytes("HEAD", path)


def own_commits(wt: GitRepo, start: str) -> list[tuple[str, str]]:
    """``(sha, patch-set id)`` of the commits after ``start`` on HEAD's first-parent line that carry a
    ``Patch-set:`` trailer, oldest first: what replay committed (its own finished work)."""
    found = []
    for sha, ids in wt.first_parent_trailers(f"{start}..HEAD", TRAILER):
        if ids.strip():
            found.append((sha, ids.split(",")[0].strip()))
    return found


def recover(ctx: RunContext, wt: GitRepo, by_id: dict[str, PatchSet], *, pending: str | None) -> dict[str, ReplayEntry]:
    """After a kill inside replay: keep the patch-set commits it finished, drop what it left half done.

    Commits after the phase's start commit with a ``Patch-set:`` trailer are replay's own
    (reapplied, or the person's adaptation of ``pending``); a change applied but not committed
    (a kill between ``git apply --3way`` and the commit) is thrown away, so that neither that
    patch-set nor the next one can take it for its own, and the patch-set runs again. A
    person's uncommitted adaptation of ``pending`` is kept.

    Returns:
        The entries of the patch-sets found committed, by id.
    """
    start = ctx.start_commit or wt.head()
    entries: dict[str, ReplayEntry] = {}
    for sha, ps_id in own_commits(wt, start):
        ps = by_id.get(ps_id)
        if ps is None:
            continue
        adapted = ps_id == pending
        entries[ps_id] = ReplayEntry(
            id=ps.id,
            title=ps.title,
            status="adapted" if adapted else "reapplied",
            commit=sha,
            invariants=tuple(evaluate(CommitTree(wt, sha), ps)),
            detail=("adapted by a person" if adapted else "applied with a three-way apply")
            + " (its commit was recognised after an interruption)",
        )
    if pending is None or pending in entries:
        _discard_uncommitted(wt)
    ctx.progress(f"replay recovered {len(entries)} patch-set commit(s) after an interruption")
    return entries


def _discard_uncommitted(wt: GitRepo) -> None:
    wt.clear_stale_index_lock()
    wt.reset_hard("HEAD")
    wt.clean_untracked()


def _foreign_changes(wt: GitRepo) -> list[str]:
    """Tracked paths changed in the worktree: replay commits exactly one patch-set per commit, so it
    starts from a tree without changes it did not make."""
    return [line[3:] for line in wt.status_porcelain() if not line.startswith("??")]


def commit_message(ps: PatchSet, body: str) -> str:
    """``<title>`` + body + the ``Patch-set: <id>`` trailer."""
    return f"{ps.title}\n\n{body}\n\n{TRAILER}: {ps.id}\n"


def accept_adaptation(ctx: RunContext, wt: GitRepo, ps: PatchSet, entry: ReplayEntry) -> ReplayEntry:
    """On resume: commit the person's adapted tree for ``ps`` with the trailer.

    Refused (the entry stays needs-adaptation) while conflict markers remain, a file the apply left
    out (``not_applied``) is still unchanged in the worktree, or the patch-set's blocking invariants
    still fail.
    """
    for rej in entry.rejects:
        (wt.path / rej).unlink(missing_ok=True)
    changed = sorted({line[3:].split(" -> ")[-1] for line in wt.status_porcelain()} | set(entry.conflicted))
    marked = [path for path in changed if wt.has_markers(path)]
    if marked:
        return updated(entry, detail=f"conflict markers remain in {', '.join(marked)}")
    dropped = [p for p in entry.not_applied if not _differs_from_head(wt, p)]
    if dropped:
        said = f" (git said: {' | '.join(entry.git_said)})" if entry.git_said else ""
        return updated(
            entry,
            detail=f"files of the patch-set still not applied: {', '.join(dropped)}{said}; bring each "
            "in by hand, or fix the patch-set's patches and start a new sync",
        )
    results = tuple(evaluate(FolderTree(wt.path), ps))
    failing = [r for r in results if r.blocking_violation]
    if failing:
        return updated(
            entry,
            invariants=results,
            detail="invariants still fail after adaptation: " + "; ".join(r.detail for r in failing),
        )
    wt.add_all()
    sha = None
    if wt.has_staged_changes():
        sha = wt.commit(commit_message(ps, f"Adapted by a person during ds4sync run {ctx.record.run_id}."))
        fault.point(f"replay.adapted.{ps.id}")
    return updated(
        entry,
        status="adapted",
        commit=sha,
        invariants=results,
        detail=f"adapted by a person; run `ds4sync patches refresh {ps.id}` to update its patches",
    )


def _stop(ctx: RunContext, folder: Path, entries: dict[str, ReplayEntry], entry: ReplayEntry) -> PhaseOutcome:
    result = ReplayResult(patches_dir=str(folder), entries=tuple(entries.values()), pending=entry.id)
    listed = [
        *(f"conflict: {p}" for p in entry.conflicted),
        *(f"rejected hunks: {p}" for p in entry.rejects),
        *(f"not applied: {p}" for p in entry.not_applied if p not in entry.conflicted),
        *(f"git said: {line}" for line in entry.git_said),
    ]
    return PhaseOutcome(
        "needs-person",
        f"patch-set {entry.id} needs adaptation in {ctx.record.worktree}: {entry.detail}",
        result=result,
        details=tuple(listed) or (entry.detail,),
        next_steps=(
            f"adapt the tree in {ctx.record.worktree} until the invariants of {entry.id} hold "
            "(delete conflict markers; .rej files are removed for you)",
            "then `ds4sync resume` (it commits the adapted tree with a Patch-set trailer)",
            f"afterwards `ds4sync patches refresh {entry.id}` rewrites its patches",
        ),
    )


def verify(ctx: RunContext) -> PhaseOutcome:
    """Every invariant of every patch-set on the final tree; a blocking violation fails the run."""
    loaded = _catalogue_or_stop(ctx)
    if isinstance(loaded, PhaseOutcome):
        return loaded
    folder, catalogue, patchsets = loaded
    replayed = ctx.record.results.replay
    landed = {e.id for e in replayed.entries if e.status == "landed-upstream"} if replayed else set()
    wt = ctx.worktree
    uncarried, scope = fork_carry(ctx, catalogue, patchsets)
    report = check_tree(
        FolderTree(wt.path),
        catalogue,
        patchsets,
        patches_dir=str(folder),
        landed=landed,
        uncarried=uncarried,
        carry=scope,
    )
    report = with_baseline(report, patchsets, CommitTree(ctx.ws.repo, ctx.record.fork.head_before))
    counts = report.counts()
    head, dirty = wt.head(), [line[3:] for line in wt.status_porcelain() if not line.startswith("??")]
    if not report.applicable:
        return PhaseOutcome("skipped", report.applies_detail, result=VerifyResult.of(report, commit=head, dirty=dirty))
    message = verify_message(counts)
    if not report.ok:
        return PhaseOutcome(
            "failed",
            message,
            result=VerifyResult.of(report, commit=head, dirty=dirty),
            details=tuple(r.line() for r in report.violations()),
            next_steps=(
                "fix the fork features in the sync worktree and start a new sync",
                "or mark an unconfirmed invariant `severity: advisory` in its patchset.yaml",
            ),
        )
    return PhaseOutcome("done", message, result=VerifyResult.of(report, commit=head, dirty=dirty))


PATCHSET_PHASES = (Phase("replay", replay), Phase("verify", verify))
