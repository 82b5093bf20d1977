"""Patch-sets: apply, format-patch, cherry-pick, and reading commits and trailers."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ds4sync.core.errors import GitError
from ds4sync.core.git.merge import MergeVerbs
from ds4sync.core.git.refs import RefVerbs


@dataclass(frozen=True)
class ApplyOutcome:
    """What applying one patch did: ok, or the conflicted paths / ``.rej`` files left behind."""

    ok: bool
    conflicted: tuple[str, ...] = ()
    rejects: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()


def _lines(text: str) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


class PatchVerbs(MergeVerbs, RefVerbs):
    """Patch-set verbs of :class:`~ds4sync.core.git.GitRepo`."""

    def apply_check(self, patch: Path, *, reverse: bool = False) -> bool:
        """Whether ``patch`` would apply to the work tree and index (``git apply --check``)."""
        args = ["apply", "--check", *(["--reverse"] if reverse else []), str(patch)]
        return self.run(*args, ok_codes=(0, 1, 128))[0] == 0

    def apply_3way(self, patch: Path) -> ApplyOutcome:
        """``git apply --3way`` of ``patch`` to the work tree and index.

        When the three-way fallback cannot run (the preimage blobs are unknown here),
        ``git apply --reject`` applies the hunks that fit and leaves ``.rej`` files for
        the rest. The work tree is left as git left it, for a person to adapt.
        """
        before = set(self.untracked())
        status, out, err = self.run("apply", "--3way", str(patch), ok_codes=(0, 1, 128))
        if status == 0:
            return ApplyOutcome(True, messages=tuple(_lines(err)))
        conflicted = tuple(self.unmerged_paths())
        if conflicted:
            return ApplyOutcome(False, conflicted=conflicted, messages=tuple(_lines(err or out)))
        _, out2, err2 = self.run("apply", "--reject", str(patch), ok_codes=(0, 1, 128))
        rejects = tuple(sorted(p for p in set(self.untracked()) - before if p.endswith(".rej")))
        return ApplyOutcome(False, rejects=rejects, messages=tuple(_lines(err) + _lines(err2 or out2)))

    def untracked(self) -> list[str]:
        """Untracked files (not ignored)."""
        out = self.run("ls-files", "--others", "--exclude-standard", "-z", strip=False)[1]
        return [p for p in out.split("\0") if p]

    def add_all(self) -> None:
        """Stage every change of the work tree (``git add -A``)."""
        self.run("add", "-A")

    def has_staged_changes(self) -> bool:
        """Whether the index differs from HEAD."""
        return self.run("diff", "--cached", "--quiet", ok_codes=(0, 1))[0] == 1

    def format_patch(self, rev_range: str, out_dir: Path) -> list[Path]:
        """``git format-patch`` of ``rev_range`` into ``out_dir``; the files written, in order.

        Raises:
            GitError: the range names no commit.
        """
        out_dir.mkdir(parents=True, exist_ok=True)
        out = self.out("format-patch", "--no-signature", "--full-index", "--binary", "-o", str(out_dir), rev_range)
        files = [Path(line) for line in out.splitlines() if line.strip()]
        if not files:
            raise GitError(
                f"'{rev_range}' names no commit to capture",
                where=str(self.path),
                fix="give a range such as BASE..HEAD (see `git log BASE..HEAD`)",
            )
        return files

    def commits_in(self, rev_range: str) -> list[tuple[str, str, str, str]]:
        """(sha, subject, author, body) of each commit in ``rev_range``, oldest first."""
        out = self.run("log", "--reverse", "--format=%H%x1f%s%x1f%an <%ae>%x1f%b%x1e", rev_range, strip=False)[1]
        rows = []
        for entry in out.split("\x1e"):
            if entry.strip():
                sha, subject, author, body = entry.strip("\n").split("\x1f", 3)
                rows.append((sha, subject, author, body.strip()))
        return rows

    def commits_with_trailer(self, rev_range: str, key: str, value: str) -> list[str]:
        """SHAs in ``rev_range`` (oldest first) whose message has the trailer ``key: value``."""
        fmt = f"%H%x1f%(trailers:key={key},valueonly,separator=%x1d)%x1e"
        out = self.run("log", "--reverse", f"--format={fmt}", rev_range, strip=False)[1]
        found = []
        for entry in out.split("\x1e"):
            if "\x1f" in entry:
                sha, values = entry.strip("\n").split("\x1f", 1)
                if value in [v.strip() for v in values.split("\x1d")]:
                    found.append(sha)
        return found

    def cherry_pick(self, commit: str) -> tuple[bool, list[str]]:
        """``git cherry-pick -x`` of ``commit``; on conflict it is aborted and the paths returned.

        Returns (picked, conflicted paths).
        """
        status, _, _ = self.run(
            "-c", "rerere.enabled=false", "cherry-pick", "-x", "--allow-empty", commit, ok_codes=(0, 1)
        )
        if status == 0:
            return True, []
        conflicted = self.unmerged_paths()
        self.run("cherry-pick", "--abort", ok_codes=(0, 128))
        return False, conflicted

    def amend_message(self, message: str) -> str:
        """Replace HEAD's message (content unchanged); the new SHA."""
        with tempfile.NamedTemporaryFile("w", suffix=".msg", delete=False, encoding="utf-8") as handle:
            handle.write(message)
        try:
            self.run("commit", "--quiet", "--amend", "--no-verify", "-F", handle.name)
        finally:
            os.unlink(handle.name)
        return self.head()

    def message(self, rev: str) -> str:
        """The full commit message of ``rev``."""
        return self.run("log", "-1", "--format=%B", rev)[1]
