"""Check a whole catalogue on a tree: per patch-set status and per-invariant results.

Used by ``ds4sync patches check`` (any checkout, no merge) and by the ``verify`` phase.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ds4sync.core.model import updated
from ds4sync.models.patchsets_results import (
    COUNTED,
    CarryScope,
    CheckReport,
    InvariantResult,
    PatchSetCheck,
    PatchSetStatus,
)
from ds4sync.patchsets.invariants import evaluate, evaluate_one
from ds4sync.patchsets.model import Catalogue, DropWhen, PatchSet, load_catalogue
from ds4sync.patchsets.tree import FolderTree, Tree


def applies(tree: Tree, catalogue: Catalogue) -> tuple[bool, str]:
    """Whether ``catalogue.applies_when`` holds on ``tree``, with the first failure's detail."""
    for i, inv in enumerate(catalogue.applies_when, 1):
        result = evaluate_one(tree, inv, patchset="(catalogue)", name=inv.id or f"applies_when-{i}")
        if result.status == "violated":
            return False, f"catalogue does not apply to this tree: {result.detail}"
    return True, ""


def status_of(results: Sequence[InvariantResult]) -> PatchSetStatus:
    """holds / violated / advisory-violations from one patch-set's results."""
    if any(r.blocking_violation for r in results):
        return "violated"
    if any(r.status == "violated" for r in results):
        return "advisory-violations"
    return "holds"


def not_carried(
    catalogue: Catalogue,
    patchsets: Sequence[PatchSet],
    *,
    branch: str | None,
    fork_tree: Tree | None,
    history_has: Callable[[str], bool | None] | None,
) -> dict[str, str]:
    """``{id: why}`` of the patch-sets the fork does not carry (all others are carried).

    In order: the branch's entry in ``catalogue.branches`` leaves it out; its
    ``carried_when.since`` commit is not in the fork head's history (a list: none of its commits is;
    ``history_has``: True, False, or None for a commit this repository does not know, which counts as absent);
    a ``carried_when.tree`` invariant does not hold on ``fork_tree``; it depends on a
    patch-set that is not carried. ``patchsets`` must be in dependency order.
    """
    entry = catalogue.branch_entry(branch)
    out: dict[str, str] = {}
    for ps in patchsets:
        why = None
        if entry is not None and not entry[1].carries_id(ps.id):
            pattern, spec = entry
            key = branch if pattern == branch else f"{branch} (as {pattern})"
            why = f"branch {key} does not carry it (catalogue.yaml branches)" + (f": {spec.note}" if spec.note else "")
        cond = ps.carried_when
        if why is None and cond is not None and cond.since:
            why = _since_missing(cond.since, history_has)
        if why is None and cond is not None and cond.tree and fork_tree is not None:
            for i, inv in enumerate(cond.tree, 1):
                res = evaluate_one(fork_tree, inv, patchset=ps.id, name=inv.id or f"carried_when-{i}")
                if res.status != "holds":
                    why = f"carried_when.tree {res.invariant} does not hold on the fork tree: {res.detail}"
                    break
        if why is None:
            missing = [dep for dep in ps.depends_on if dep in out]
            if missing:
                why = f"depends on {', '.join(missing)}, which is not carried"
        if why is not None:
            if cond is not None and cond.note:
                why += f" ({cond.note})"
            out[ps.id] = why
    return out


def _since_missing(since: tuple[str, ...], history_has: Callable[[str], bool | None] | None) -> str | None:
    """Why ``since`` leaves a patch-set out (no commit of it in the fork head's history), else None."""
    found = {commit: history_has(commit) if history_has else None for commit in since}
    if any(found.values()):
        return None
    if len(found) == 1:
        known = "is not in" if False in found.values() else "is unknown to this repository, so not in"
        return f"carried_when.since {since[0]} {known} the fork head's history"
    unknown = [c for c, has in found.items() if has is None]
    note = f" ({', '.join(unknown)} unknown to this repository)" if unknown else ""
    return f"carried_when.since: none of {', '.join(since)} is in the fork head's history{note}"


def with_baseline(report: CheckReport, patchsets: Sequence[PatchSet], before: Tree) -> CheckReport:
    """``report`` with each violation of a counted patch-set also evaluated on ``before`` (the fork head).

    Only violations are re-evaluated (what holds needs no baseline), so the cost is one
    invariant per violation. The result's ``before`` says whether the merge lost the feature or
    the fork head already lacked it; it does not change any status.
    """
    by_id = {ps.id: ps for ps in patchsets}
    checks = []
    for check in report.patchsets:
        ps = by_id.get(check.id)
        if ps is None or check.status not in COUNTED:
            checks.append(check)
            continue
        invariants = dict(zip(ps.invariant_ids(), ps.invariants, strict=True))
        results = tuple(
            updated(r, before=evaluate_one(before, invariants[r.invariant], **_named(r)).status)
            if r.status == "violated" and r.invariant in invariants
            else r
            for r in check.invariants
        )
        checks.append(updated(check, invariants=results))
    return updated(report, patchsets=tuple(checks))


def _named(result: InvariantResult) -> dict[str, str]:
    return {"patchset": result.patchset, "name": result.invariant}


