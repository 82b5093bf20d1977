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
    :func:`conflicts_hunks` reads several conflicts with fewer history walks.
    """
    return conflicts_hunks(
        repo, [conflict], sides, patchsets=patchsets, marker_sizes={conflict.path: marker_size}, pool=pool
    ).get(conflict.path, ())


def conflicts_hunks(
    repo: GitRepo,
    conflicts: Sequence[Conflict],
    sides: Sides,
    *,
    patchsets: Sequence[PatchSet] = (),
    marker_sizes: dict[str, int] | None = None,
    pool: ThreadPoolExecutor | None = None,
) -> dict[str, tuple[ConflictHunk, ...]]:
    """:func:`conflict_hunks` of each content conflict, by path (other kinds are left out).

    The hunks are read conflict by conflict (in ``pool`` when given); their histories are then asked
    together (:func:`_with_history`), so that one walk of a side's history answers a range of every file.
    """
    sizes = marker_sizes or {}
    wanted = [c for c in conflicts if c.kind in _HUNK_KINDS and {s for s, _m, _o in c.stages} == {1, 2, 3}]
    blobs = repo.blobs(oid for c in wanted for _stage, _mode, oid in c.stages)  # one read for every conflict
    present = _Present(repo, sides, [c.path for c in wanted])

    def read(conflict: Conflict) -> tuple[list[ConflictHunk], dict[str, int]]:
        return _hunks_of(repo, conflict, blobs, present, patchsets=patchsets, marker_size=sizes.get(conflict.path, 7))

    read_all = pool.map(read, wanted) if pool is not None else map(read, wanted)
    found = {c.path: hunks for c, hunks in zip(wanted, read_all, strict=True) if hunks[0]}
    return _with_history(repo, found, sides, pool=pool)


def _hunks_of(
    repo: GitRepo,
    conflict: Conflict,
    blobs: dict[str, bytes],
    present: _Present,
    *,
    patchsets: Sequence[PatchSet],
    marker_size: int,
) -> tuple[list[ConflictHunk], dict[str, int]]:
    """One content conflict's hunks without their history, and the number of lines of each side's file
    (``blobs``: its stages' contents by oid)."""
    oids = {stage: oid for stage, _mode, oid in conflict.stages}
    base, fork, upstream = (blobs.get(oids[s], b"") for s in (1, 2, 3))
    _, merged = repo.merge_file_diff3(
        fork, base, upstream, marker_size=marker_size, labels=("fork", "merge-base", "upstream")
    )
    split = split_diff3(merged.decode("utf-8", "replace"), marker_size=marker_size)
    paths = _side_paths(repo, conflict.path, present)
    texts = {
        name: data.decode("utf-8", "replace").splitlines(keepends=True)
        for name, data in (("base", base), ("fork", fork), ("upstream", upstream))
    }
    cursors = dict.fromkeys(texts, 0)
    owners = _file_owners(repo, conflict.path, patchsets, also=paths["fork"])
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
                owners=_hunk_owners(owners, fork_text),
            )
        )
    return hunks, {name: len(text) for name, text in texts.items()}


class _Present:
    """Whether a path is a file at the merge-base, the fork head and upstream: the conflicted paths read in one
    ``ls-tree`` per side, any other path (a rename's old name) asked alone."""

    def __init__(self, repo: GitRepo, sides: Sides, paths: Sequence[str]) -> None:
        self.repo, self.sides, self._asked = repo, sides, frozenset(paths)
        revs = (sides.base, sides.fork, sides.upstream)
        self._files = {rev: set(repo.blob_ids(rev, paths)) for rev in dict.fromkeys(revs)} if paths else {}

    def file(self, rev: str, path: str) -> bool:
        """Whether ``path`` names a blob in ``rev``'s tree (a file or a symlink)."""
        if path in self._asked and rev in self._files:
            return path in self._files[rev]
        return self.repo.object_type(f"{rev}:{path}") == "blob"


def _side_paths(repo: GitRepo, path: str, present: _Present) -> dict[str, str | None]:
    """Where the merged ``path`` is at the merge-base, in the fork and upstream (a rename on either side)."""
    sides = present.sides
    found: dict[str, str | None] = {}
    for name, rev in (("base", sides.base), ("fork", sides.fork), ("upstream", sides.upstream)):
        found[name] = path if present.file(rev, path) else None
    if all(found.values()):
        return found
    for renamer in (sides.upstream, sides.fork):
        old = _renames(repo, sides.base, renamer).get(path)
        if old:
            for name, rev in (("base", sides.base), ("fork", sides.fork), ("upstream", sides.upstream)):
                if found[name] is None and present.file(rev, old):
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


#: One history question: (side's head, first-parent, path at that side, (start, end)).
_Walk = tuple[str, bool, str, tuple[int, int]]


def _with_history(
    repo: GitRepo,
    found: dict[str, tuple[list[ConflictHunk], dict[str, int]]],
    sides: Sides,
    *,
    pool: ThreadPoolExecutor | None,
) -> dict[str, tuple[ConflictHunk, ...]]:
    """Each conflict's hunks (by path, with each side's line count) with the upstream first-parent
    commits and the fork commits that changed their lines (:func:`_line_histories`)."""
    asked: dict[tuple[str, int, str], _Walk | None] = {}
    for path, (hunks, totals) in found.items():
        for hunk in hunks:
            for side, head, first_parent in (("upstream", sides.upstream, True), ("fork", sides.fork, False)):
                at = hunk.upstream_path if side == "upstream" else hunk.fork_path
                start = hunk.upstream_start if side == "upstream" else hunk.fork_start
                count = hunk.upstream_count if side == "upstream" else hunk.fork_count
                span = _range(start, count, totals[side]) if at and start else None
                asked[(path, hunk.index, side)] = (head, first_parent, at, span) if at and span else None
    answers = _line_histories(repo, sides.base, {w for w in asked.values() if w is not None}, pool=pool)

    def commits(key: tuple[str, int, str]) -> tuple[HunkCommit, ...]:
        walk = asked[key]
        return answers[walk] if walk is not None else ()

    return {
        path: tuple(
            h.model_copy(
                update={
                    "upstream_commits": commits((path, h.index, "upstream")),
                    "fork_commits": commits((path, h.index, "fork")),
                }
            )
            for h in hunks
        )
        for path, (hunks, _totals) in found.items()
    }


