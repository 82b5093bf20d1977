"""The trees invariants are checked on: a folder on disk, or a commit read from git.

Both answer the same two questions, which paths exist and what a file says, so one
invariant engine serves ``patches check`` (a checkout), ``verify`` (the sync worktree)
and ``drop_when`` (the upstream commit alone).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from ds4sync.core.git import GitRepo
from ds4sync.core.paths import filter_paths, is_glob

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

    def read_many(self, paths: list[str]) -> dict[str, str]:
        """``{path: text}`` of those of ``paths`` that are files (others left out)."""
        return {p: text for p in paths if (text := self.read(p)) is not None}


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

    def read_many(self, paths: list[str]) -> dict[str, str]:
        """``{path: text}`` of those of ``paths`` that are files at the commit, read in one ``ls-tree`` and one
        ``cat-file --batch`` (others left out)."""
        self.paths()
        oids = self.repo.blob_ids(self.rev, [p for p in paths if p in self._set])
        blobs = self.repo.blobs(oids.values())
        return {p: blobs[oid].decode("utf-8", errors="replace") for p, oid in oids.items() if oid in blobs}


def read_many(tree: Tree, paths: list[str]) -> dict[str, str]:
    """``{path: text}`` of those of ``paths`` that ``tree`` has: in one batch where the tree can (a commit's
    tree reads them with one ``git cat-file --batch``), else one file at a time."""
    batch = getattr(tree, "read_many", None)
    if batch is not None:
        return dict(batch(paths))
    return {p: text for p in paths if (text := tree.read(p)) is not None}


def match_paths(tree: Tree, patterns: tuple[str, ...] | list[str]) -> list[str]:
    """Paths of ``tree`` matching any of ``patterns`` (plain paths or globs), sorted, unique."""
    found: set[str] = set()
    for pattern in patterns:
        if not is_glob(pattern):
            if tree.read(pattern) is not None:
                found.add(pattern)
            continue
        found.update(filter_paths(tree.paths(), pattern))
    return sorted(found)
