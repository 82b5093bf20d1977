"""Conflict hunks: git's own three-way file merge and its line history (``git log -L``)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from ds4sync.core.git.base import GitBase


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

    def blob_id(self, data: bytes) -> str:
        """The blob id git gives ``data`` (``git hash-object --stdin``; nothing is written)."""
        return self.run_bytes("hash-object", "--stdin", stdin=data)[1].decode().strip()
