"""Check a whole catalogue on a tree: per patch-set status and per-invariant results.

Used by ``ds4sync patches check`` (any checkout, no merge) and by the ``verify`` phase.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Literal

from ds4sync.core.model import FrozenModel
from ds4sync.patchsets.invariants import InvariantResult, evaluate, evaluate_one
from ds4sync.patchsets.model import Catalogue, DropWhen, PatchSet, load_catalogue
from ds4sync.patchsets.tree import FolderTree, Tree

CHECK_SCHEMA_VERSION = 1
PatchSetStatus = Literal["holds", "violated", "advisory-violations", "landed-upstream", "not-applicable"]


class PatchSetCheck(FrozenModel):
    """One patch-set on one tree.

    ``status``: holds; violated (a blocking invariant failed); advisory-violations (only
    advisory ones failed); landed-upstream (replay found its ``drop_when`` true, so its
    invariants are reported but do not block); not-applicable (the catalogue does not
    apply to this tree).
    """

    id: str
    title: str
    kind: str
    status: PatchSetStatus
    invariants: tuple[InvariantResult, ...] = ()
    tests: tuple[str, ...] = ()
    metadata_only: bool = False


class CheckReport(FrozenModel):
    """A catalogue checked on a tree; ``ok`` when no blocking invariant is violated."""

    schema_version: int = CHECK_SCHEMA_VERSION
    tree: str
    patches_dir: str
    applicable: bool = True
    applies_detail: str = ""
    patchsets: tuple[PatchSetCheck, ...] = ()
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether no patch-set is violated."""
        return all(ps.status != "violated" for ps in self.patchsets)

    def __bool__(self) -> bool:
        return self.ok

    def counts(self) -> dict[str, int]:
        """Invariant counts: total, holds, violated (blocking), advisory (violated), deferred, patch-sets."""
        results = [r for ps in self.patchsets for r in ps.invariants]
        exempt = {ps.id for ps in self.patchsets if ps.status in ("landed-upstream", "not-applicable")}
        return {
            "patchsets": len(self.patchsets),
            "invariants": len(results),
            "holds": sum(r.status == "holds" for r in results),
            "violated": sum(r.blocking_violation and r.patchset not in exempt for r in results),
            "advisory": sum(
                r.status == "violated" and (r.severity == "advisory" or r.patchset in exempt) for r in results
            ),
            "deferred": sum(r.status == "deferred" for r in results),
        }

    def violations(self) -> list[InvariantResult]:
        """Blocking violations of patch-sets that count (not landed upstream, catalogue applicable)."""
        counted = {ps.id for ps in self.patchsets if ps.status == "violated"}
        return [r for ps in self.patchsets for r in ps.invariants if r.patchset in counted and r.blocking_violation]

    def summary(self) -> dict[str, object]:
        """The JSON form with counts added (what ``--json`` prints and the record stores)."""
        return {**self.model_dump(mode="json"), "counts": self.counts(), "ok": self.ok}


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


def check_tree(
    tree: Tree, catalogue: Catalogue, patchsets: Sequence[PatchSet], *, patches_dir: str, landed: Iterable[str] = ()
) -> CheckReport:
    """Every invariant of every patch-set on ``tree``.

    ``landed``: ids replay found landed upstream; their results are kept but do not block.
    """
    start = time.perf_counter()
    ok, detail = applies(tree, catalogue)
    landed = set(landed)
    checks = []
    for ps in patchsets:
        results = tuple(evaluate(tree, ps)) if ok else ()
        status: PatchSetStatus = (
            "not-applicable" if not ok else "landed-upstream" if ps.id in landed else status_of(results)
        )
        checks.append(
            PatchSetCheck(
                id=ps.id,
                title=ps.title,
                kind=ps.kind,
                status=status,
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
        results = [r for r in evaluate(upstream, patchset) if r.status != "deferred"]
        if results and all(r.status == "holds" or r.severity == "advisory" for r in results):
            return [f"on upstream {upstream.label}: {r.invariant}: {r.detail}" for r in results]
    if drop.upstream_invariants:
        results = [
            evaluate_one(upstream, inv, patchset=patchset.id, name=inv.id or f"drop_when-{i}")
            for i, inv in enumerate(drop.upstream_invariants, 1)
        ]
        if all(r.status == "holds" for r in results):
            return [f"on upstream {upstream.label}: {r.detail}" for r in results]
    return []


def _tests(ps: PatchSet) -> tuple[str, ...]:
    nodes = list(ps.tests) + [inv.node for inv in ps.invariants if inv.kind == "test"]
    return tuple(dict.fromkeys(nodes))


def check_checkout(
    root: Path, patches: Path, *, upstream: Tree | None = None, upstream_has: Callable[[str], bool] | None = None
) -> CheckReport:
    """``ds4sync patches check``: the catalogue at ``patches`` on the checkout at ``root`` (no merge).

    With ``upstream`` (a tree) and ``upstream_has`` (is a commit in upstream?), patch-sets
    whose ``drop_when`` holds are reported landed-upstream.

    Raises:
        ConfigError: a malformed patch-set file.
    """
    start = time.perf_counter()
    catalogue, patchsets = load_catalogue(patches)
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
    report = check_tree(FolderTree(root), catalogue, patchsets, patches_dir=str(patches), landed=landed)
    return report.model_copy(update={"duration_s": round(time.perf_counter() - start, 3)})
