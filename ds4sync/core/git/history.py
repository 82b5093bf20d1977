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

    def subject(self, rev: str) -> str:
        """The subject line of commit ``rev`` (``git log -1 --format=%s``).

        Raises:
            GitError: ``rev`` names no commit.
        """
        return self.out("log", "-1", "--format=%s", "--end-of-options", rev, "--")

    def committer_date(self, rev: str) -> str:
        """When commit ``rev`` was committed, strict ISO 8601 with its offset (``%cI``: ``2026-08-04T14:00:00+00:00``).

        Raises:
            GitError: ``rev`` names no commit.
        """
        return self.out("log", "-1", "--format=%cI", "--end-of-options", rev, "--")

    def parents(self, rev: str) -> list[str]:
        """The parent SHAs of commit ``rev``, in order (first parent first; none for a root commit)."""
        return self.out("rev-list", "--parents", "-n", "1", "--end-of-options", rev, "--").split()[1:]

    def first_parent_commits(self, base: str, head: str) -> list[str]:
        """SHAs on ``head``'s first-parent line after ``base`` (``base..head``), oldest first."""
        out = self.out("rev-list", "--first-parent", "--reverse", "--end-of-options", f"{base}..{head}", "--")
        return [line for line in out.splitlines() if line]

    def oneline_log(self, base: str, head: str) -> list[str]:
        """``<short sha> <subject>`` of each commit in ``base..head``, newest first."""
        return self.out("log", "--format=%h %s", "--end-of-options", f"{base}..{head}", "--").splitlines()

    def pickaxe_commits(self, text: str, rev: str) -> list[str]:
        """SHAs of the commits reachable from ``rev`` that change how often ``text`` occurs in a file
        (``git log -S``, the string taken literally), newest first."""
        return self.out("log", "--format=%H", f"-S{text}", "--end-of-options", rev, "--").split()

    def newest_commit_touching(
        self, rev_range: str, path: str, *, pickaxe: str | None = None
    ) -> tuple[str, str] | None:
        """(sha, subject) of the newest first-parent commit of ``rev_range`` that changed ``path`` (with
        ``pickaxe``: that changed how often that text occurs in it, ``-S``); None when there is none or git
        cannot read the range or path."""
        options = [f"-S{pickaxe}"] if pickaxe is not None else []
        args = ("log", "--first-parent", "-1", "--format=%H%x1f%s", *options, "--end-of-options", rev_range)
        out = self.run(*args, "--", path, ok_codes=(0, 128))[1]
        if "\x1f" not in out:
            return None
        sha, subject = out.strip().split("\x1f", 1)
        return sha, subject

    def first_parent_trailers(self, rev_range: str, key: str) -> list[tuple[str, str]]:
        """(sha, values) of each commit on the first-parent line of ``rev_range``, oldest first: the values of
        its ``key:`` trailers joined by ``,`` (empty when it has none)."""
        fmt = f"--format=%H%x00%(trailers:key={key},valueonly,separator=%x2C)"
        out = self.out("log", "--reverse", "--first-parent", fmt, "--end-of-options", rev_range, "--")
        rows = []
        for line in out.splitlines():
            sha, _, values = line.partition("\0")
            rows.append((sha, values))
        return rows

    def file_diff(self, base: str, head: str, path: str, *, context: int = 3) -> str:
        """``git diff`` of the one file ``path`` (literally) from ``base`` to ``head``, with ``context`` lines."""
        args = ("diff", f"--unified={context}", "--end-of-options", base, head, "--", *_literal([path]))
        return self.out(*args)

    def worktree_changed_names(self, base: str, *, diff_filter: str, renames: bool = True) -> list[str]:
        """Paths where the work tree (committed or not) differs from ``base``, of the kinds ``diff_filter``
        names (``A`` added, ``C`` copied, ``M`` modified, ``D`` deleted, ``R`` renamed: git's letters).

        With ``renames`` a rename is one ``R`` entry under its new name; without, its old path is ``D``
        and its new one ``A``. Untracked files are not counted.
        """
        options = ("--name-only", "-z", f"--diff-filter={diff_filter}", *([] if renames else ["--no-renames"]))
        out = self.run("diff", *options, "--end-of-options", base, "--", strip=False)[1]
        return [p for p in out.split("\0") if p]
