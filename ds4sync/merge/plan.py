"""What a merge of an upstream SHA into the fork brings: counts, conflicts, semantic overlaps.

``plan_merge`` predicts it all with ``git merge-tree --write-tree`` (no work tree is
touched); the merge phase records the same shape, with each conflict's resolution.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ds4sync.core.git import Conflict, FileChange, GitRepo
from ds4sync.core.git.mergetree import MergeTreeResult
from ds4sync.merge.provenance import Sides, conflicts_hunks
from ds4sync.models.merge_hunks import ConflictHunk
from ds4sync.models.merge_results import ConflictEntry, MergeSummary, Overlap
from ds4sync.patchsets.model import PatchSet

EOL_HINT = (
    "the sides differ only in line endings (one side renormalised them): set a `text`/`eol` attribute in "
    ".gitattributes and redo the merge with `git -c merge.renormalize=true merge` (git-merge(1), renormalize)"
)


def plan_merge(
    repo: GitRepo,
    *,
    fork_sha: str,
    upstream_sha: str,
    merge_base: str | Callable[[], str],
    patchsets: Sequence[PatchSet] = (),
) -> MergeSummary:
    """Predict merging ``upstream_sha`` into ``fork_sha`` without touching a work tree.

    Conflicts and their kinds come from ``git merge-tree --write-tree``, named with the
    paths ``git merge`` writes in the sync worktree (``path~HEAD``). Overlaps are the paths
    that merge merged three-way and cleanly (its ``Auto-merging`` messages, renames followed
    by git), with the lines of the real change on each side since the merge-base. The
    independent git queries run concurrently; ``merge_base`` may be a function that finds it
    (and raises for unrelated histories), which then runs beside ``git merge-tree``. Each content
    conflict carries its hunks with their provenance (:mod:`ds4sync.merge.provenance`; owners from
    ``patchsets``).
    """
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=4) as pool:
        predicted = pool.submit(repo.merge_tree, fork_sha, upstream_sha)
        if callable(merge_base):
            merge_base = merge_base()
        upstream_status = pool.submit(repo.name_status, merge_base, upstream_sha)
        fork_status = pool.submit(repo.name_status, merge_base, fork_sha)
        counts = pool.submit(repo.count_apart, upstream_sha, fork_sha)
        sides = _Sides(repo, merge_base, upstream_sha, fork_sha, upstream_status.result(), fork_status.result())
        both = sides.changed_on_both()  # read while merge-tree runs: every overlap git can report in place
        up_lines = pool.submit(repo.changes, merge_base, upstream_sha, both)
        fork_lines = pool.submit(repo.changes, merge_base, fork_sha, both)
        result = predicted.result()
        eol = pool.submit(_eol_only_paths, repo, result.conflicts)
        overlaps = _overlaps(pool, sides, result, (up_lines.result(), fork_lines.result()))
        upstream_commits, fork_commits = counts.result()
        eol_paths = eol.result()
        hunks = _hunks(repo, result, Sides(merge_base, fork_sha, upstream_sha), patchsets, pool)
    return MergeSummary(
        upstream_sha=upstream_sha,
        fork_sha=fork_sha,
        merge_base=merge_base,
        upstream_commits=upstream_commits,
        fork_commits=fork_commits,
        upstream_files=tuple(sorted(sides.upstream_status)),
        fork_files=tuple(sorted(sides.fork_status)),
        conflicts=tuple(
            ConflictEntry(
                path=c.path,
                kind=c.kind,
                related=c.related,
                message=c.message,
                eol_only=c.path in eol_paths,
                in_index=bool(c.stages),
                hint=EOL_HINT if c.path in eol_paths else kind_hint(c),
                hunks=hunks.get(c.path, ()),
            )
            for c in result.conflicts
        ),
        overlaps=overlaps,
        plan_seconds=round(time.perf_counter() - start, 3),
    )


def _hunks(
    repo: GitRepo, result: MergeTreeResult, sides: Sides, patchsets: Sequence[PatchSet], pool: ThreadPoolExecutor
) -> dict[str, tuple[ConflictHunk, ...]]:
    """Each content conflict's hunks with their provenance, by path."""
    wanted = [c for c in result.conflicts if c.kind == "content"]
    if not wanted:
        return {}
    sizes = repo.marker_sizes([c.path for c in wanted])
    return conflicts_hunks(repo, wanted, sides, patchsets=patchsets, marker_sizes=sizes, pool=pool)


