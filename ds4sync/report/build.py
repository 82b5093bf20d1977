"""Turn a run record (JSON) into a :class:`~ds4sync.report.view.ReportView`.

Every phase result is read defensively: a missing phase gives an empty section that
renders as "not run"; a field of the wrong type is ignored, never fatal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ds4sync.core.words import many
from ds4sync.report.read import as_dict, as_int, as_list, as_str, first, tally
from ds4sync.report.validation import build_validation, commands
from ds4sync.report.view import (
    GATE_TIERS,
    BackportView,
    ConflictView,
    DuplicateView,
    FollowupView,
    IntegrationView,
    InvariantView,
    MergeView,
    OpenPR,
    OverlapView,
    PatchsetView,
    PhaseView,
    RemainingItem,
    ReportView,
    RuleUse,
    RunInfo,
    Side,
    ValidationView,
)

_HELD = frozenset({"held", "holds", "passed", "ok", "pass", "true"})
_PATCHSET_REVIEW = {
    "needs-adaptation": "needs adaptation before the sync can go on",
    "landed-upstream": "landed upstream: candidate to delete from the catalogue",
    "failed": "failed to apply",
}
_GATE_NOT_GREEN = frozenset({"failed", "incomplete", "error", "unknown"})


def build_view(record: Mapping[str, Any], *, public: bool = False, notes: str | None = None) -> ReportView:
    """The report view of ``record`` (a RunRecord in JSON form); extra ``notes`` are a person's text."""
    results = as_dict(record.get("results"))
    upstream, fork = as_dict(record.get("upstream")), as_dict(record.get("fork"))
    merge = merge_view(results.get("merge"))
    validation = build_validation(results)
    integration = integration_view(merge, results)
    followups = tuple(followup(f) for f in _sorted_followups(record.get("followups")))
    view_notes = [as_str(n) for n in as_list(record.get("notes")) if as_str(n)]
    if notes and notes.strip():
        view_notes.append(notes.strip())
    phases = tuple(
        PhaseView(
            name=str(n),
            status=as_str(as_dict(p).get("status")) or "pending",
            finished_at=as_str(as_dict(p).get("finished_at")) or None,
            message=as_str(as_dict(p).get("message")),
        )
        for n, p in as_dict(record.get("phases")).items()
    )
    upstream_side = Side(
        name=as_str(first(upstream, "name", "url", "remote")) or "upstream",
        ref=as_str(first(upstream, "branch", "ref")),
        sha=as_str(upstream.get("sha")),
        url=as_str(upstream.get("url")) or None,
    )
    fork_side = Side(
        name=as_str(fork.get("name")) or "fork",
        ref=as_str(fork.get("branch")),
        sha=as_str(fork.get("head_before")) or as_str(as_dict(results.get("merge")).get("fork_sha")),
    )
    return ReportView(
        record_schema_version=as_int(record.get("schema_version")) or 0,
        public=public,
        title=_title(upstream_side, fork_side, followups),
        run=RunInfo(
            run_id=as_str(record.get("run_id")),
            status=as_str(record.get("status")) or "unknown",
            created_at=as_str(record.get("created_at")),
            updated_at=as_str(record.get("updated_at")),
            sync_branch=as_str(record.get("sync_branch")),
            backup_ref=as_str(record.get("backup_ref")),
            backup_branch=as_str(record.get("backup_branch")) or None,
            profile=as_str(record.get("profile")) or None,
        ),
        upstream=upstream_side,
        fork=fork_side,
        phases=phases,
        merge=merge,
        integration=integration,
        duplicate=duplicate_view(results.get("publish")),
        validation=validation,
        commands=commands(validation),
        remaining=remaining(phases, merge, integration, validation, later_tiers=_later_tiers(followups)),
        followups=followups,
        notes=tuple(view_notes),
    )


