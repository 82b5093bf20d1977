"""Fixtures: upstream/fork repositories built with real git in tmp_path."""

from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
from filelock import FileLock

from ds4sync.demo.repobuild import RepoBuilder
from tests.timing import time_factor


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Two things per test: its marks (``slow``, ``serving``, ...) go into the JUnit XML as a ``marks`` property,
    so that ``benchmarks/durations_table.py`` sums a run's time per mark from the XML alone; and its
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


def shared_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder ``name`` shared by the whole test session, pytest-xdist's workers included (their base temp
    folders sit side by side under the session's); for set-up paid once and then only read."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / name
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def compiler_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The ccache folder of the session: ``$CCACHE_DIR`` when set (a cache kept between runs), else one folder
    shared by every test and worker, so each source the build tests and the demo compile is compiled once
    (a test's own ``HOME`` would otherwise give every build a cold cache)."""
    return os.environ.get("CCACHE_DIR") or str(shared_dir(tmp_path_factory, "ccache"))


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, compiler_cache: str) -> None:
    """No user or system git config leaks into tests; crash files stay in tmp_path; builds share the
    session's compiler cache."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CCACHE_DIR", compiler_cache)
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
def demo_run(tmp_path_factory: pytest.TempPathFactory, compiler_cache: str) -> DemoRun:
    """``ds4sync demo`` run once per session for the tests that read what it leaves (records, reports, output);
    those tests only read it. Under pytest-xdist the first worker to ask runs it and the others wait on a lock
    and read what it left (``done.json``). Isolated from the user's git config as :func:`_isolated_git`
    isolates each test."""
    from ds4sync.cli import main

    root = shared_dir(tmp_path_factory, "demo-run")
    done = root / "done.json"
    with FileLock(root / "lock"):
        if done.is_file():
            fields = json.loads(done.read_text())
            return DemoRun(**{**fields, "workdir": Path(fields["workdir"])})
        (root / "home").mkdir()
        out, err = io.StringIO(), io.StringIO()
        with pytest.MonkeyPatch.context() as patch, redirect_stdout(out), redirect_stderr(err):
            patch.setenv("HOME", str(root / "home"))
            patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
            patch.setenv("DS4SYNC_CRASH_DIR", str(root / "crashes"))
            patch.setenv("CCACHE_DIR", compiler_cache)
            code = main(["demo", "--workdir", str(root / "demo")])
        run = DemoRun(workdir=root / "demo", code=code, out=out.getvalue(), err=err.getvalue())
        done.write_text(json.dumps({**asdict(run), "workdir": str(run.workdir)}))
        return run
