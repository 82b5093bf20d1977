"""What drift found: per open upstream pull request, its state on the forge and what it would do to the fork."""

from __future__ import annotations

from ds4sync.core.model import FrozenModel
from ds4sync.core.words import many

SCHEMA_VERSION = 1


class PullState(FrozenModel):
    """An open upstream pull request as the forge lists it.

    ``approved``/``mergeable`` are None when not asked (only flagged PRs are) or when the forge
    has not computed them yet (GitHub answers ``mergeable: null`` while it works).
    ``updated_at`` is the forge's ISO 8601 time of the last update.
    """

    number: int
    title: str
    author: str = ""
    url: str = ""
    head_sha: str
    head_repo: str | None = None
    head_ref: str = ""
    clone_url: str | None = None
    draft: bool = False
    approved: bool | None = None
    mergeable: bool | None = None
    labels: tuple[str, ...] = ()
    updated_at: str = ""

    @property
    def state_words(self) -> str:
        """``draft``, ``approved``, ``mergeable`` as far as known, e.g. ``draft, not mergeable``."""
        words = ["draft" if self.draft else "ready"]
        if self.approved is not None:
            words.append("approved" if self.approved else "not approved")
        if self.mergeable is not None:
            words.append("mergeable" if self.mergeable else "not mergeable")
        return ", ".join(words)


class DriftConflict(FrozenModel):
    """One file of the fork the PR would conflict in, with git's conflict kind (see ds4sync.core.git.mergetree)."""

    path: str
    kind: str
    related: tuple[str, ...] = ()


class DriftViolation(FrozenModel):
    """A blocking invariant that holds on the fork head and would not hold after the PR."""

    patchset: str
    invariant: str
    detail: str


class DriftFindings(FrozenModel):
    """What one PR head does to one fork head (cached per that pair).

    ``merge_base``: the PR's merge-base with upstream (its own changes are ``merge_base..head_sha``); None when
    no merge ran (a PR touching nothing of the fork costs one ``git diff upstream...head``).
    ``fork_files``: the files the PR changes that the fork changed too (since its merge-base with upstream).
    ``merged``: whether a three-way merge ran (only for PRs touching the fork's files or the invariants' files).
    ``semantic``: the semantic check's findings, None while no semantic check is installed.
    ``seconds``: wall time of the evaluation.
    """

    head_sha: str
    fork_head: str
    merge_base: str | None = None
    fork_files: tuple[str, ...] = ()
    conflicts: tuple[DriftConflict, ...] = ()
    violations: tuple[DriftViolation, ...] = ()
    patchsets: tuple[str, ...] = ()
    semantic: tuple[str, ...] | None = None
    merged: bool = False
    seconds: float = 0.0

    @property
    def violated_patchsets(self) -> tuple[str, ...]:
        """The patch-sets with a violated invariant, in order, each once."""
        return tuple(dict.fromkeys(v.patchset for v in self.violations))

    @property
    def flagged(self) -> bool:
        """Whether there is anything to show: conflicts, violations, semantic findings or touched fork files."""
        return bool(self.conflicts or self.violations or self.semantic or self.fork_files or self.patchsets)


class DriftEntry(FrozenModel):
    """One flagged PR: its forge state and its findings; ``cached`` when read from the per-night cache."""

    pull: PullState
    findings: DriftFindings
    cached: bool = False

    @property
    def action(self) -> int:
        """What a person must do, smaller first: 0 conflicts or violated invariants, 1 semantic findings,
        2 a clean merge touching the fork's or a patch-set's files."""
        f = self.findings
        if f.conflicts or f.violations:
            return 0
        if f.semantic:
            return 1
        return 2

    def line(self) -> str:
        """One line for a notification, e.g. ``#51234 will conflict in 2 files, violates sm120-sparse-attention``."""
        f = self.findings
        parts = []
        if f.conflicts:
            parts.append(f"will conflict in {many(len(f.conflicts), 'file')}")
        if f.violations:
            parts.append(f"violates {', '.join(f.violated_patchsets)}")
        if f.semantic:
            parts.append(many(len(f.semantic), "semantic finding"))
        if not parts:
            touched = f.patchsets or f.fork_files
            what = "patch-set" if f.patchsets else "fork file"
            parts.append(f"merges cleanly, touches {many(len(touched), what)}")
        return f"#{self.pull.number} {', '.join(parts)}"


class Unfetched(FrozenModel):
    """A PR whose head could not be fetched: one line, and the night goes on."""

    number: int
    title: str
    reason: str


class DriftResult(FrozenModel):
    """One drift watch over the open upstream PRs.

    ``entries``: flagged PRs, ranked (see :meth:`DriftEntry.action`, then more conflicts and violations
    first, then most recently updated). ``quiet``: numbers of PRs that touch nothing of the fork.
    ``listed``: open PRs the forge listed after the filters; ``merges``: three-way merges run (cache
    misses that touched the fork); ``cache_hits``: PRs answered from the cache. ``new``: lines of entries
    not present in the previous watch (all of them on the first).
    """

    schema_version: int = SCHEMA_VERSION
    started_at: str
    upstream_repo: str
    upstream_ref: str
    upstream_sha: str
    fork_branch: str
    fork_head: str
    fork_base: str
    fork_files: int
    listed: int
    entries: tuple[DriftEntry, ...] = ()
    quiet: tuple[int, ...] = ()
    unfetched: tuple[Unfetched, ...] = ()
    new: tuple[str, ...] = ()
    merges: int = 0
    cache_hits: int = 0
    semantic_check: bool = False
    seconds: float = 0.0

    @property
    def actionable(self) -> tuple[DriftEntry, ...]:
        """Entries a person must act on (conflicts, violated invariants, semantic findings)."""
        return tuple(e for e in self.entries if e.action < 2)
