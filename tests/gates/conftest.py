"""Fixtures: the sample pytest project committed to a real git repo in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest
from sample_project import write_sample_project

from ds4sync.demo.repobuild import RepoBuilder


@pytest.fixture
def sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RepoBuilder:
    """The sample project as a committed repository; its flaky/hang helpers write under tmp_path."""
    repo = RepoBuilder(tmp_path / "proj")
    write_sample_project(repo.path)
    repo.repo.add_all()
    repo.commit({}, "sample project")
    (tmp_path / "flaky").mkdir()
    monkeypatch.setenv("SAMPLE_FLAKY_DIR", str(tmp_path / "flaky"))
    monkeypatch.setenv("SAMPLE_PID_FILE", str(tmp_path / "pids"))
    return repo
