"""Long upstream histories in a second: ``git fast-import`` streams written by the tests themselves."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

FileSpec = Mapping[str, str | None]
_WHO = "upstream dev <dev@upstream.invalid>"


def fast_import(repo: Path, *, branch: str, parent: str | None, commits: Sequence[tuple[str, FileSpec]]) -> list[str]:
    """Append ``commits`` (message, files; None deletes) to ``branch`` on top of ``parent``; their SHAs in order."""
    chunks: list[bytes] = []
    for index, (message, files) in enumerate(commits, 1):
        msg = message.encode()
        chunks.append(f"commit refs/heads/{branch}\nmark :{index}\n".encode())
        chunks.append(f"committer {_WHO} {1_700_000_000 + index} +0000\n".encode())
        chunks.append(b"data %d\n%s\n" % (len(msg), msg))
        if index == 1 and parent:
            chunks.append(f"from {parent}\n".encode())
        for path, text in files.items():
            if text is None:
                chunks.append(f"D {path}\n".encode())
            else:
                body = text.encode()
                chunks.append(f"M 100644 inline {path}\n".encode() + b"data %d\n%s\n" % (len(body), body))
    chunks.append(b"done\n")
    subprocess.run(
        ["git", "fast-import", "--quiet", "--done"], cwd=repo, input=b"".join(chunks), check=True, capture_output=True
    )
    out = subprocess.run(
        ["git", "rev-list", "--first-parent", "--reverse", branch, *([f"^{parent}"] if parent else [])],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()
