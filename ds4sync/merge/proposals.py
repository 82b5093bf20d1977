"""Proposals in the resolve phase: the conflicts the store and the rules left, tried hunk by hunk with the
resolvers (store, rules, the model endpoint when ``merge.endpoint`` is configured), validated, and
written to the worktree only when every hunk of the file has a validated answer and the file passed
every check. A written proposal is never staged here (unless a profile rule names its path) and
never recorded as a person's resolution: ``ds4sync resume --accept-proposals`` stages it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ds4sync.core.files import write_atomic
from ds4sync.core.git import GitRepo
from ds4sync.core.model import updated
from ds4sync.core.paths import path_matches
from ds4sync.merge.provenance import load_owners
from ds4sync.merge.resolvers import FileOutcome, Resolver, RuleResolver, StoreResolver, resolve_file
from ds4sync.merge.validation import OverlayTree, SemanticGuard, check_invariants
from ds4sync.models.merge_hunks import ConflictHunk, split_diff3
from ds4sync.models.merge_results import ConflictEntry
from ds4sync.patchsets.model import PatchSet
from ds4sync.patchsets.tree import CommitTree, FolderTree
from ds4sync.runner import RunContext


def with_sources(entry: ConflictEntry) -> ConflictEntry:
    """A conflict the store or a rule resolved as a whole: each hunk names that source."""
    source = {"recorded": "store", "rule": "rule"}.get(entry.resolution or "")
    if source is None or not entry.hunks or all(h.source for h in entry.hunks):
        return entry
    return updated(entry, hunks=tuple(updated(h, source=source) for h in entry.hunks))


@dataclass(frozen=True)
class Proposed:
    """What :func:`propose` did: the entries (some ``proposed``) and one note per file left to a person."""

    entries: tuple[ConflictEntry, ...]
    notes: tuple[str, ...]


def propose(ctx: RunContext, wt: GitRepo, entries: list[ConflictEntry]) -> Proposed:
    """Try the resolvers on each unresolved content conflict (only when an endpoint is configured)."""
    endpoint = ctx.ws.config.merge.endpoint
    if endpoint is None:
        return Proposed(tuple(entries), ())
    from ds4sync.merge.endpoint import EndpointResolver
    from ds4sync.merge.rerere import ResolutionStore

    resolvers: list[Resolver] = [
        StoreResolver.from_store(ResolutionStore(ctx.ws.resolutions_dir)),
        RuleResolver(ctx.ws.config.merge.rules),
        EndpointResolver(endpoint),
    ]
    patchsets = load_owners(ctx.ws.profile / "patches")
    unmerged = set(wt.unmerged_paths())
    guard = SemanticGuard(ctx.ws.repo, fork=ctx.record.fork.head_before, upstream=ctx.record.upstream.sha)
    done, notes = [], []
    for entry in entries:
        if entry.resolution != "unresolved" or entry.kind != "content" or entry.path not in unmerged:
            done.append(entry)
            continue
        ctx.progress(f"asking {endpoint.model} about {entry.path}")
        outcome = _propose_file(ctx, wt, entry, resolvers, patchsets, context=endpoint.context_lines)
        if outcome.text is None:
            notes.append(f"{entry.path}: no proposal ({outcome.reason})")
            done.append(updated(entry, hunks=outcome.hunks))
            continue
        done.append(_write(wt, entry, outcome, guard, accept=endpoint.accept_paths))
        if done[-1].resolution != "proposed":
            notes.append(f"{entry.path}: no proposal ({_reason(done[-1].hunks)})")
    return Proposed(tuple(done), tuple(notes))


def _propose_file(
    ctx: RunContext,
    wt: GitRepo,
    entry: ConflictEntry,
    resolvers: list[Resolver],
    patchsets: list[PatchSet],
    *,
    context: int,
) -> FileOutcome:
    size = wt.marker_sizes([entry.path]).get(entry.path, 7)
    ours, base, theirs = (wt.blob(f":{stage}:{entry.path}") for stage in (2, 1, 3))
    _, merged = wt.merge_file_diff3(ours, base, theirs, marker_size=size, labels=("fork", "merge-base", "upstream"))
    split = split_diff3(merged.decode("utf-8", "replace"), marker_size=size)
    hunks = _match(entry.hunks, split.hunks)
    owners = [p for p in patchsets if any(o.patchset == p.id for h in hunks for o in h.owners)]
    fork_tree = CommitTree(ctx.ws.repo, ctx.record.fork.head_before)
    folder = FolderTree(wt.path)

    def invariants(path: str, text: str) -> str | None:
        return check_invariants(fork_tree, OverlayTree(folder, {path: text}), owners)

    return resolve_file(
        entry.path, split, hunks, resolvers, context=context, marker_size=size, file_checks=[invariants]
    )


def _match(recorded: tuple[ConflictHunk, ...], found: tuple[tuple[str, str, str], ...]) -> list[ConflictHunk]:
    """The plan's hunks (with provenance) when the worktree's merge has the same ones, else bare hunks."""
    if len(recorded) == len(found) and all(
        (h.fork, h.base, h.upstream) == f for h, f in zip(recorded, found, strict=True)
    ):
        return list(recorded)
    return [ConflictHunk(index=i + 1, fork=f, base=b, upstream=u) for i, (f, b, u) in enumerate(found)]


def _write(
    wt: GitRepo, entry: ConflictEntry, outcome: FileOutcome, guard: SemanticGuard, *, accept: tuple[str, ...]
) -> ConflictEntry:
    """Write a validated file, run the semantic check on it (put git's conflict back on a finding), and
    stage it only when a profile rule names its path."""
    assert outcome.text is not None
    data = outcome.text.encode("utf-8")
    target = Path(wt.path) / entry.path
    write_atomic(target, data)
    why = guard.findings(
        lambda: wt.worktree_tree(untracked=False)[0],
        unknown=set(wt.unmerged_paths()) - {entry.path},  # the other conflicts still hold git's markers
    )
    if why:
        wt.restore_conflict(entry.path)  # git's conflict back: a person decides
        dropped = tuple(
            updated(
                h,
                source=None,
                proposals=tuple(updated(p, status="dropped", reason=why, text=None) for p in h.proposals),
            )
            for h in outcome.hunks
        )
        return updated(entry, hunks=dropped)
    hunks = tuple(
        updated(h, proposals=tuple(updated(p, written=p.status == "validated") for p in h.proposals))
        for h in outcome.hunks
    )
    rule = next((glob for glob in accept if path_matches(glob, entry.path)), None)
    if rule is not None:
        wt.stage_resolved(entry.path)
    return updated(
        entry,
        resolution="proposed",
        proposal=f"{', '.join(outcome.sources)}, validated",
        proposed_blob=wt.blob_id(data),
        accepted_by=f"rule merge.endpoint.accept_paths {rule}" if rule else None,
        hunks=hunks,
    )


def _reason(hunks: tuple[ConflictHunk, ...]) -> str:
    reasons = [p.reason for h in hunks for p in h.proposals if p.status == "dropped" and p.reason]
    return reasons[-1] if reasons else "nothing validated"
