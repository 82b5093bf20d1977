"""ruff's pyflakes rules (``F``) on blobs: the differential lint of the semantic check.

The files are written under a temporary folder at their repository paths and ruff runs once over
all of them (``--isolated``: the fork's own ruff settings do not change what counts as broken).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ds4sync.core.errors import ToolMissingError
from ds4sync.core.proc import run

#: pyflakes codes that break at run time (a name that is not defined); every other F code warns.
BLOCKING_CODES = frozenset({"F821", "F822", "F823"})


@dataclass(frozen=True)
class LintHit:
    """One ruff finding: file path (repository-relative), 1-based line, code and ruff's message."""

    path: str
    line: int
    code: str
    message: str


def ruff_binary() -> str:
    """The ruff executable installed with ds4sync (its Python package), else the one on PATH.

    Raises:
        ToolMissingError: no ruff anywhere.
    """
    try:
        from ruff.__main__ import find_ruff_bin

        return str(find_ruff_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("ruff")
        if found is None:
            raise ToolMissingError("ruff is not installed", where="semantic check", fix="pip install ruff") from None
        return found


def lint_blobs(files: Mapping[str, bytes]) -> list[LintHit]:
    """ruff ``--select F`` over ``files`` (repository path -> content); hits sorted by path and line."""
    if not files:
        return []
    with tempfile.TemporaryDirectory(prefix="ds4sync-semantic-") as folder:
        root = Path(folder)
        for path, data in files.items():
            target = root / "tree" / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        out = root / "ruff.json"
        argv = [
            ruff_binary(),
            "check",
            "--isolated",
            "--no-cache",
            "--select",
            "F",
            "--exit-zero",
            "--output-format",
            "json",
            "--output-file",
            str(out),
            *sorted(files),
        ]
        result = run(argv, cwd=root / "tree", timeout_s=600)
        if result.returncode != 0 or not out.is_file():
            raise ToolMissingError(f"ruff failed: {result.output.strip()[-300:]}", where=result.describe())
        rows = json.loads(out.read_text(encoding="utf-8") or "[]")
        base = (root / "tree").resolve()
    hits = []
    for row in rows:
        try:
            path = Path(row["filename"]).resolve().relative_to(base).as_posix()
        except ValueError:
            continue
        hits.append(LintHit(path, int(row["location"]["row"]), str(row["code"]), str(row["message"])))
    return sorted(hits, key=lambda h: (h.path, h.line, h.code))
