"""What a merge of an upstream SHA into the fork brings: counts, conflicts, semantic overlaps.

``plan_merge`` predicts it all with ``git merge-tree --write-tree`` (no work tree is
touched); the merge phase records the same shape, with each conflict's resolution.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ds4sync.core.git import Conflict, GitRepo
from ds4sync.core.mergetree import MARKER_KINDS

Resolution = Literal["recorded", "rule", "person", "unresolved"]

EOL_HINT = (
    "the sides differ only in line endings (one side renormalised them): set a `text`/`eol` attribute in "
    ".gitattributes and redo the merge with `git -c merge.renormalize=true merge` (git-merge(1), renormalize)"
)


class ConflictEntry(BaseModel):
    """One conflicted path: its kind and, once known, how it was resolved.

    ``resolution``: ``recorded`` (a resolution replayed from the shared rerere store,
    named in ``store_entry``), ``rule`` (a per-path rule from ds4sync.yaml, named in
    ``rule``), ``person`` (resolved by hand and staged), ``unresolved`` (waiting for a
    person), None in a plan. ``conflict_id`` is rerere's id of the conflict
    (``<hash>`` or ``<hash>.<variant>``); ``stored_as`` the shared-store entry a person's
    resolution was recorded to. ``in_index``: False for a conflict git reports only in
    its messages (nothing in ``git ls-files -u``; a person must look). ``eol_only``: the
    sides differ only in line endings;
    ``hint`` says what git needs from a person for this kind.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    kind: str
    resolution: Resolution | None = None
    rule: str | None = None
    related: tuple[str, ...] = ()
    message: str = ""
    hint: str = ""
    in_index: bool = True
    eol_only: bool = False
    conflict_id: str | None = None
    store_entry: str | None = None
    stored_as: str | None = None

    @property
    def has_markers_kind(self) -> bool:
        """Whether git writes conflict markers for this kind (else only staging resolves it)."""
        return self.kind in MARKER_KINDS


class Overlap(BaseModel):
    """A file both sides changed that git merged without a textual conflict.

    These are the places where a clean merge can still be wrong; lines are added plus
    deleted since the merge-base, on each side, with renames followed (``path`` is where
    the merge puts the file; ``base_path`` where it was at the merge-base, when renamed).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    upstream_lines: int
    fork_lines: int
    base_path: str | None = None


class MergeSummary(BaseModel):
    """The merge of ``upstream_sha`` into ``fork_sha``, predicted (plan) or done (merge).

    ``upstream_commits``: commits brought in (in upstream, not in the fork);
    ``fork_commits``: fork-only commits; ``*_files``: paths changed since the
    merge-base on each side; ``remerge_diff_paths``: after commit, the paths where the
    committed result differs from git's automatic merge (``git show --remerge-diff``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    upstream_sha: str
    fork_sha: str
    merge_base: str
    upstream_commits: int
    fork_commits: int
    upstream_files: tuple[str, ...] = ()
    fork_files: tuple[str, ...] = ()
    conflicts: tuple[ConflictEntry, ...] = ()
    overlaps: tuple[Overlap, ...] = ()
    merge_commit: str | None = None
    remerge_diff_paths: tuple[str, ...] = ()
    plan_seconds: float = Field(default=0.0, description="wall time of the prediction, s")

    def conflict_kinds(self) -> dict[str, int]:
        """Conflict counts by kind, most frequent first."""
        return dict(Counter(c.kind for c in self.conflicts).most_common())

    def resolutions(self) -> dict[str, int]:
        """Conflict counts by resolution (``recorded``, ``rule``, ``person``, ``unresolved``)."""
        return dict(Counter(c.resolution or "unresolved" for c in self.conflicts).most_common())

    def brief(self) -> dict[str, object]:
        """The JSON contract of ``plan --json`` / ``merge --json``."""
        return {
            "upstream_sha": self.upstream_sha,
            "fork_sha": self.fork_sha,
            "merge_base": self.merge_base,
            "upstream_commits": self.upstream_commits,
            "fork_commits": self.fork_commits,
            "upstream_files_changed": len(self.upstream_files),
            "fork_files_changed": len(self.fork_files),
            "conflicts": [
                {"path": c.path, "kind": c.kind, "resolution": c.resolution}
                | ({"eol_only": True} if c.eol_only else {})
                | ({"store_entry": c.store_entry} if c.store_entry else {})
                | ({"hint": c.hint} if c.hint else {})
                for c in self.conflicts
            ],
            "overlaps": [o.model_dump(exclude_none=True) for o in self.overlaps],
            "merge_commit": self.merge_commit,
            "remerge_diff_paths": list(self.remerge_diff_paths),
        }


