"""One open upstream PR against the fork, from objects: no work tree, no index, no checkout.

The PR's own changes are ``B..H`` (``H`` its head, ``B`` its merge-base with upstream). They are merged
three-way into the fork's tree the way ``git merge`` would merge them if the fork sat on ``B``: a synthetic
commit carrying the fork's tree with ``B`` as its only parent is merged with ``H`` by
``git merge-tree --write-tree`` (git 2.39 has no ``--merge-base``; the synthetic parent makes ``B`` the
merge-base). Every file is therefore merged with base ``B:path``, ours ``fork:path`` and theirs ``H:path``,
git choosing the conflict kinds. When ``B`` is not the fork's own base, the fork's tree is first the one a
sync to ``B`` would give (``git merge-tree`` of the fork head and ``B``), so that upstream's changes in between
are not taken for the fork's; only conflicts in files the fork changed are the fork's (a conflict in a
file the fork never touched is between the PR and upstream, for the PR's author).

The merged tree is the fork with the PR applied: the patch-set invariants are evaluated on it (read from the
objects, as bisect does) and compared with the fork head's, so only invariants the PR would break are named.
The semantic check plugs in at :func:`semantic_findings`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ds4sync.core.errors import GitError
from ds4sync.core.git import GitRepo
from ds4sync.models.drift_results import DriftConflict, DriftFindings, DriftViolation
from ds4sync.patchsets.check import check_tree
from ds4sync.patchsets.model import Catalogue, PatchSet
from ds4sync.patchsets.tree import CommitTree

#: The module the semantic check lives in, and its entry point (see :func:`semantic_findings`).
SEMANTIC_MODULE = "ds4sync.semantic"


class _RecordingTree:
    """A tree that remembers which files were read and whether the whole path list was asked for."""

    def __init__(self, tree: CommitTree) -> None:
        self._tree = tree
        self.label = tree.label
        self.read_paths: set[str] = set()
        self.listed = False

    def paths(self) -> list[str]:
        self.listed = True
        return self._tree.paths()

    def read(self, path: str) -> str | None:
        self.read_paths.add(path)
        return self._tree.read(path)

    def read_many(self, paths: list[str]) -> dict[str, str]:
        self.read_paths.update(paths)
        return self._tree.read_many(paths)


@dataclass
class PatchSetScope:
    """What one patch-set depends on in the tree: its patches' paths and the files its invariants read."""

    id: str
    paths: frozenset[str]
    lists_paths: bool  # an invariant matched a glob: an added or deleted file anywhere may change it


@dataclass
class ForkContext:
    """The fork side of every PR's merge, computed once per watch.

    ``fork_head``: the fork branch's head; ``fork_base``: its merge-base with upstream (its last sync);
    ``fork_files``: files changed in ``fork_base..fork_head``; ``baseline``: (patch-set, invariant) pairs
    already violated on the fork head (a PR cannot be blamed for them).
    """

    repo: GitRepo
    fork_head: str
    fork_base: str
    catalogue: Catalogue | None
    patchsets: Sequence[PatchSet]
    patches_dir: str
    fork_tree: str = ""
    fork_files: frozenset[str] = frozenset()
    scopes: tuple[PatchSetScope, ...] = ()
    baseline: frozenset[tuple[str, str]] = frozenset()
    digest: str = ""
    semantic: object | None = field(default=None, repr=False)

    @classmethod
    def build(
        cls,
        repo: GitRepo,
        *,
        fork_head: str,
        fork_base: str,
        catalogue: Catalogue | None,
        patchsets: Sequence[PatchSet],
        patches_dir: Path,
    ) -> ForkContext:
        """Read the fork side: its files, each patch-set's scope, the invariants' baseline, the profile digest."""
        ctx = cls(repo, fork_head, fork_base, catalogue, list(patchsets), str(patches_dir))
        ctx.fork_tree = repo.tree_id(fork_head)
        ctx.fork_files = frozenset(repo.changed_names(fork_base, fork_head))
        scopes, baseline = [], set()
        for ps in ctx.patchsets:
            recording = _RecordingTree(CommitTree(repo, fork_head))
            report = ctx.check(recording, [ps])
            baseline |= {(v.patchset, v.invariant) for v in report.violations()}
            patch_paths = repo.patch_paths(ps.patch_files()) if ps.patches else set()
            scopes.append(
                PatchSetScope(ps.id, frozenset(recording.read_paths | patch_paths), lists_paths=recording.listed)
            )
        ctx.scopes = tuple(scopes)
        ctx.baseline = frozenset(baseline)
        ctx.digest = _digest(Path(patches_dir), fork_head)
        ctx.semantic = _semantic_entry(repo)
        return ctx

    def check(self, tree, patchsets: Sequence[PatchSet]):  # -> CheckReport
        """Every invariant of ``patchsets`` on ``tree`` (no catalogue: every patch-set applies)."""
        catalogue = self.catalogue or Catalogue()
        return check_tree(tree, catalogue, patchsets, patches_dir=self.patches_dir)


