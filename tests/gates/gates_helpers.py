"""Helpers shared by the gate tests."""

from __future__ import annotations

import sys
from pathlib import Path

from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.runner import Workspace, open_workspace


def workspace(repo: RepoBuilder, profile: Path | None = None) -> Workspace:
    """A workspace on ``repo`` using its own ``profile/`` folder."""
    return open_workspace(repo.path, profile=profile or repo.path / "profile")


def write_gates(repo: RepoBuilder, tier: str, text: str) -> None:
    """Replace ``profile/gates/<tier>.yaml`` (committed, so caches see a clean tree)."""
    repo.commit({f"profile/gates/{tier}.yaml": text}, f"{tier} gates")


PYTHON = sys.executable