@dataclass(frozen=True)
class _Sides:
    """The two sides of a merge, each as git's ``--name-status --no-renames`` from the merge-base."""

    repo: GitRepo
    base: str
    upstream_sha: str
    fork_sha: str
    upstream_status: dict[str, str]
    fork_status: dict[str, str]

    def changed_on_both(self) -> list[str]:
        """Paths both sides changed in place (neither deleted nor added them): the overlaps without a rename."""
        return sorted(
            p
            for p, status in self.upstream_status.items()
            if status in ("M", "T") and self.fork_status.get(p) in ("M", "T")
        )

    def sources(self, merged: list[str], *, upstream: bool) -> dict[str, str]:
        """Where each of ``merged``, a path this side added, was at the merge-base: new -> old.

        Only the files this side deleted and the other side changed can be the source
        (merge-ort's "relevant sources"), so git's rename search runs over those alone;
        when it pairs none with a path, the side's whole rename search is the fallback.
        """
        mine, theirs = (
            (self.upstream_status, self.fork_status) if upstream else (self.fork_status, self.upstream_status)
        )
        head = self.upstream_sha if upstream else self.fork_sha
        added = [p for p in merged if mine.get(p) == "A"]
        if not added:
            return {}
        candidates = [p for p, status in mine.items() if status == "D" and p in theirs]
        found = {
            new: old for new, old in self.repo.renamed_names(self.base, head, [*candidates, *added]).items() if old
        }
        if any(p not in found for p in added):
            found = {new: old for new, old in self.repo.renamed_names(self.base, head).items() if old}
        return {p: found[p] for p in added if p in found}


def _overlaps(
    pool: ThreadPoolExecutor,
    sides: _Sides,
    result: MergeTreeResult,
    in_place: tuple[dict[str, FileChange], dict[str, FileChange]],
) -> tuple[Overlap, ...]:
    """The paths git merged three-way without a conflict, with each side's changed lines.

    ``in_place``: each side's line counts of the paths both sides changed at one path; a
    path git merged after a rename is counted here, with git's rename detection.
    """
    conflicted = {c.path for c in result.conflicts}.union(*(c.related for c in result.conflicts))
    merged = [p for p in result.auto_merged if p not in conflicted]
    if not merged:
        return ()
    moved = {p for p in merged if p not in in_place[0] or p not in in_place[1]}
    up_moves = pool.submit(sides.sources, sorted(moved), upstream=True)
    fork_from = sides.sources(sorted(moved), upstream=False)
    up_from = up_moves.result()
    rows = []  # (path, base path, path upstream, path in the fork)
    for path in sorted(merged):
        base_path = up_from.get(path) or fork_from.get(path) or path
        up_path = path if sides.upstream_status.get(path) == "A" else base_path
        fork_path = path if sides.fork_status.get(path) == "A" else base_path
        rows.append((path, base_path, up_path, fork_path))
    renamed = [r for r in rows if r[0] in moved]
    up_changes, fork_changes = dict(in_place[0]), dict(in_place[1])
    if renamed:
        up_renamed = pool.submit(
            sides.repo.changes_with_renames,
            sides.base,
            sides.upstream_sha,
            sorted({p for r in renamed for p in r[1:3]}),
        )
        fork_changes |= sides.repo.changes_with_renames(
            sides.base, sides.fork_sha, sorted({p for r in renamed for p in (r[1], r[3])})
        )
        up_changes |= up_renamed.result()
    overlaps = []
    for path, base_path, up_path, fork_path in rows:
        up, fork = up_changes.get(up_path), fork_changes.get(fork_path)
        if up is None or fork is None:
            continue
        overlaps.append(
            Overlap(
                path=path,
                upstream_lines=up.lines,
                fork_lines=fork.lines,
                base_path=base_path if base_path != path else None,
            )
        )
    return tuple(overlaps)


