"""Objects: blobs and trees read by id or path, commits and trees written without a work tree."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from ds4sync.core.git.base import GitBase
from ds4sync.core.git.env import _literal


class ObjectVerbs(GitBase):
    """Object verbs of :class:`~ds4sync.core.git.GitRepo`."""

    def existing_objects(self, oids: Iterable[str]) -> set[str]:
        """Which of ``oids`` this repository has (one ``git cat-file --batch-check``)."""
        wanted = [o for o in dict.fromkeys(oids) if o]
        if not wanted:
            return set()
        out = self.run_bytes("cat-file", "--batch-check", stdin=("\n".join(wanted) + "\n").encode())[1]
        return {line.split()[0] for line in out.decode().splitlines() if line and not line.endswith(" missing")}

    def tree_of(self, rev: str, paths: Iterable[str] = ()) -> str:
        """A SHA-1 over the tree entries of ``paths`` (the whole tree when empty) at ``rev``.

        Stable across clones; used as a cache key for what a gate depends on.
        """
        # ls-tree takes no "--": after --end-of-options every word past the tree is a path.
        out = self.run("ls-tree", "-r", "--full-tree", "--end-of-options", rev, *paths, strip=False)[1]
        return hashlib.sha1(out.encode("utf-8", "surrogateescape")).hexdigest()

    def tree_paths(self, rev: str) -> list[str]:
        """Every file path in the tree of ``rev``."""
        out = self.run("ls-tree", "-r", "--name-only", "-z", "--full-tree", "--end-of-options", rev, strip=False)[1]
        return [p for p in out.split("\0") if p]

    def blob_bytes(self, rev: str, path: str) -> bytes | None:
        """The content of ``path`` at ``rev``, or None when it is not a file there."""
        spec = f"{rev}:{path}"
        status, kind, _ = self.run_bytes("cat-file", "-t", spec, ok_codes=(0, 1, 128))
        if status != 0 or kind.strip() != b"blob":
            return None
        return self.run_bytes("cat-file", "blob", spec)[1]

    def blob(self, spec: str) -> bytes:
        """The exact bytes of a blob (``<rev>:<path>`` or ``:<stage>:<path>``)."""
        return self.run_bytes("cat-file", "blob", spec)[1]

    def blobs(self, oids: Iterable[str]) -> dict[str, bytes]:
        """The bytes of many blobs in one ``git cat-file --batch``: oid -> content (missing ones left out)."""
        wanted = list(dict.fromkeys(oids))
        if not wanted:
            return {}
        out = self.run_bytes("cat-file", "--batch", stdin=("\n".join(wanted) + "\n").encode())[1]
        found: dict[str, bytes] = {}
        pos = 0
        for oid in wanted:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            pos = end + 1
            if len(header) < 3 or header[1] == b"missing":
                continue
            size = int(header[2])
            found[oid] = out[pos : pos + size]
            pos += size + 1
        return found

    def blob_ids(self, rev: str, paths: Iterable[str]) -> dict[str, str]:
        """``{path: blob oid}`` of ``paths`` in ``rev``'s tree (``ls-tree -z``); a path absent there is left out."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return {}
        out = self.run("ls-tree", "-z", "--full-tree", "--end-of-options", rev, *_literal(wanted), strip=False)[1]
        found: dict[str, str] = {}
        for entry in out.split("\0"):
            meta, _, path = entry.partition("\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == "blob" and path in wanted:
                found[path] = parts[2]
        return found

    def commit_tree(self, tree: str, *, parents: Sequence[str], message: str) -> str:
        """A commit object of ``tree`` with ``parents`` (no ref, no work tree); returns its SHA."""
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return self.run(*args, "-m", message, env=self._identity_env())[1].strip()

    def patch_paths(self, patches: Sequence[Path]) -> set[str]:
        """Every path the ``patches`` touch (``git apply --numstat``; both names of a rename)."""
        touched: set[str] = set()
        for patch in patches:
            out = self.run("apply", "--numstat", "-z", str(patch), strip=False)[1]
            for entry in out.split("\0"):
                name = entry.split("\t", 2)[-1] if "\t" in entry else entry
                if name:
                    touched.add(name)
        return touched

    def apply_to_tree(self, tree: str, patches: Sequence[Path]) -> str | None:
        """Apply ``patches`` in order to ``tree`` in a temporary index; the new tree, or None if one fails.

        No work tree and no real index are touched (``GIT_INDEX_FILE`` names a private file).
        """
        with tempfile.TemporaryDirectory(prefix="ds4sync-index-") as folder:
            env = {**self._identity_env(), "GIT_INDEX_FILE": str(Path(folder) / "index")}
            self.run("read-tree", tree, env=env)
            for patch in patches:
                if self.run("apply", "--cached", str(patch), ok_codes=(0, 1, 128), env=env)[0] != 0:
                    return None
            return self.run("write-tree", env=env)[1].strip()

    def tree_entries(self, rev: str) -> dict[str, tuple[str, str, str]]:
        """Every entry of the tree of ``rev``, recursively: path -> (mode, type, oid) (``ls-tree -r -z``).

        Types are git's (``blob``, ``commit`` for a submodule); folders are not entries of their own.
        """
        out = self.run("ls-tree", "-r", "-z", "--full-tree", "--end-of-options", rev, strip=False)[1]
        entries: dict[str, tuple[str, str, str]] = {}
        for entry in out.split("\0"):
            if not entry or "\t" not in entry:
                continue
            meta, path = entry.split("\t", 1)
            mode, kind, oid = meta.split()
            entries[path] = (mode, kind, oid)
        return entries
