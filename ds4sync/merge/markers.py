"""Conflict markers a merge may have left: every path it touched, at every size git may have used.

A person's resolution is accepted only when none of the paths a conflict touched holds a
conflict hunk, whatever git called the conflict: git writes markers for content and add/add
conflicts, but also into both targets of a rename/rename where both sides edited, into a file
a directory rename moved onto an added one (git says add/add, ds4sync ``file location``), and
into the copies it writes beside a path (``path~HEAD``). Both the work-tree file and the
staged blob (what the merge commit will hold) are read.

The size git writes markers at is the path's ``conflict-marker-size`` attribute as git read it
*when it merged*: the fork's attributes (the work tree before the merge), not the merged tree's
when the merge itself changes ``.gitattributes``. The sizes checked are the attribute's value
in the fork head, the upstream commit and the merged work tree, and the default 7; each also
plus one (the inner content merge of a rename/rename, merge-ort.c ``handle_content_merge``
with ``extra_marker_size`` 1) and plus two (a virtual merge base of a criss-cross merge,
``2 * call_depth``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ds4sync.core.git import DEFAULT_MARKER_SIZE, GitRepo, has_conflict_hunk

#: What git adds to a path's marker size for inner merges (see the module docstring).
EXTRA_MARKER_SIZES = (0, 1, 2)
_REGULAR_MODES = ("100644", "100755")


def touched_paths(wt: GitRepo, paths: Iterable[str]) -> list[str]:
    """``paths`` (each conflict's path and related paths) plus the side copies git wrote beside them
    (``path~HEAD``, ``path~<branch>``) that exist in the work tree or the index."""
    wanted = {p for p in paths if p}
    index = set(wt.index_paths())  # every index entry, of any stage
    for path in list(wanted):
        prefix = f"{path}~"
        wanted.update(p for p in index if p.startswith(prefix))
        folder = wt.path / path
        parent = folder.parent
        if parent.is_dir():
            wanted.update(str(child.relative_to(wt.path)) for child in parent.glob(f"{_glob_escape(folder.name)}~*"))
    return sorted(wanted)


def sizes_git_used(wt: GitRepo, paths: Iterable[str], *, commits: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """For each path, every marker length git may have written: attribute sizes in the work tree and at
    each of ``commits`` (the fork head, the upstream commit) and the default, each plus
    :data:`EXTRA_MARKER_SIZES`; ascending."""
    wanted = sorted(set(paths))
    found: dict[str, set[int]] = {p: {DEFAULT_MARKER_SIZE} for p in wanted}
    if not wanted:
        return {}
    for path, size in wt.marker_sizes(wanted).items():
        found[path].add(size)
    for commit in dict.fromkeys(commits):
        for path, size in marker_sizes_at(wt, commit, wanted).items():
            found[path].add(size)
    return {p: tuple(sorted({s + extra for s in sizes for extra in EXTRA_MARKER_SIZES})) for p, sizes in found.items()}


def marker_sizes_at(wt: GitRepo, commit: str, paths: Iterable[str]) -> dict[str, int]:
    """The ``conflict-marker-size`` git reads for each path from the ``.gitattributes`` files of ``commit``
    (plus ``info/attributes``), through a private index holding that commit's tree; 7 where unset."""
    return wt.marker_sizes_at(commit, paths)


def marked_paths(wt: GitRepo, sizes: Mapping[str, Iterable[int]]) -> dict[str, str]:
    """The paths of ``sizes`` whose work-tree file or staged blob holds a conflict hunk at one of its sizes:
    path -> where (``work tree``, ``index``, or both). Symlinks and submodules hold no markers."""
    found: dict[str, list[str]] = {}
    for path, lengths in sizes.items():
        file = wt.path / path
        if file.is_file() and not file.is_symlink() and _has_hunk(file.read_bytes(), lengths):
            found.setdefault(path, []).append("work tree")
    staged = {p: oid for p, (mode, oid) in wt.index_entries(sizes).items() if mode in _REGULAR_MODES}
    blobs = wt.blobs(staged.values())
    for path, oid in staged.items():
        if oid in blobs and _has_hunk(blobs[oid], sizes[path]):
            found.setdefault(path, []).append("index")
    return {path: " and ".join(where) for path, where in sorted(found.items())}


def _has_hunk(data: bytes, sizes: Iterable[int]) -> bool:
    return any(has_conflict_hunk(data, size) for size in sizes)


def _glob_escape(name: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)
