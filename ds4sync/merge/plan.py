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

from ds4sync.core.git import GitRepo

Resolution = Literal["recorded", "rule", "person", "unresolved"]


class ConflictEntry(BaseModel):
    """One conflicted path: its kind and, once known, how it was resolved.

    ``resolution``: ``recorded`` (a resolution replayed from the shared rerere store),
    ``rule`` (a per-path rule from ds4sync.yaml, named in ``rule``), ``person`` (resolved
    by hand and then recorded), ``unresolved`` (waiting for a person), None in a plan.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    kind: str
    resolution: Resolution | None = None
    rule: str | None = None
    related: tuple[str, ...] = ()
    message: str = ""


class Overlap(BaseModel):
    """A file both sides changed that git merged without a textual conflict.

    These are the places where a clean merge can still be wrong; lines are added plus
    deleted since the merge-base, on each side.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    upstream_lines: int
    fork_lines: int


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
            "conflicts": [{"path": c.path, "kind": c.kind, "resolution": c.resolution} for c in self.conflicts],
            "overlaps": [o.model_dump() for o in self.overlaps],
            "merge_commit": self.merge_commit,
            "remerge_diff_paths": list(self.remerge_diff_paths),
        }


def plan_merge(repo: GitRepo, *, fork_sha: str, upstream_sha: str, merge_base: str) -> MergeSummary:
    """Predict merging ``upstream_sha`` into ``fork_sha`` without touching a work tree.

    Conflicts and their kinds come from ``git merge-tree --write-tree``; overlaps are
    the files changed on both sides since ``merge_base`` that are not conflicted, with
    lines changed on each side. The independent git queries run concurrently.
    """
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=4) as pool:
        predicted = pool.submit(repo.merge_tree, fork_sha, upstream_sha)
        upstream_names = pool.submit(repo.changed_names, merge_base, upstream_sha)
        fork_names = pool.submit(repo.changed_names, merge_base, fork_sha)
        counts = pool.submit(
            lambda: (repo.count_commits(upstream_sha, fork_sha), repo.count_commits(fork_sha, upstream_sha))
        )
        conflicts = predicted.result().conflicts
        conflicted = {c.path for c in conflicts}.union(*(c.related for c in conflicts))
        both = sorted((set(upstream_names.result()) & set(fork_names.result())) - conflicted)
        upstream_lines = pool.submit(repo.changes, merge_base, upstream_sha, both)
        fork_lines = repo.changes(merge_base, fork_sha, both)
        overlaps = tuple(
            Overlap(path=path, upstream_lines=upstream_lines.result()[path].lines, fork_lines=fork_lines[path].lines)
            for path in both
        )
        upstream_commits, fork_commits = counts.result()
    return MergeSummary(
        upstream_sha=upstream_sha,
        fork_sha=fork_sha,
        merge_base=merge_base,
        upstream_commits=upstream_commits,
        fork_commits=fork_commits,
        upstream_files=tuple(sorted(upstream_names.result())),
        fork_files=tuple(sorted(fork_names.result())),
        conflicts=tuple(
            ConflictEntry(path=c.path, kind=c.kind, related=c.related, message=c.message) for c in conflicts
        ),
        overlaps=overlaps,
        plan_seconds=round(time.perf_counter() - start, 3),
    )


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