def _title(upstream: Side, fork: Side, followups: tuple[FollowupView, ...]) -> str:
    title = f"Sync {fork.name}:{fork.ref} with {upstream.name} {upstream.ref}".strip()
    if any(f.backports for f in followups):
        title += " + backports"
    return title


def merge_view(data: Any) -> MergeView | None:
    """The merge section from a MergeSummary in JSON form; None when merge did not run."""
    if not isinstance(data, Mapping):
        return None
    conflicts = tuple(
        ConflictView(
            path=as_str(c.get("path")),
            kind=as_str(c.get("kind")) or "content",
            resolution=as_str(c.get("resolution")) or "unresolved",
            rule=as_str(c.get("rule")) or None,
            stored_as=as_str(c.get("stored_as")) or None,
            store_entry=as_str(c.get("store_entry")) or None,
        )
        for c in as_list(data.get("conflicts"))
        if isinstance(c, Mapping)
    )
    overlaps = tuple(
        OverlapView(
            path=as_str(o.get("path")),
            upstream_lines=as_int(o.get("upstream_lines")) or 0,
            fork_lines=as_int(o.get("fork_lines")) or 0,
        )
        for o in as_list(data.get("overlaps"))
        if isinstance(o, Mapping)
    )
    return MergeView(
        merge_commit=as_str(data.get("merge_commit")) or None,
        merge_base=as_str(data.get("merge_base")) or None,
        upstream_sha=as_str(data.get("upstream_sha")) or None,
        upstream_commits=as_int(data.get("upstream_commits")),
        fork_commits=as_int(data.get("fork_commits")),
        conflicts=conflicts,
        conflict_kinds=tally(c.kind for c in conflicts),
        resolutions=tally(c.resolution for c in conflicts),
        overlaps=overlaps,
        remerge_diff_paths=tuple(as_str(p) for p in as_list(data.get("remerge_diff_paths"))),
    )


def integration_view(merge: MergeView | None, results: Mapping[str, Any]) -> IntegrationView:
    """Resolution rules used, recorded/person resolutions, and patch-set outcomes with rationale."""
    conflicts = merge.conflicts if merge else ()
    rules: dict[str, list[str]] = {}
    for c in conflicts:
        if c.resolution == "rule":
            rules.setdefault(c.rule or "rule", []).append(c.path)
    patchsets = patchset_views(results.get("replay"), results.get("verify"))
    verify = results.get("verify")
    return IntegrationView(
        rules=tuple(RuleUse(rule=r, paths=tuple(p)) for r, p in rules.items()),
        recorded=tuple(c.path for c in conflicts if c.resolution == "recorded"),
        person=tuple(c.path for c in conflicts if c.resolution == "person" and c.stored_as),
        person_unrecorded=tuple(c.path for c in conflicts if c.resolution == "person" and not c.stored_as),
        unresolved=tuple(c.path for c in conflicts if c.resolution == "unresolved"),
        patchsets=patchsets,
        patchset_tally=tally(p.status for p in patchsets),
        patchsets_ran=isinstance(results.get("replay"), Mapping | list) or isinstance(verify, Mapping | list),
        verify_status=as_str(as_dict(verify).get("status")) or None,
    )


def _patchset_items(data: Any) -> list[dict[str, Any]]:
    """Patch-set entries from ``{"patchsets": [...]}``, ``{"patch_sets": ...}``, ``{id: {...}}`` or a list."""
    if isinstance(data, Mapping):
        inner = first(data, "patchsets", "patch_sets", "results")
        if inner is not None:
            data = inner
        else:
            data = [dict(as_dict(v), id=k) for k, v in data.items() if isinstance(v, Mapping)]
    if isinstance(data, Mapping):
        return [dict(as_dict(v), id=as_str(as_dict(v).get("id")) or k) for k, v in data.items()]
    return [as_dict(x) for x in as_list(data) if isinstance(x, Mapping)]