def plan_merge(repo: GitRepo, *, fork_sha: str, upstream_sha: str, merge_base: str) -> MergeSummary:
    """Predict merging ``upstream_sha`` into ``fork_sha`` without touching a work tree.

    Conflicts and their kinds come from ``git merge-tree --write-tree``, named with the
    paths ``git merge`` writes in the sync worktree (``path~HEAD``); overlaps are the files
    changed on both sides since ``merge_base`` (renames followed on both sides) that are
    not conflicted, with the lines of the real change on each side. The independent git
    queries run concurrently.
    """
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=4) as pool:
        predicted = pool.submit(repo.merge_tree, fork_sha, upstream_sha)
        upstream_moves = pool.submit(repo.renamed_names, merge_base, upstream_sha)
        fork_moves = pool.submit(repo.renamed_names, merge_base, fork_sha)
        counts = pool.submit(
            lambda: (repo.count_commits(upstream_sha, fork_sha), repo.count_commits(fork_sha, upstream_sha))
        )
        conflicts = predicted.result().conflicts
        eol = pool.submit(_eol_only_paths, repo, conflicts)
        overlaps = _overlaps(
            pool, repo, merge_base, upstream_sha, fork_sha, upstream_moves.result(), fork_moves.result(), conflicts
        )
        upstream_commits, fork_commits = counts.result()
        eol_paths = eol.result()
    return MergeSummary(
        upstream_sha=upstream_sha,
        fork_sha=fork_sha,
        merge_base=merge_base,
        upstream_commits=upstream_commits,
        fork_commits=fork_commits,
        upstream_files=tuple(sorted(_all_names(upstream_moves.result()))),
        fork_files=tuple(sorted(_all_names(fork_moves.result()))),
        conflicts=tuple(
            ConflictEntry(
                path=c.path,
                kind=c.kind,
                related=c.related,
                message=c.message,
                eol_only=c.path in eol_paths,
                in_index=bool(c.stages),
                hint=EOL_HINT if c.path in eol_paths else kind_hint(c),
            )
            for c in conflicts
        ),
        overlaps=overlaps,
        plan_seconds=round(time.perf_counter() - start, 3),
    )


def _all_names(moves: dict[str, str | None]) -> set[str]:
    """Every path a side touched, old and new names (what ``diff --no-renames`` lists)."""
    return set(moves) | {old for old in moves.values() if old}


def _overlaps(
    pool: ThreadPoolExecutor,
    repo: GitRepo,
    base: str,
    upstream_sha: str,
    fork_sha: str,
    upstream_moves: dict[str, str | None],
    fork_moves: dict[str, str | None],
    conflicts: tuple[Conflict, ...],
) -> tuple[Overlap, ...]:
    """Files both sides changed, matched by their merge-base path, at the path the merge writes."""
    conflicted = {c.path for c in conflicts}.union(*(c.related for c in conflicts))
    up_by_base = {old or new: new for new, old in upstream_moves.items()}
    fork_by_base = {old or new: new for new, old in fork_moves.items()}
    pairs = []
    for base_path in sorted(set(up_by_base) & set(fork_by_base)):
        up_path, fork_path = up_by_base[base_path], fork_by_base[base_path]
        merged = up_path if up_path != base_path else fork_path
        if up_path != base_path and fork_path != base_path and up_path != fork_path:
            continue  # renamed differently on each side: a rename/rename conflict, not an overlap
        if {base_path, up_path, fork_path} & conflicted:
            continue
        pairs.append((base_path, up_path, fork_path, merged))
    if not pairs:
        return ()
    up_paths = sorted({p for b, u, _, _ in pairs for p in (b, u)})
    fork_paths = sorted({p for b, _, f, _ in pairs for p in (b, f)})
    up_lines = pool.submit(repo.changes_with_renames, base, upstream_sha, up_paths)
    fork_lines = repo.changes_with_renames(base, fork_sha, fork_paths)
    up_changes = up_lines.result()
    rows = []
    for base_path, up_path, fork_path, merged in pairs:
        up, fork = up_changes.get(up_path), fork_lines.get(fork_path)
        if up is None or fork is None:
            continue
        rows.append(
            Overlap(
                path=merged,
                upstream_lines=up.lines,
                fork_lines=fork.lines,
                base_path=base_path if base_path != merged else None,
            )
        )
    return tuple(rows)


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
    "rename/rename": "both sides renamed it ({related}): keep one name with `git add`, `git rm` the other",
    "rename/add": "a rename collided with an added file: fix the content, then `git add {path}`",
    "binary": "git cannot merge binary files: `git checkout --ours|--theirs -- {path}`, then `git add {path}`",
    "file/directory": "a file and a directory want the same name; git moved one aside ({related}): move or "
    "remove it, then `git add`/`git rm` each path",
    "distinct types": "the path has different types on each side (file, symlink, submodule); git wrote one "
    "beside it ({related}): keep one, then `git add`/`git rm` each path",
    "file location": "added inside a directory the other side renamed; git put it at {path} (was {related}): "
    "keep it there with `git add {path}`, or move it with `git mv` and stage",
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
