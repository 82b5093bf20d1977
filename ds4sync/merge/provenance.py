"""Provenance of every conflict hunk: who changed its lines on each side since the merge-base, and which
patch-set owns the fork side.

The hunks are git's own (``git merge-file --diff3`` of the three stage blobs merge-tree names); the
history is git's (``git log -L`` over ``merge-base..side``, first-parent on the upstream side so each
commit is a merged PR, renames followed by git); the owner is read from the profile's patch-sets
(their patches and invariants name files and lines).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ds4sync.core.errors import ConfigError
from ds4sync.core.git import FULL_SHA_RE, GitRepo
from ds4sync.core.git.mergetree import Conflict
from ds4sync.core.paths import path_matches
from ds4sync.models.merge_hunks import ConflictHunk, HunkCommit, HunkOwner, locate, pr_number, split_diff3
from ds4sync.patchsets.model import (
    AbsentInvariant,
    ContainsInvariant,
    FileExistsInvariant,
    PatchSet,
    SymbolInvariant,
    load_catalogue,
)

#: Conflicts with three stages whose hunks git writes into the file.
_HUNK_KINDS = frozenset({"content"})


@dataclass(frozen=True)
class Sides:
    """The merge a conflict belongs to: merge-base, fork head and upstream SHA."""

    base: str
    fork: str
    upstream: str


def load_owners(patches_dir: Path) -> list[PatchSet]:
    """The profile's patch-sets, or none when the catalogue is missing or broken (``patches check`` says why)."""
    try:
        return load_catalogue(patches_dir)[1]
    except ConfigError:
        return []


def conflict_hunks(
    repo: GitRepo,
    conflict: Conflict,
    sides: Sides,
    *,
    patchsets: Sequence[PatchSet] = (),
    marker_size: int = 7,
    pool: ThreadPoolExecutor | None = None,
) -> tuple[ConflictHunk, ...]:
    """The hunks of one content conflict with their provenance; () for other kinds.

    ``conflict`` is merge-tree's (its stages name the three blobs). Paths per side: the merged path
    where that side has it, else the name the other side renamed it from (git's rename detection).
    """
    oids = {stage: oid for stage, _mode, oid in conflict.stages}
    if conflict.kind not in _HUNK_KINDS or set(oids) != {1, 2, 3}:
        return ()
    blobs = repo.blobs(oids.values())
    base, fork, upstream = (blobs.get(oids[s], b"") for s in (1, 2, 3))
    _, merged = repo.merge_file_diff3(
        fork, base, upstream, marker_size=marker_size, labels=("fork", "merge-base", "upstream")
    )
    split = split_diff3(merged.decode("utf-8", "replace"), marker_size=marker_size)
    paths = _side_paths(repo, conflict.path, sides)
    texts = {
        name: data.decode("utf-8", "replace").splitlines(keepends=True)
        for name, data in (("base", base), ("fork", fork), ("upstream", upstream))
    }
    cursors = dict.fromkeys(texts, 0)
    hunks = []
    for index, (fork_text, base_text, up_text) in enumerate(split.hunks):
        before = split.common[index].splitlines(keepends=True)
        anchor = before[-1] if before else None
        where = {}
        for name, text in (("base", base_text), ("fork", fork_text), ("upstream", up_text)):
            start, count = locate(texts[name], text.splitlines(keepends=True), cursors[name], anchor)
            where[name] = (start, count)
            if start:
                cursors[name] = start - 1 + count
        hunks.append(
            ConflictHunk(
                index=index + 1,
                base=base_text,
                fork=fork_text,
                upstream=up_text,
                base_path=paths["base"],
                fork_path=paths["fork"],
                upstream_path=paths["upstream"],
                base_start=where["base"][0],
                base_count=where["base"][1],
                fork_start=where["fork"][0],
                fork_count=where["fork"][1],
                upstream_start=where["upstream"][0],
                upstream_count=where["upstream"][1],
                owners=owners_of(repo, conflict.path, fork_text, patchsets, also=paths["fork"]),
            )
        )
    return tuple(_with_history(repo, hunks, sides, texts, pool=pool))


def _side_paths(repo: GitRepo, path: str, sides: Sides) -> dict[str, str | None]:
    """Where the merged ``path`` is at the merge-base, in the fork and upstream (a rename on either side)."""
    found: dict[str, str | None] = {}
    for name, rev in (("base", sides.base), ("fork", sides.fork), ("upstream", sides.upstream)):
        found[name] = path if repo.object_type(f"{rev}:{path}") == "blob" else None
    if all(found.values()):
        return found
    for renamer in (sides.upstream, sides.fork):
        old = _renames(repo, sides.base, renamer).get(path)
        if old:
            for name, rev in (("base", sides.base), ("fork", sides.fork), ("upstream", sides.upstream)):
                if found[name] is None and repo.object_type(f"{rev}:{old}") == "blob":
                    found[name] = old
    return found


_RENAMES_LOCK = threading.Lock()


@functools.lru_cache(maxsize=8)
def _renames_once(repo: GitRepo, base: str, head: str) -> dict[str, str | None]:
    return repo.renamed_names(base, head)


