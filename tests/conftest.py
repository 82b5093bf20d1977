"""Fixtures: upstream/fork repositories built with real git in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4sync.demo.repobuild import RepoBuilder


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No user or system git config leaks into tests; crash files stay in tmp_path."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("DS4SYNC_CRASH_DIR", str(tmp_path / "crashes"))


@pytest.fixture
def builder(tmp_path: Path) -> RepoBuilder:
    """An empty repository on branch main, to be grown with ``commit``."""
    return RepoBuilder(tmp_path / "repo")