def _line_histories(
    repo: GitRepo, base: str, walks: set[_Walk], *, pool: ThreadPoolExecutor | None
) -> dict[_Walk, tuple[HunkCommit, ...]]:
    """git's ``log -L`` answer to every walk, asked in as few walks of each side's history as git answers
    exactly: one range of each file per walk (:meth:`GitRepo.line_logs`), for the files that keep one name
    in the whole walk, on a side whose walk holds no merge (upstream's first-parent line of squashed PRs, a
    fork range without merges). Any other range, and every range of a walk git cannot split, is asked alone."""
    by_side: dict[tuple[str, bool], dict[str, list[tuple[int, int]]]] = {}
    for head, first_parent, path, span in sorted(walks):
        by_side.setdefault((head, first_parent), {}).setdefault(path, []).append(span)

    def batchable(side: tuple[str, bool]) -> set[str]:
        head, first_parent = side
        paths = by_side[side]
        if len(paths) < 2 or repo.has_merges(base, head, first_parent=first_parent):
            return set()
        return set(paths) - repo.paths_added_or_deleted(base, head, paths, first_parent=first_parent)

    sides = list(by_side)
    named = list(pool.map(batchable, sides)) if pool is not None else [batchable(s) for s in sides]
    groups: list[tuple[str, bool, list[tuple[str, int, int]]]] = []
    for (head, first_parent), same in zip(sides, named, strict=True):
        for path, spans in by_side[(head, first_parent)].items():
            if path not in same:
                groups += [(head, first_parent, [(path, *span)]) for span in spans]
        spans_of = {p: by_side[(head, first_parent)][p] for p in sorted(same)}
        for turn in range(max((len(spans) for spans in spans_of.values()), default=0)):
            groups.append(
                (head, first_parent, [(p, *spans[turn]) for p, spans in spans_of.items() if turn < len(spans)])
            )

    def run(group: tuple[str, bool, list[tuple[str, int, int]]]) -> list[tuple[_Walk, tuple[HunkCommit, ...]]]:
        head, first_parent, spans = group
        together = repo.line_logs(base, head, spans, first_parent=first_parent) if len(spans) > 1 else None
        rows = []
        for path, start, end in spans:
            found = (
                together[path]
                if together is not None
                else repo.line_log(base, head, path, start, end, first_parent=first_parent)
            )
            commits = tuple(HunkCommit(sha=c.sha, subject=c.subject, pr=pr_number(c.subject)) for c in found)
            rows.append(((head, first_parent, path, (start, end)), commits))
        return rows

    done = pool.map(run, groups) if pool is not None else map(run, groups)
    return {walk: commits for rows in done for walk, commits in rows}


def owners_of(
    repo: GitRepo, path: str, fork_text: str, patchsets: Sequence[PatchSet], *, also: str | None = None
) -> tuple[HunkOwner, ...]:
    """The patch-sets that own the fork side of a hunk in ``path``, the most specific first.

    A patch-set owns it when a line its patches add is in ``fork_text`` (``patch lines``), when its
    patches touch the file (``patch``), or when one of its invariants reads the file (``invariant``).
    """
    return _hunk_owners(_file_owners(repo, path, patchsets, also=also), fork_text)


@dataclass(frozen=True)
class _FileOwner:
    """What makes a patch-set an owner of a file's hunks: the stripped lines its patches add to the file (None
    when they do not touch it) and whether an invariant reads the file."""

    patchset: PatchSet
    added: frozenset[str] | None
    invariant: bool


def _file_owners(
    repo: GitRepo, path: str, patchsets: Sequence[PatchSet], *, also: str | None = None
) -> list[_FileOwner]:
    """The patch-sets that touch ``path`` (or ``also``, its fork name) or read it: read once per file, every
    hunk of its conflict shares them."""
    names = {path, *([also] if also else [])}
    found = []
    for ps in patchsets:
        files = ps.patch_files() if ps.folder is not None else []
        added = frozenset(_added_lines(files, names)) if files and names & _patch_paths(repo, tuple(files)) else None
        invariant = any(_invariant_reads(inv, name) for inv in ps.invariants for name in names)
        if added is not None or invariant:
            found.append(_FileOwner(ps, added, invariant))
    return found


def _hunk_owners(owners: Sequence[_FileOwner], fork_text: str) -> tuple[HunkOwner, ...]:
    """:func:`owners_of` from the file's owners (:func:`_file_owners`) and the hunk's fork text."""
    fork_lines = {line.strip() for line in fork_text.splitlines() if len(line.strip()) > 3}
    found: list[tuple[int, HunkOwner]] = []
    for owner in owners:
        ps, matched = owner.patchset, []
        if owner.added is not None:
            if owner.added & fork_lines:
                matched.append("patch lines")
            matched.append("patch")
        if owner.invariant:
            matched.append("invariant")
        rank = 0 if "patch lines" in matched else 1 if "patch" in matched else 2
        found.append(
            (
                rank,
                HunkOwner(patchset=ps.id, title=ps.title, rationale=ps.rationale.strip(), matched_by=tuple(matched)),
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
