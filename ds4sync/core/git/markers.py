"""Conflict markers as git writes them and rerere reads them (``conflict-marker-size`` attribute)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

from ds4sync.core.git.base import GitBase

DEFAULT_MARKER_SIZE = 7


class MarkerVerbs(GitBase):
    """Conflict-marker verbs of :class:`~ds4sync.core.git.GitRepo`."""

    def marker_sizes(self, paths: Iterable[str]) -> dict[str, int]:
        """The conflict-marker length git uses for each path (``conflict-marker-size`` attribute, else 7)."""
        wanted = list(paths)
        if not wanted:
            return {}
        out = self.run("check-attr", "-z", "conflict-marker-size", "--", *wanted, strip=False)[1]
        return marker_sizes_of(out, wanted)

    def marker_sizes_at(self, commit: str, paths: Iterable[str]) -> dict[str, int]:
        """The ``conflict-marker-size`` git reads for each path from the ``.gitattributes`` files of ``commit``
        (plus ``info/attributes``), through a private index holding that commit's tree; 7 where unset."""
        wanted = list(paths)
        with tempfile.TemporaryDirectory(prefix="ds4sync-attrs-") as folder:
            env = {"GIT_INDEX_FILE": str(Path(folder) / "index")}
            self.run("read-tree", "--end-of-options", commit, env=env)
            args = ("check-attr", "--cached", "-z", "conflict-marker-size", "--", *wanted)
            out = self.run(*args, strip=False, env=env)[1]
        return marker_sizes_of(out, wanted)

    def paths_with_markers(self, paths: Iterable[str]) -> list[str]:
        """The work-tree files among ``paths`` that still hold a conflict hunk, as git finds them.

        A hunk is what git writes and rerere reads: a ``<<<<<<<`` line, a ``=======`` line
        and a ``>>>>>>>`` line, each exactly as long as the path's ``conflict-marker-size``
        attribute says. A lone ``=======`` (an RST heading) is not a marker.
        """
        found = []
        for path, size in self.marker_sizes(paths).items():
            file = self.path / path
            if file.is_file() and not file.is_symlink() and has_conflict_hunk(file.read_bytes(), size):
                found.append(path)
        return sorted(found)

    def has_markers(self, path: str) -> bool:
        """Whether the work-tree file still holds a conflict hunk (see :meth:`paths_with_markers`)."""
        return bool(self.paths_with_markers([path]))


def marker_sizes_of(check_attr_z: str, wanted: Iterable[str]) -> dict[str, int]:
    """``{path: conflict-marker length}`` from ``git check-attr -z conflict-marker-size`` output (7 where unset)."""
    fields = check_attr_z.split("\0")
    sizes = dict.fromkeys(wanted, DEFAULT_MARKER_SIZE)
    for i in range(0, len(fields) - 2, 3):
        path, value = fields[i], fields[i + 2]
        if value.isdigit() and int(value) > 0:
            sizes[path] = int(value)
    return sizes


def has_conflict_hunk(data: bytes, size: int = DEFAULT_MARKER_SIZE) -> bool:
    """Whether ``data`` holds a complete conflict hunk with markers of length ``size``.

    rerere's grammar (rerere.c ``is_cmarker``): ``<`` and ``>`` markers are followed by a
    space (or end the line), ``=`` and ``|`` markers by whitespace; a hunk is ``<``, an
    optional ``|`` base, ``=``, ``>`` in that order.
    """
    state = 0  # 0 outside, 1 after <, 2 after = (a | base between < and = is allowed)
    for raw in data.split(b"\n"):
        line = raw.rstrip(b"\r")
        kind = _marker(line, size)
        if kind == b"<":
            state = 1
        elif kind == b"=" and state == 1:
            state = 2
        elif kind == b">" and state == 2:
            return True
    return False


def _marker(line: bytes, size: int) -> bytes | None:
    if len(line) < size:
        return None
    head = line[:1]
    if head not in (b"<", b"=", b">", b"|") or line[:size] != head * size:
        return None
    rest = line[size:]
    if head in (b"<", b">"):
        return head if rest == b"" or rest[:1] == b" " else None
    return head if rest == b"" or rest[:1].isspace() else None