def patchset_views(replay: Any, verify: Any) -> tuple[PatchsetView, ...]:
    """Replay outcomes joined with verify's invariant results, by patch-set id, replay order first."""
    merged: dict[str, dict[str, Any]] = {}
    for source in (_patchset_items(replay), _patchset_items(verify)):
        for item in source:
            key = as_str(first(item, "id", "patchset", "name"))
            if not key:
                continue
            entry = merged.setdefault(key, {})
            for k, v in item.items():
                if k == "invariants" or k not in entry:
                    entry[k] = v  # replay's outcome wins; verify's invariant results win
    return tuple(_patchset(key, item) for key, item in merged.items())


def _patchset(key: str, item: Mapping[str, Any]) -> PatchsetView:
    meta = as_dict(first(item, "patchset", "meta", "definition"))
    invariants = tuple(_invariant(i) for i in as_list(item.get("invariants")) if isinstance(i, Mapping))
    upstream = first(item, "upstream", "provenance") or first(meta, "upstream", "provenance")
    if isinstance(upstream, Mapping):
        upstream = first(upstream, "pr", "url", "commit", "ref")
    return PatchsetView(
        id=key,
        title=as_str(first(item, "title") or first(meta, "title")),
        kind=as_str(first(item, "kind") or first(meta, "kind")),
        status=as_str(first(item, "status", "outcome")) or "unknown",
        rationale=as_str(first(item, "rationale", "reason") or first(meta, "rationale")),
        upstream=as_str(upstream),
        detail=as_str(first(item, "detail", "message", "evidence")),
        invariants=invariants,
        invariants_held=sum(1 for i in invariants if i.status in _HELD),
    )


def _invariant(data: Mapping[str, Any]) -> InvariantView:
    status = first(data, "status", "holds", "ok", "passed")
    text = ("held" if status else "broken") if isinstance(status, bool) else as_str(status) or "unknown"
    return InvariantView(
        name=as_str(first(data, "name", "description", "id", "kind")) or "(invariant)",
        status=text,
        detail=as_str(first(data, "detail", "message", "reason")),
    )


def duplicate_view(data: Any) -> DuplicateView | None:
    """The publish phase's duplicate-work check; None when publish did not run."""
    data = as_dict(data)
    check = as_dict(first(data, "duplicate_check", "duplicates")) or data
    if not check:
        return None
    prs = tuple(
        OpenPR(
            number=as_int(first(p, "number", "id")),
            title=as_str(p.get("title")),
            url=as_str(p.get("url")),
            relation=as_str(first(p, "reason", "relation", "overlap", "note")),
            author=as_str(first(p, "author", "user")),
            updated_at=as_str(p.get("updated_at")),
        )
        for p in as_list(first(check, "open_prs", "prs"))
        if isinstance(p, Mapping)
    )
    return DuplicateView(
        repo=as_str(first(check, "repo", "forge_repo")),
        checked_at=as_str(check.get("checked_at")),
        open_prs=prs,
        conclusion=as_str(first(check, "conclusion", "summary")),
        pr_url=as_str(first(data, "pr_url", "url")),
    )


def remaining(
    phases: tuple[PhaseView, ...],
    merge: MergeView | None,
    integration: IntegrationView,
    validation: ValidationView,
    *,
    later_tiers: frozenset[str] = frozenset(),
) -> tuple[RemainingItem, ...]:
    """Everything not run or not green, in pipeline order, ending with the review a person owes.

    A tier the run did not execute but a follow-up did (``later_tiers``) is not listed.
    """
    items = [
        RemainingItem(kind="phase", text=f"phase {p.name} is {p.status}" + (f": {p.message}" if p.message else ""))
        for p in phases
        if p.status not in ("done", "skipped") and p.name != "report"
    ]
    if merge is None:
        items.append(RemainingItem(kind="phase", text="merge: not run"))
    elif integration.unresolved:
        unresolved = _many(len(integration.unresolved), "conflicted file")
        items.append(RemainingItem(kind="conflict", text=f"{unresolved} unresolved"))
    items.extend(_remaining_patchsets(integration))
    items.extend(_remaining_validation(validation, later_tiers))
    if merge and merge.overlaps:
        items.append(RemainingItem(kind="overlap", text=f"{_many(len(merge.overlaps), 'semantic overlap')} to review"))
    items.append(
        RemainingItem(
            kind="review",
            text="human review of the semantic resolutions and maintainer review remain required before merging",
        )
    )
    return tuple(items)


