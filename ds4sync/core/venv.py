"""Virtual environments: letting a new venv import another interpreter's packages."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ds4sync.core.proc import run

INHERIT_PTH = "_ds4sync_inherit.pth"


def inherit_packages(base_python: str, python: str, env: Mapping[str, str] | None = None) -> None:
    """Let the venv of ``python`` import ``base_python``'s packages after its own.

    A plain path line in a ``.pth`` file: the base's own ``.pth`` files (editable installs
    of another checkout) are not processed, so they cannot shadow what the venv installs.
    """
    query = "import json, sysconfig; p = sysconfig.get_paths(); print(json.dumps([p['purelib'], p['platlib']]))"
    with tempfile.TemporaryDirectory() as tmp:
        theirs = json.loads(run([base_python, "-c", query], cwd=tmp, env=env, timeout_s=120).output)
        ours = json.loads(run([python, "-c", query], cwd=tmp, env=env, timeout_s=120).output)
    lines = list(dict.fromkeys(theirs))
    Path(ours[0], INHERIT_PTH).write_text("\n".join(lines) + "\n")
