"""History and diffs: rev-list walks, merge-bases, and what changed between two commits (``-z`` formats)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ds4sync.core.git.base import GitBase
from ds4sync.core.git.env import _literal


@dataclass(frozen=True)
class FileChange:
    """Lines added and deleted in one file between two commits (None for binary files).

    ``old_path`` is the path at the base when git detected a rename (else None).
    """

    path: str
    added: int | None
    deleted: int | None
    old_path: str | None = None

    @property
    def lines(self) -> int:
        """Lines touched (added + deleted; 0 for binary files)."""
        return (self.added or 0) + (self.deleted or 0)


class HistoryVerbs(GitBase):
    """History and diff verbs of :class:`~ds4sync.core.git.GitRepo`."""

    def rev_list(self, include: str, exclude: str, *, limit: int = 100_000) -> list[str]:
        """SHAs of the commits reachable from ``include`` and not from ``exclude`` (newest first)."""
        out = self.out("rev-list", f"--max-count={limit}", include, f"^{exclude}", "--")
        return out.split()

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two commits, or None for unrelated histories."""
        status, out, _ = self.run("merge-base", "--end-of-options", a, b, ok_codes=(0, 1))
        return out.strip() if status == 0 else None

    def count_apart(self, left: str, right: str) -> tuple[int, int]:
        """Commits only ``left`` reaches and commits only ``right`` reaches (one walk of ``left...right``)."""
        only_left, only_right = self.out(
            "rev-list", "--count", "--left-right", "--end-of-options", f"{left}...{right}"
        ).split()
        return int(only_left), int(only_right)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether ``ancestor`` is reachable from ``descendant``."""
        status = self.run("merge-base", "--is-ancestor", "--end-of-options", ancestor, descendant, ok_codes=(0, 1))
        return status[0] == 0

    def changed_names(self, base: str, head: str) -> list[str]:
        """Paths that differ between two commits (tree diff only: no blob is read)."""
        out = self.run("diff", "--name-only", "-z", "--no-renames", "--end-of-options", base, head, "--", strip=False)
        return [p for p in out[1].split("\0") if p]

    def _tree_diff(self, base: str, head: str, options: Sequence[str], paths: Iterable[str] | None) -> str | None:
        """``git diff <options> -z base head -- <paths>``, the paths matching only themselves.

        ``paths`` None: every path; an empty ``paths``: None, and git is not run.
        """
        limit = list(paths) if paths is not None else []
        if paths is not None and not limit:
            return None
        args = ("diff", *options, "-z", "--end-of-options", base, head, "--", *_literal(limit))
        return self.run(*args, strip=False)[1]

    def changes(self, base: str, head: str, paths: Iterable[str] | None = None) -> dict[str, FileChange]:
        """Files changed from ``base`` to ``head`` with line counts (renames not followed).

        ``paths`` limits the diff (line counting reads blobs, so ask only for what you need).
        """
        out = self._tree_diff(base, head, ("--numstat", "--no-renames"), paths)
        if out is None:
            return {}
        changes: dict[str, FileChange] = {}
        for entry in out.split("\0"):
            if not entry:
                continue
            added, deleted, path = entry.split("\t", 2)
            changes[path] = FileChange(
                path, None if added == "-" else int(added), None if deleted == "-" else int(deleted)
            )
        return changes

    def name_status(self, base: str, head: str, *, from_merge_base: bool = False) -> dict[str, str]:
        """Paths that differ between two commits -> git's status letter (``A``, ``D``, ``M``, ``T``).

        Renames not followed (a renamed file is its old path ``D`` and its new path ``A``);
        a tree diff only, no blob is read. ``from_merge_base``: from the merge-base of ``base`` and
        ``head`` to ``head`` (``git diff base...head``: what ``head`` changed on its own), in the same call.
        """
        if from_merge_base:
            args = ("diff", "--name-status", "--no-renames", "-z", "--end-of-options", f"{base}...{head}", "--")
            out = self.run(*args, strip=False)[1]
        else:
            out = self._tree_diff(base, head, ("--name-status", "--no-renames"), None) or ""
        fields = out.split("\0")
        return {fields[i + 1]: fields[i][:1] for i in range(0, len(fields) - 1, 2)}

    def renamed_names(self, base: str, head: str, paths: Iterable[str] | None = None) -> dict[str, str | None]:
        """Paths changed from ``base`` to ``head`` -> their path at ``base`` when git detected a rename.

        Keys are paths at ``head`` (deleted files: their old path); values None unless renamed.
        ``paths`` limits the diff, and with it the rename search: only the deleted files among
        them are candidate sources and only the added ones candidate new names (what merge-ort
        does, which looks for the renames of the files the other side changed).
        """
        out = self._tree_diff(base, head, ("--name-status", "-M"), paths)
        if out is None:
            return {}
        fields = out.split("\0")
        moves: dict[str, str | None] = {}
        i = 0
        while i < len(fields) - 1:
            status, i = fields[i], i + 1
            if not status:
                continue
            if status[0] in "RC":
                old, new = fields[i], fields[i + 1]
                i += 2
                moves[new] = old if status[0] == "R" else None
            else:
                moves[fields[i]] = None
                i += 1
        return moves

    def changes_with_renames(self, base: str, head: str, paths: Iterable[str] | None = None) -> dict[str, FileChange]:
        """Files changed from ``base`` to ``head``, keyed by their path at ``head``, renames followed.

        git's rename detection (``diff -M --numstat``) pairs a deleted and an added file; the
        line counts are then those of the real change at the new path, and ``old_path`` names
        the path at ``base``. ``paths`` limits the diff (give both names of a rename).
        """
        out = self._tree_diff(base, head, ("--numstat", "-M"), paths)
        if out is None:
            return {}
        fields = out.split("\0")
        changes: dict[str, FileChange] = {}
        i = 0
        while i < len(fields):
            entry = fields[i]
            i += 1
            if not entry:
                continue
            added, deleted, path = entry.split("\t", 2)
            old = None
            if path == "":  # a rename: "<added>\t<deleted>\t" NUL <old> NUL <new>
                old, path = fields[i], fields[i + 1]
                i += 2
            changes[path] = FileChange(
                path, None if added == "-" else int(added), None if deleted == "-" else int(deleted), old
            )
        return changes

    def changed_paths(self, base: str, head: str) -> list[str]:
        """Paths added, copied, modified, deleted or renamed from ``base`` to ``head`` (vLLM CI's filter)."""
        args = ("diff", "--name-only", "-z", "--diff-filter=ACMDR", "--end-of-options", base, head, "--")
        return [p for p in self.run(*args, strip=False)[1].split("\0") if p]

    def remerge_diff_paths(self, commit: str) -> list[str]:
        """Paths where merge ``commit`` differs from git's automatic merge of its parents."""
        args = ("show", "--remerge-diff", "--format=", "--name-only", "-z", "--end-of-options", commit, "--")
        return sorted({p.strip("\n") for p in self.run(*args, strip=False)[1].split("\0") if p.strip("\n")})
