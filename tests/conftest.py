"""Fixtures: upstream/fork repositories built with real git in tmp_path."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from ds4sync.demo.repobuild import RepoBuilder
from tests.timing import time_factor


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Two things per test: its marks (``slow``, ``serving``, ...) go into the JUnit XML as a ``marks`` property,
    so that ``benchmarks/test_durations.py`` sums a run's time per mark from the XML alone; and its
    pytest-timeout limit (its ``timeout`` mark, else ``--timeout``/the ini's) is stretched by
    :func:`tests.timing.time_factor`, the one factor every wait in the tests scales by."""
    factor = time_factor()
    default = float(config.getoption("timeout", None) or config.getini("timeout") or 0)
    for item in items:
        marks = sorted({m.name for m in item.iter_markers()} - {"parametrize", "usefixtures", "filterwarnings"})
        item.user_properties.append(("marks", ",".join(marks)))
        mark = item.get_closest_marker("timeout")
        limit = float(mark.args[0] if mark and mark.args else (mark.kwargs.get("timeout", 0) if mark else default))
        if limit > 0 and factor > 1:
            item.add_marker(pytest.mark.timeout(limit * factor))


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


@dataclass(frozen=True)
class DemoRun:
    """One ``ds4sync demo``: its work folder, exit code and what it printed (stdout, stderr)."""

    workdir: Path
    code: int
    out: str
    err: str


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """``ds4sync demo`` run once for the tests that read what it leaves (records, reports, output); those
    tests only read it. Isolated from the user's git config as :func:`_isolated_git` isolates each test."""
    from ds4sync.cli import main

    root = tmp_path_factory.mktemp("demo-run")
    (root / "home").mkdir()
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(out), redirect_stderr(err):
        patch.setenv("HOME", str(root / "home"))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        patch.setenv("DS4SYNC_CRASH_DIR", str(root / "crashes"))
        code = main(["demo", "--workdir", str(root / "demo")])
    return DemoRun(workdir=root / "demo", code=code, out=out.getvalue(), err=err.getvalue())