def _remaining_patchsets(integration: IntegrationView) -> list[RemainingItem]:
    items = []
    for p in integration.patchsets:
        if p.status in _PATCHSET_REVIEW:
            items.append(RemainingItem(kind="patch-set", text=f"patch-set {p.id}: {_PATCHSET_REVIEW[p.status]}"))
        elif p.invariants and p.invariants_held < len(p.invariants):
            items.append(
                RemainingItem(
                    kind="patch-set", text=f"patch-set {p.id}: invariants held {p.invariants_held}/{len(p.invariants)}"
                )
            )
    if not integration.patchsets_ran:
        items.append(RemainingItem(kind="patch-set", text="patch-set replay and verify: not run"))
    return items


def _remaining_validation(validation: ValidationView, later_tiers: frozenset[str]) -> list[RemainingItem]:
    items = []
    build = validation.build
    if build is None:
        items.append(RemainingItem(kind="build", text="native build: not run"))
    elif build.status not in ("passed", "ok", "cached"):
        items.append(RemainingItem(kind="build", text=f"native build: {build.status}"))
    items.extend(
        RemainingItem(kind="tier", text=f"{tier} tier: not run")
        for tier in validation.tiers_not_run
        if tier not in later_tiers
    )
    for g in validation.gates:
        if g.status in _GATE_NOT_GREEN:
            why = f" ({g.reason})" if g.reason else ""
            items.append(RemainingItem(kind="gate", text=f"{g.name} ({g.tier}): {g.status}{why}"))
    return items


def _later_tiers(followups: tuple[FollowupView, ...]) -> frozenset[str]:
    return frozenset(
        tier for f in followups if f.validation for tier in GATE_TIERS if tier not in f.validation.tiers_not_run
    )


def _sorted_followups(data: Any) -> list[dict[str, Any]]:
    items = [as_dict(f) for f in as_list(data) if isinstance(f, Mapping)]
    return sorted(items, key=lambda f: as_str(first(f, "date", "at", "created_at")))  # stable: newest last


def followup(data: Mapping[str, Any]) -> FollowupView:
    """A dated follow-up section: text, items, backports, exclusions, and its own validation."""
    results = as_dict(data.get("results"))
    validation = build_validation({k: v for k, v in results.items() if k != "merge"}) if results else None
    text = data.get("text")
    return FollowupView(
        date=as_str(first(data, "date", "at", "created_at")),
        title=as_str(data.get("title")) or "follow-up",
        head=as_str(data.get("head")),
        text=tuple(as_str(t) for t in as_list(text)) if isinstance(text, list) else ((as_str(text),) if text else ()),
        items=tuple(as_str(i) for i in as_list(data.get("items")) if as_str(i)),
        backports=tuple(_backport(b) for b in as_list(data.get("backports")) if isinstance(b, Mapping)),
        excluded=tuple(_backport(b) for b in as_list(data.get("excluded")) if isinstance(b, Mapping)),
        merge=merge_view(results.get("merge")),
        validation=validation,
        commands=commands(validation) if validation else (),
    )


def _backport(data: Mapping[str, Any]) -> BackportView:
    return BackportView(
        sha=as_str(first(data, "sha", "commit")),
        title=as_str(data.get("title")),
        upstream=as_str(first(data, "upstream", "pr", "ref")),
        note=as_str(first(data, "note", "reason", "rationale")),
    )


def _many(count: int, word: str) -> str:
    return many(count, word)