def _renames(repo: GitRepo, base: str, head: str) -> dict[str, str | None]:
    """A side's whole rename search (``git diff -M`` from the merge-base), once per plan: every conflicted
    path that one side lacks asks it (conflicts are read side by side, hence the lock), and on the vLLM
    fork each search reads 3,000 changed files. Only commits named by full SHAs are kept (a ref may move)."""
    if not (FULL_SHA_RE.match(base) and FULL_SHA_RE.match(head)):
        return repo.renamed_names(base, head)
    with _RENAMES_LOCK:
        return _renames_once(repo, base, head)


def _range(start: int, count: int, total: int) -> tuple[int, int] | None:
    """The ``-L`` range of a hunk section; a deletion (count 0) spans the lines either side of it."""
    if total == 0:
        return None
    if count:
        return start, start + count - 1
    return max(1, start - 1), min(total, max(1, start))


def _with_history(
    repo: GitRepo,
    hunks: list[ConflictHunk],
    sides: Sides,
    texts: dict[str, list[str]],
    *,
    pool: ThreadPoolExecutor | None,
) -> list[ConflictHunk]:
    """Each hunk with the upstream first-parent commits and the fork commits that changed its lines."""
    jobs = []
    for hunk in hunks:
        for side, head, first_parent in (("upstream", sides.upstream, True), ("fork", sides.fork, False)):
            path = hunk.upstream_path if side == "upstream" else hunk.fork_path
            start = hunk.upstream_start if side == "upstream" else hunk.fork_start
            count = hunk.upstream_count if side == "upstream" else hunk.fork_count
            span = _range(start, count, len(texts[side])) if path and start else None
            jobs.append((hunk.index, side, path, span, head, first_parent))

    def run(job: tuple) -> tuple[int, str, tuple[HunkCommit, ...]]:
        index, side, path, span, head, first_parent = job
        if span is None:
            return index, side, ()
        found = repo.line_log(sides.base, head, path, span[0], span[1], first_parent=first_parent)
        return index, side, tuple(HunkCommit(sha=c.sha, subject=c.subject, pr=pr_number(c.subject)) for c in found)

    results = list(pool.map(run, jobs)) if pool is not None else [run(j) for j in jobs]
    history: dict[tuple[int, str], tuple[HunkCommit, ...]] = {(i, s): c for i, s, c in results}
    return [
        h.model_copy(
            update={"upstream_commits": history[(h.index, "upstream")], "fork_commits": history[(h.index, "fork")]}
        )
        for h in hunks
    ]


def owners_of(
    repo: GitRepo, path: str, fork_text: str, patchsets: Sequence[PatchSet], *, also: str | None = None
) -> tuple[HunkOwner, ...]:
    """The patch-sets that own the fork side of a hunk in ``path``, the most specific first.

    A patch-set owns it when a line its patches add is in ``fork_text`` (``patch lines``), when its
    patches touch the file (``patch``), or when one of its invariants reads the file (``invariant``).
    """
    names = {path, *([also] if also else [])}
    fork_lines = {line.strip() for line in fork_text.splitlines() if len(line.strip()) > 3}
    found: list[tuple[int, HunkOwner]] = []
    for ps in patchsets:
        matched: list[str] = []
        files = ps.patch_files() if ps.folder is not None else []
        if files:
            touched = _patch_paths(repo, tuple(files))
            if names & touched:
                added = _added_lines(files, names)
                if added & fork_lines:
                    matched.append("patch lines")
                matched.append("patch")
        if any(_invariant_reads(inv, name) for inv in ps.invariants for name in names):
            matched.append("invariant")
        if matched:
            rank = 0 if "patch lines" in matched else 1 if "patch" in matched else 2
            found.append(
                (
                    rank,
                    HunkOwner(
                        patchset=ps.id, title=ps.title, rationale=ps.rationale.strip(), matched_by=tuple(matched)
                    ),
                )
            )
    return tuple(owner for _, owner in sorted(found, key=lambda f: (f[0], f[1].patchset)))


@functools.lru_cache(maxsize=256)
def _patch_paths(repo: GitRepo, patches: tuple[Path, ...]) -> frozenset[str]:
    """The paths ``patches`` touch, read once per plan (every hunk of every conflict asks)."""
    return frozenset(repo.patch_paths(patches))


_DIFF_FILE = re.compile(r"^\+\+\+ b/(.+)$")


def _added_lines(patches: Sequence[Path], names: set[str]) -> set[str]:
    """The stripped lines the patches add to any of ``names``."""
    added: set[str] = set()
    for patch in patches:
        current = None
        for line in patch.read_text(encoding="utf-8", errors="replace").splitlines():
            match = _DIFF_FILE.match(line)
            if match:
                current = match.group(1)
            elif current in names and line.startswith("+") and not line.startswith("+++"):
                text = line[1:].strip()
                if len(text) > 3:
                    added.add(text)
    return added


def _invariant_reads(inv: object, path: str) -> bool:
    """Whether an invariant reads ``path`` (its files or path globs, or the module file of its symbol)."""
    if isinstance(inv, ContainsInvariant | AbsentInvariant):
        return any(path_matches(glob, path) for glob in inv.files)
    if isinstance(inv, FileExistsInvariant):
        return any(path_matches(glob, path) for glob in inv.path)
    if isinstance(inv, SymbolInvariant):
        module = inv.symbol.split(":", 1)[0]
        candidates = [module, *inv.also_in]
        root = f"{inv.root.strip('/')}/" if inv.root else ""
        return any(
            path in (f"{root}{m.replace('.', '/')}.py", f"{root}{m.replace('.', '/')}/__init__.py") for m in candidates
        )
    return False
