"""What a merge brings, as the plan predicts it and the merge phase records it: counts, conflicts
(with each one's resolution), semantic overlaps.

Models only, apart from :mod:`ds4sync.merge.plan` (merge-tree) and :mod:`ds4sync.merge.phases`,
which produce them, so that the run record can name them without importing the git module.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ds4sync.core.git.mergetree import MARKER_KINDS
from ds4sync.models.merge_hunks import ConflictHunk
from ds4sync.models.semantic_results import SemanticResult

Resolution = Literal["recorded", "rule", "proposed", "person", "unresolved"]
#: What a committed resolution kept (:func:`ds4sync.merge.kept.sides_kept`).
Kept = Literal["ours", "theirs", "both", "new text", "deleted"]


class ConflictEntry(BaseModel):
    """One conflicted path: its kind and, once known, how it was resolved.

    ``resolution``: ``recorded`` (a resolution replayed from the shared rerere store,
    named in ``store_entry``), ``rule`` (a per-path rule from ds4sync.yaml, named in
    ``rule``), ``person`` (resolved by hand and staged), ``unresolved`` (waiting for a
    person), None in a plan. ``conflict_id`` is rerere's id of the conflict
    (``<hash>`` or ``<hash>.<variant>``); ``stored_as`` the shared-store entry a person's
    resolution was recorded to. ``replayed_blob``: the blob a replay staged (``recorded``);
    ``replay_changed``: ``edited`` or ``deleted`` when a person then changed that replay before
    the commit (the resolution is then the person's). ``markers_accepted``: paths of this conflict the
    person accepted holding a whole conflict hunk on purpose (``resume --accept-markers``). ``kept``: after
    the commit, what the resolution kept: the fork's side (``ours``), upstream's (``theirs``), ``both``,
    ``new text`` or the file ``deleted`` (from the blobs; see :func:`ds4sync.merge.kept.sides_kept`).
    ``in_index``: False for a conflict git reports only in its messages (nothing in ``git ls-files -u``; a
    person must look). ``eol_only``: the sides differ only in line endings;
    ``hint`` says what git needs from a person for this kind. ``hunks``: a content conflict's hunks
    with their provenance and per-hunk resolution source. ``proposed``: every hunk has a validated
    proposal written to the worktree (``proposal`` names its resolvers, e.g. ``model, validated``);
    never a person's resolution, staged only by ``resume --accept-proposals`` or a profile rule
    (``accepted_by``).
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
    replayed_blob: str | None = None
    replay_changed: Literal["edited", "deleted"] | None = None
    markers_accepted: tuple[str, ...] = ()
    kept: Kept | None = None
    hunks: tuple[ConflictHunk, ...] = ()
    proposal: str | None = None
    proposed_blob: str | None = None
    accepted_by: str | None = None

    @property
    def has_markers_kind(self) -> bool:
        """Whether git writes conflict markers for this kind (else only staging resolves it)."""
        return self.kind in MARKER_KINDS


class Overlap(BaseModel):
    """A file whose content both sides changed, which git merged three-way without a conflict.

    These are the places where a clean merge can still be wrong. The set is git's own: the
    paths of its ``Auto-merging`` messages that end in no conflict (a file both sides changed
    identically, or one side only moved, needs no merge and is not one). Lines are added
    plus deleted since the merge-base on each side, renames followed (``path`` is where
    the merge puts the file; ``base_path`` where it was at the merge-base, when renamed).
    ``equals_upstream``: after the commit, the merged file is exactly upstream's (the fork's change
    was a cherry-pick of upstream's, or upstream's superseded it): nothing of the fork's is left to read.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    upstream_lines: int
    fork_lines: int
    base_path: str | None = None
    equals_upstream: bool = False


class MergeSummary(BaseModel):
    """The merge of ``upstream_sha`` into ``fork_sha``, predicted (plan) or done (merge).

    ``upstream_commits``: commits brought in (in upstream, not in the fork);
    ``fork_commits``: fork-only commits; ``*_files``: paths changed since the
    merge-base on each side (``git diff --name-status --no-renames``: a rename is two paths, the one
    it left and the one it made); ``remerge_diff_paths``: after commit, the paths where the
    committed result differs from git's automatic merge (``git show --remerge-diff``);
    ``fork_branch`` and ``upstream_resolved_from`` (set by plan): the branch ``fork_sha`` is the head
    of, and the ref ``upstream_sha`` was read from (``refs/remotes/upstream/main``, a fetch, a commit).
    ``semantic`` (set by plan): the semantic check of merge-tree's tree, conflicted paths unknown.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    upstream_sha: str
    fork_sha: str
    fork_branch: str | None = None
    upstream_resolved_from: str | None = None
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
    semantic: SemanticResult | None = None

    def conflict_kinds(self) -> dict[str, int]:
        """Conflict counts by kind, most frequent first."""
        return dict(Counter(c.kind for c in self.conflicts).most_common())

    def resolutions(self) -> dict[str, int]:
        """Conflict counts by resolution (``recorded``, ``rule``, ``person``, ``unresolved``)."""
        return dict(Counter(c.resolution or "unresolved" for c in self.conflicts).most_common())

    def brief(self) -> dict[str, Any]:
        """The JSON contract of ``plan --json`` / ``merge --json``."""
        return {
            "upstream_sha": self.upstream_sha,
            "fork_sha": self.fork_sha,
            **({"fork_branch": self.fork_branch} if self.fork_branch else {}),
            **({"upstream_resolved_from": self.upstream_resolved_from} if self.upstream_resolved_from else {}),
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
                | ({"kept": c.kept} if c.kept else {})
                | ({"proposal": c.proposal} if c.proposal else {})
                | ({"accepted_by": c.accepted_by} if c.accepted_by else {})
                | ({"hunks": [h.brief() for h in c.hunks]} if c.hunks else {})
                for c in self.conflicts
            ],
            "overlaps": [o.model_dump(exclude_defaults=True) for o in self.overlaps],
            "merge_commit": self.merge_commit,
            "remerge_diff_paths": list(self.remerge_diff_paths),
            **({"semantic": self.semantic.model_dump(mode="json")} if self.semantic is not None else {}),
        }
