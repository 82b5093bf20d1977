"""The trees invariants are checked on: a folder on disk, or a commit read from git.

Both answer the same two questions, which paths exist and what a file says, so one
invariant engine serves ``patches check`` (a checkout), ``verify`` (the sync worktree)
and ``drop_when`` (the upstream commit alone).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Protocol

from ds4sync.core.git import GitRepo

_SKIP_DIRS = frozenset({".git", "__pycache__", ".venv", "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache"})


class Tree(Protocol):
    """Read-only view of a source tree with POSIX paths relative to its root."""

    label: str

    def paths(self) -> list[str]:
        """Every file path, sorted."""
        ...

    def read(self, path: str) -> str | None:
        """The file's text (undecodable bytes replaced), or None when there is no such file."""
        ...


class FolderTree:
    """A checkout or any folder on disk (``.git``, caches and virtual envs skipped)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.label = str(self.root)
        self._paths: list[str] | None = None

    def paths(self) -> list[str]:
        """Every file under the root, sorted (walked once, then cached)."""
        if self._paths is None:
            found: list[str] = []
            for folder, dirs, files in os.walk(self.root):
                dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
                rel = os.path.relpath(folder, self.root)
                prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
                found.extend(prefix + name for name in files)
            self._paths = sorted(found)
        return self._paths

    def read(self, path: str) -> str | None:
        """The file's text, or None when it is not a file."""
        file = self.root / path
        if not file.is_file():
            return None
        return file.read_text(encoding="utf-8", errors="replace")


class CommitTree:
    """The tree of one commit, read from the object store (no checkout)."""

    def __init__(self, repo: GitRepo, rev: str) -> None:
        self.repo = repo
        self.rev = rev
        self.label = f"{rev[:12]} ({repo.path})"
        self._paths: list[str] | None = None
        self._set: set[str] = set()

    def paths(self) -> list[str]:
        """Every file of the commit, sorted."""
        if self._paths is None:
            self._paths = sorted(self.repo.tree_paths(self.rev))
            self._set = set(self._paths)
        return self._paths

    def read(self, path: str) -> str | None:
        """The blob's text at the commit, or None."""
        self.paths()
        if path not in self._set:
            return None
        data = self.repo.blob_bytes(self.rev, path)
        return None if data is None else data.decode("utf-8", errors="replace")


def expand_braces(pattern: str) -> list[str]:
    """``a/{b,c}.py`` -> ``["a/b.py", "a/c.py"]`` (nested braces expanded left to right)."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [out for alt in match.group(1).split(",") for out in expand_braces(head + alt + tail)]


@functools.lru_cache(maxsize=512)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A compiled regex for one brace-free glob: ``**/`` any folders, ``*`` and ``?`` within one name."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def is_glob(pattern: str) -> bool:
    """Whether ``pattern`` has wildcards or braces (else it names one path)."""
    return any(ch in pattern for ch in "*?{")


def match_paths(tree: Tree, patterns: tuple[str, ...] | list[str]) -> list[str]:
    """Paths of ``tree`` matching any of ``patterns`` (plain paths or globs), sorted, unique."""
    found: set[str] = set()
    for pattern in patterns:
        if not is_glob(pattern):
            if tree.read(pattern) is not None:
                found.add(pattern)
            continue
        regexes = [glob_regex(p) for p in expand_braces(pattern)]
        found.update(path for path in tree.paths() if any(rx.match(path) for rx in regexes))
    return sorted(found)
