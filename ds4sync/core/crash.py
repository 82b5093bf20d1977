"""What a crash file says besides the traceback: the command, ds4sync's and its tools' versions, the platform.

A bug report without them cannot be reproduced; every value is read without importing the heavy
packages (package metadata, ``git --version``), and a value that cannot be read says why.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from collections.abc import Sequence

#: Packages whose version a crash file names (those ds4sync's behaviour depends on most).
PACKAGES = ("ds4sync", "pydantic", "typer", "rich", "ruamel.yaml", "jinja2", "httpx", "filelock")


def crash_text(argv: Sequence[str], traceback_text: str) -> str:
    """The crash file's text: ``argv``, versions, platform, then ``traceback_text``."""
    lines = [f"argv: {list(argv)}", f"python: {sys.version.split()[0]} ({sys.executable})"]
    lines.append(f"platform: {platform.platform()} ({platform.machine()})")
    lines.append(f"git: {_git_version()}")
    lines += [f"{name}: {_version(name)}" for name in PACKAGES]
    return "\n".join(lines) + "\n\n" + traceback_text


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _git_version() -> str:
    from ds4sync.core.errors import Ds4syncError
    from ds4sync.core.git import git_version

    try:
        return git_version()
    except (Ds4syncError, OSError) as exc:
        return f"unknown ({exc})"
