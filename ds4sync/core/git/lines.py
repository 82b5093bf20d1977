"""Conflict hunks: git's own three-way file merge and its line history (``git log -L``)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ds4sync.core.git.base import GitBase
from ds4sync.core.git.env import _literal

_COMMIT_LINE = re.compile(r"([0-9a-f]{40,64})\x1f(.*)")


@dataclass(frozen=True)
class LineCommit:
    """A commit that changed a range of lines: its SHA and subject (``git log -L``)."""

    sha: str
    subject: str


class LineVerbs(GitBase):
    """Hunk verbs of :class:`~ds4sync.core.git.GitRepo`."""

    def merge_file_diff3(
        self, ours: bytes, base: bytes, theirs: bytes, *, marker_size: int = 7, labels: tuple[str, str, str]
    ) -> tuple[int, bytes]:
        """git's three-way file merge in diff3 style: (conflict hunks, merged bytes with markers).

        ``labels`` name (ours, base, theirs) on the marker lines. The hunks are exactly the ones
        ``git merge`` writes (same xdiff merge), each with its merge-base section (``|||||||``).
        """
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
                (Path(tmp) / name).write_bytes(data)
                files.append(str(Path(tmp) / name))
            status, merged, _ = self.run_bytes(
                "merge-file",
                "-p",
                "--diff3",
                f"--marker-size={marker_size}",
                *(arg for label in labels for arg in ("-L", label)),
                *files,
                ok_codes=range(0, 127),
            )
        return status, merged

    def line_log(
        self, base: str, head: str, path: str, start: int, end: int, *, first_parent: bool = False
    ) -> list[LineCommit]:
        """The commits of ``base..head`` that changed lines ``start``-``end`` (1-based, inclusive) of ``path``
        as ``head`` has it, newest first, renames followed (``git log -L``).

        ``first_parent``: only the commits of the first-parent chain (upstream's merged PRs, not the
        commits inside them). A range git cannot read (a path not at ``head``) gives no commits.
        """
        status, out, _ = self.run(
            "log",
            "-s",
            "--format=%H%x1f%s",
            *(["--first-parent"] if first_parent else []),
            f"-L{start},{end}:{path}",
            "--end-of-options",
            f"{base}..{head}",
            ok_codes=(0, 128),
        )
        if status != 0:
            return []
        rows = [line.split("\x1f", 1) for line in out.splitlines() if "\x1f" in line]
        return [LineCommit(sha, subject) for sha, subject in rows]

    def line_logs(
        self, base: str, head: str, spans: Sequence[tuple[str, int, int]], *, first_parent: bool = False
    ) -> dict[str, list[LineCommit]] | None:
        """:meth:`line_log` of several files in one walk of ``base..head``: ``spans`` holds one
        ``(path, start, end)`` per file; path -> its commits, newest first.

        git walks the range once and prints, for each commit, the diff of every range it changed under
        that file's ``diff --git a/<path> b/<path>`` header; a file's commits are those that print its
        header. The walk tracks each file's range on its own (ranges of different files never merge),
        so this is :meth:`line_log` per file provided no file is renamed in the walk (ask
        :meth:`paths_added_or_deleted` first: a rename adds its new name) and the walk holds no merge
        (:meth:`has_merges`: git prints a merge with no diff, so not whose range it changed, and a merge
        off the first-parent line follows the parent where *all* ranges are unchanged). None when git
        cannot read a range, a header names no file of ``spans`` (a quoted or renamed path) or a commit
        prints none: ask :meth:`line_log` per file then.

        Raises:
            ValueError: two spans of one file (git would merge their ranges).
        """
        paths = [path for path, _, _ in spans]
        if len(set(paths)) != len(paths):
            raise ValueError("one span per file: git merges the ranges of one file")
        headers = {f"diff --git a/{path} b/{path}": path for path in paths}
        status, out, _ = self.run(
            "log",
            "--format=%x00%H%x1f%s",
            "--no-color",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            *(["--first-parent"] if first_parent else []),
            *(f"-L{start},{end}:{path}" for path, start, end in spans),
            "--end-of-options",
            f"{base}..{head}",
            ok_codes=(0, 128),
        )
        if status != 0:
            return None
        found: dict[str, list[LineCommit]] = {path: [] for path in paths}
        for chunk in out.split("\0")[1:]:
            first, _, diff = chunk.partition("\n")
            commit = _COMMIT_LINE.fullmatch(first)
            said = [line for line in diff.splitlines() if line.startswith("diff --git ")]
            named = [headers[line] for line in said if line in headers]
            if commit is None or not said or len(named) != len(said):  # a merge prints no diff: whose range
                return None  # it changed is not said
            for path in named:
                found[path].append(LineCommit(commit.group(1), commit.group(2)))
        return found

    def paths_added_or_deleted(
        self, base: str, head: str, paths: Iterable[str], *, first_parent: bool = False
    ) -> set[str]:
        """Which of ``paths`` a commit of ``base..head`` adds or deletes, each commit against its first
        parent (``git log --diff-filter=AD --no-renames``: a rename is its new name added), so that a path
        not named here has that one name in every commit of the walk."""
        limit = list(paths)
        if not limit:
            return set()
        args = (
            "log",
            "--format=",
            "--name-only",
            "-z",
            "--no-renames",
            "--diff-filter=AD",
            "--diff-merges=first-parent",
        )
        walk = ("--first-parent",) if first_parent else ()
        out = self.run(*args, *walk, "--end-of-options", f"{base}..{head}", "--", *_literal(limit), strip=False)[1]
        return {p.strip("\n") for p in out.split("\0") if p.strip("\n")}

    def has_merges(self, base: str, head: str, *, first_parent: bool = False) -> bool:
        """Whether ``base..head`` (its first-parent line with ``first_parent``) holds a merge commit."""
        walk = ("--first-parent",) if first_parent else ()
        args = ("rev-list", *walk, "--min-parents=2", "--max-count=1", "--end-of-options", f"{base}..{head}", "--")
        return bool(self.out(*args))

    def blob_id(self, data: bytes) -> str:
        """The blob id git gives ``data`` (``git hash-object --stdin``; nothing is written)."""
        return self.run_bytes("hash-object", "--stdin", stdin=data)[1].decode().strip()