def check_tree(
    tree: Tree,
    catalogue: Catalogue,
    patchsets: Sequence[PatchSet],
    *,
    patches_dir: str,
    landed: Iterable[str] = (),
    uncarried: Mapping[str, str] | None = None,
    carry: CarryScope | None = None,
) -> CheckReport:
    """Every invariant of every patch-set on ``tree``.

    ``landed``: ids replay found landed upstream; their results are kept but do not block.
    ``uncarried``: ``{id: why}`` from :func:`not_carried`; those patch-sets are ``not-carried``
    (their invariants are still evaluated and shown, counted apart). One whose blocking
    invariants all hold anyway says so in its detail (the branch may carry it after all).
    """
    start = time.perf_counter()
    ok, detail = applies(tree, catalogue)
    landed = set(landed)
    uncarried = dict(uncarried or {})
    checks = []
    for ps in patchsets:
        results = tuple(evaluate(tree, ps)) if ok else ()
        why = ""
        status: PatchSetStatus
        if not ok:
            status, why = "not-applicable", detail
        elif ps.id in landed:
            status, why = "landed-upstream", "drop_when holds on upstream"
        elif ps.id in uncarried:
            status, why = "not-carried", uncarried[ps.id]
            if status_of(results) == "holds" and any(r.status == "holds" for r in results):
                why += "; yet every invariant holds here: does the branch carry it after all?"
        else:
            status = status_of(results)
        checks.append(
            PatchSetCheck(
                id=ps.id,
                title=ps.title,
                kind=ps.kind,
                status=status,
                detail=why,
                invariants=results,
                tests=_tests(ps),
                metadata_only=not ps.patches,
            )
        )
    return CheckReport(
        tree=tree.label,
        patches_dir=patches_dir,
        applicable=ok,
        applies_detail=detail,
        carry=carry or CarryScope(),
        patchsets=tuple(checks),
        duration_s=round(time.perf_counter() - start, 3),
    )


def drop_evidence(
    drop: DropWhen | None, patchset: PatchSet, *, upstream: Tree | None, has_commit: bool | None
) -> list[str]:
    """Evidence that ``drop_when`` holds on upstream (empty when it does not, or cannot be told).

    ``has_commit``: whether the upstream SHA contains ``drop.upstream_has_commit`` (None:
    unknown here).
    """
    if drop is None or drop.empty:
        return []
    if drop.upstream_has_commit and has_commit:
        return [f"upstream contains commit {drop.upstream_has_commit}"]
    if upstream is None:
        return []
    if drop.invariants_hold_on_upstream:
        # Every checked invariant must hold (an advisory violation is not holding), and at
        # least one blocking one must: unconfirmed invariants alone never prove a drop.
        results = [r for r in evaluate(upstream, patchset) if r.status != "deferred"]
        blocking = [r for r in results if r.severity == "blocking"]
        if blocking and all(r.status == "holds" for r in results):
            return [f"on upstream {upstream.label}: {r.invariant}: {r.detail}" for r in results]
    if drop.upstream_invariants:
        results = [
            evaluate_one(upstream, inv, patchset=patchset.id, name=inv.id or f"drop_when-{i}")
            for i, inv in enumerate(drop.upstream_invariants, 1)
        ]
        if all(r.status == "holds" for r in results) and any(r.severity == "blocking" for r in results):
            return [f"on upstream {upstream.label}: {r.detail}" for r in results]
    return []


def _tests(ps: PatchSet) -> tuple[str, ...]:
    nodes = list(ps.tests) + [inv.node for inv in ps.invariants if inv.kind == "test"]
    return tuple(dict.fromkeys(nodes))


def check_checkout(
    root: Path | Tree,
    patches: Path,
    *,
    upstream: Tree | None = None,
    upstream_has: Callable[[str], bool] | None = None,
    branch: str | None = None,
    head: str | None = None,
    history_has: Callable[[str], bool | None] | None = None,
) -> CheckReport:
    """``ds4sync patches check``: the catalogue at ``patches`` on a checkout (a folder) or a commit's tree.

    With ``upstream`` (a tree) and ``upstream_has`` (is a commit in upstream?), patch-sets
    whose ``drop_when`` holds are reported landed-upstream. ``branch`` (the fork branch the
    tree is of), ``head`` and ``history_has`` (is a commit in ``head``'s history? None when
    unknown) decide which patch-sets are not carried (:func:`not_carried`); the tree itself is
    the fork tree ``carried_when.tree`` is checked on.

    Raises:
        ConfigError: a malformed patch-set file.
    """
    start = time.perf_counter()
    catalogue, patchsets = load_catalogue(patches)
    tree: Tree = FolderTree(root) if isinstance(root, Path) else root
    landed = [
        ps.id
        for ps in patchsets
        if upstream is not None
        and drop_evidence(
            ps.drop_when,
            ps,
            upstream=upstream,
            has_commit=upstream_has(ps.drop_when.upstream_has_commit)
            if ps.drop_when and ps.drop_when.upstream_has_commit and upstream_has
            else None,
        )
    ]
    uncarried = not_carried(catalogue, patchsets, branch=branch, fork_tree=tree, history_has=history_has)
    scope = CarryScope(branch=branch, head=head, tree_label=tree.label)
    report = check_tree(
        tree, catalogue, patchsets, patches_dir=str(patches), landed=landed, uncarried=uncarried, carry=scope
    )
    return updated(report, duration_s=round(time.perf_counter() - start, 3))
