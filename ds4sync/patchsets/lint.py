"""Lint of a patch-set's ``.patch`` files at load: damage that ``git apply`` would turn into a lost file.

Three kinds, each a change git cannot carry whole:

- a binary stub: ``Binary files a/X and b/X differ`` (a patch made with ``--no-binary`` or by plain
  ``git diff``) holds no data, and ``git apply`` skips it or fails on it after the text hunks of the
  same patch were applied;
- a ``GIT binary patch`` whose ``index`` line has abbreviated object names: ``git apply`` refuses it
  ("cannot apply binary patch ... without full index line");
- CRLF damage: header lines (``diff --git``, ``index``, ``---``/``+++``, ``@@``) ending in ``\\r``, the
  mark of a patch converted by an editor, a mail client or ``core.autocrlf``; a new file of such a
  patch would be committed with CRLF endings.
"""

from __future__ import annotations

import re
from pathlib import Path

_HEADER = re.compile(rb"^(?:diff --git |index |--- |\+\+\+ |@@ )")
_STUB = re.compile(rb"^Binary files (.+) and (.+) differ\r?$")
_INDEX = re.compile(rb"^index ([0-9a-f]+)\.\.([0-9a-f]+)")
_FULL_OID = (40, 64)
_REMAKE = "remake it with `git format-patch --binary --full-index` (or `ds4sync patches refresh`)"


def lint_patch(path: Path) -> list[str]:
    """The problems of one ``.patch`` file, one sentence each naming the file inside the patch it concerns;
    empty when ``git apply`` can carry every change of it."""
    data = path.read_bytes()
    problems: list[str] = []
    lines = data.split(b"\n")
    crlf = sorted({_name(line) for line in lines if _HEADER.match(line) and line.endswith(b"\r")} - {""})
    if any(_HEADER.match(line) and line.endswith(b"\r") for line in lines):
        where = f" (e.g. at {crlf[0]})" if crlf else ""
        problems.append(
            f"CRLF line endings in its diff headers{where}: it was converted by an editor, a mail client or "
            "core.autocrlf, and git would apply it with CRLF; restore LF endings or remake it"
        )
    for target, section in _sections(lines):
        if any(_STUB.match(line) for line in section):
            problems.append(f"{target}: a binary change without its data (made with --no-binary); {_REMAKE}")
        elif any(line.startswith(b"GIT binary patch") for line in section):
            index = next((m for m in map(_INDEX.match, section) if m), None)
            if index is None or any(len(oid) not in _FULL_OID for oid in index.groups()):
                problems.append(f"{target}: a binary patch without full object names on its index line; {_REMAKE}")
    return problems


def _sections(lines: list[bytes]) -> list[tuple[str, list[bytes]]]:
    """``(path, lines)`` per ``diff --git`` section (the path as the header names it, after ``b/``)."""
    sections: list[tuple[str, list[bytes]]] = []
    for line in lines:
        if line.startswith(b"diff --git "):
            sections.append((_name(line), []))
        elif sections:
            sections[-1][1].append(line)
    return sections


def _name(header: bytes) -> str:
    text = header.rstrip(b"\r").decode("utf-8", "replace")
    if text.startswith("diff --git ") and " b/" in text:
        return text.rsplit(" b/", 1)[1].strip('"')
    if text.startswith(("--- ", "+++ ")):
        name = text[4:].strip('"')
        return "" if name == "/dev/null" else name.split("/", 1)[-1]
    return ""