def _digest(patches_dir: Path, fork_head: str) -> str:
    """What a PR's findings depend on besides the PR head and the fork head: the patch-sets."""
    digest = hashlib.sha256(fork_head.encode())
    if patches_dir.is_dir():
        for file in sorted(p for p in patches_dir.rglob("*") if p.is_file() and "resolutions" not in p.parts):
            digest.update(str(file.relative_to(patches_dir)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def _semantic_entry(repo: GitRepo) -> object | None:
    """``ds4sync.semantic.check_merge`` when that module is installed, else None.

    Every PR of one watch is checked against the same fork head, so the checks share one cache of parsed
    files (by blob id and path): after the first PR, a check parses only the files that PR brings.
    """
    try:
        module = importlib.import_module(SEMANTIC_MODULE)
    except ImportError:
        return None
    check = getattr(module, "check_merge", None)
    if check is None:
        return None
    from ds4sync.semantic.resolve import FactsCache

    return functools.partial(check, facts=FactsCache(repo))


def semantic_findings(ctx: ForkContext, *, head: str, merged_tree: str) -> tuple[str, ...] | None:
    """THE SEAM for the semantic check: ``ds4sync.semantic.check_merge(repo, *, fork, upstream, merged)``.

    ``fork`` is the fork head, ``upstream`` the PR head, ``merged`` a commit of the merged tree with both as
    parents. Each finding becomes one line (its ``line()`` when it has one, else ``str``). Returns None while
    no semantic check is installed: drift writes no semantic rules of its own.
    """
    check = ctx.semantic
    if check is None or not callable(check):
        return None
    merged = ctx.repo.commit_tree(merged_tree, parents=(ctx.fork_head, head), message="ds4sync drift: merged PR")
    found = check(ctx.repo, fork=ctx.fork_head, upstream=head, merged=merged)
    blockers = found.blockers() if hasattr(found, "blockers") else list(getattr(found, "findings", found) or ())
    return tuple(item.line_text() if hasattr(item, "line_text") else str(item) for item in blockers)


def evaluate_pull(
    ctx: ForkContext, head: str, *, upstream: str | None = None, base: str | None = None
) -> DriftFindings:
    """What merging the PR's own changes into the fork head would bring.

    The PR's own changes run from its merge-base with ``upstream`` (or from ``base`` when given) to ``head``.
    Only a PR that changes a file the fork changed, or a file a patch-set depends on (or adds or deletes a
    file where an invariant matches a glob), is merged; the others cost one tree diff.
    """
    start = time.monotonic()
    if base is None:
        assert upstream is not None, "evaluate_pull needs upstream or base"
        status = ctx.repo.name_status(upstream, head, from_merge_base=True)  # one call: merge-base and diff
    else:
        status = ctx.repo.name_status(base, head)
    changed = set(status)
    fork_files = tuple(sorted(changed & ctx.fork_files))
    added_or_deleted = any(letter in "AD" for letter in status.values())
    touched = [s for s in ctx.scopes if changed & s.paths or (s.lists_paths and added_or_deleted)]
    patchsets = tuple(s.id for s in ctx.scopes if changed & s.paths)
    if not fork_files and not touched:
        return DriftFindings(head_sha=head, fork_head=ctx.fork_head, seconds=round(time.monotonic() - start, 4))
    if base is None:
        base = ctx.repo.merge_base(head, upstream or "")
        if base is None:  # name_status above would have failed first; kept for the type
            raise GitError(f"{head[:12]} shares no history with upstream", where=str(ctx.repo.path))
    ours = ctx.fork_tree
    if base != ctx.fork_base:
        # The fork as a sync to the PR's base would leave it: upstream's changes between the fork's base and the
        # PR's are then on both sides, and only the PR's own changes can meet the fork's (without this, a PR
        # editing lines upstream already changed since the fork's last sync reads as a conflict with the fork).
        ours = ctx.repo.merge_tree(ctx.fork_head, base).tree
    synthetic = ctx.repo.commit_tree(ours, parents=(base,), message="ds4sync drift: fork on PR base")
    predicted = ctx.repo.merge_tree(synthetic, head)
    conflicts = tuple(
        DriftConflict(path=c.path, kind=c.kind, related=c.related)
        for c in predicted.conflicts
        if c.path in ctx.fork_files or any(p in ctx.fork_files for p in c.related)
    )
    violations: tuple[DriftViolation, ...] = ()
    ids = {s.id for s in touched}
    if ids:
        report = ctx.check(CommitTree(ctx.repo, predicted.tree), [ps for ps in ctx.patchsets if ps.id in ids])
        found = [v for v in report.violations() if (v.patchset, v.invariant) not in ctx.baseline]
        if found and ours != ctx.fork_tree:  # already broken by the sync to the PR's base: not the PR's doing
            before = ctx.check(CommitTree(ctx.repo, ours), [ps for ps in ctx.patchsets if ps.id in ids])
            synced = {(v.patchset, v.invariant) for v in before.violations()}
            found = [v for v in found if (v.patchset, v.invariant) not in synced]
        violations = tuple(DriftViolation(patchset=v.patchset, invariant=v.invariant, detail=v.detail) for v in found)
    return DriftFindings(
        head_sha=head,
        fork_head=ctx.fork_head,
        merge_base=base,
        fork_files=fork_files,
        conflicts=conflicts,
        violations=violations,
        patchsets=patchsets,
        semantic=semantic_findings(ctx, head=head, merged_tree=predicted.tree),
        merged=True,
        seconds=round(time.monotonic() - start, 4),
    )