def _eol_only_paths(repo: GitRepo, conflicts: tuple[Conflict, ...]) -> set[str]:
    """Content conflicts that disappear once CRLF line endings are normalised to LF (blobs read in one batch)."""
    triples = {
        c.path: {stage: oid for stage, _mode, oid in c.stages}
        for c in conflicts
        if c.kind == "content" and {s for s, _m, _o in c.stages} == {1, 2, 3}
    }
    blobs = repo.blobs(oid for oids in triples.values() for oid in oids.values())
    found = set()
    for path, oids in triples.items():
        data = {stage: blobs.get(oid, b"") for stage, oid in oids.items()}
        if not any(b"\r\n" in blob for blob in data.values()):
            continue
        if repo.merge_file_clean(*(data[s].replace(b"\r\n", b"\n") for s in (2, 1, 3))):
            found.add(path)
    return found


_HINTS = {
    "content": "edit the conflict markers out; `ds4sync resume` stages the file",
    "add/add": "edit the conflict markers out; `ds4sync resume` stages the file",
    "modify/delete": "upstream deleted it, the fork changed it: keep it with `git add {path}` or drop it with "
    "`git rm {path}`",
    "delete/modify": "the fork deleted it, upstream changed it: keep upstream's with `git add {path}` or drop "
    "it with `git rm {path}`",
    "rename/delete": "one side renamed it, the other deleted it: `git add {path}` to keep it or `git rm {path}`",
    "rename/rename": "both sides renamed it ({related}); where both edited it, git wrote conflict markers into "
    "each new name: edit them out, keep one name with `git add`, `git rm` the other",
    "rename/add": "a rename collided with an added file: fix the content, then `git add {path}`",
    "binary": "git cannot merge binary files: `git checkout --ours|--theirs -- {path}`, then `git add {path}`",
    "file/directory": "a file and a directory want the same name; git moved one aside ({related}): move or "
    "remove it, then `git add`/`git rm` each path",
    "distinct types": "the path has different types on each side (file, symlink, submodule); git wrote one "
    "beside it ({related}): keep one, then `git add`/`git rm` each path",
    "file location": "added inside a directory the other side renamed; git put it at {path} (was {related}), "
    "with conflict markers if the other side added a file there too: edit them out, keep it there with "
    "`git add {path}`, or move it with `git mv` and stage",
    "directory rename split": "the other side split {path} into several directories and git could not tell "
    "where the new files go (it records nothing in the index): move them with `git mv` if needed, then "
    "`ds4sync resume`",
    "directory rename collision": "a directory rename collides with another path: move one, then `git add`",
    "submodule": "pick the submodule commit: `git update-index --cacheinfo 160000,<commit>,{path}`{sides}",
}


def kind_hint(conflict: Conflict) -> str:
    """What git needs from a person to resolve this kind of conflict (a command, with the paths filled in)."""
    template = _HINTS.get(conflict.kind, "resolve it, then `git add`/`git rm` {path}")
    oids = {stage: oid for stage, mode, oid in conflict.stages if mode == "160000"}
    sides = ""
    if conflict.kind == "submodule" and oids:
        sides = " (" + ", ".join(f"{n} {oids[s][:12]}" for s, n in ((2, "fork"), (3, "upstream")) if s in oids) + ")"
    return template.format(path=conflict.path, related=", ".join(conflict.related) or "-", sides=sides)


def merge_message(
    summary: MergeSummary, *, upstream_name: str, upstream_ref: str, fork_name: str, fork_branch: str, run_id: str
) -> str:
    """The merge commit message: upstream repo and SHA, fork branch, and the counts."""
    kinds = ", ".join(f"{kind} {n}" for kind, n in summary.conflict_kinds().items()) or "none"
    how = ", ".join(f"{res} {n}" for res, n in summary.resolutions().items()) if summary.conflicts else "n/a"
    return (
        f"Merge {upstream_name}@{summary.upstream_sha[:12]} into {fork_name}:{fork_branch}\n\n"
        f"Merge {upstream_name} {upstream_ref} at {summary.upstream_sha}\n"
        f"into {fork_branch} at {summary.fork_sha}; both histories are kept.\n\n"
        f"Upstream commits brought in: {summary.upstream_commits}\n"
        f"Fork-only commits: {summary.fork_commits}\n"
        f"Conflicted files: {len(summary.conflicts)} ({kinds})\n"
        f"Resolved by: {how}\n"
        f"Semantic overlaps (clean merges of files changed on both sides): {len(summary.overlaps)}\n\n"
        f"Ds4sync-Run: {run_id}\n"
    )
