"""Fixtures of the build tests: a generated demo extension project and a profile that builds it on the CPU.

Every test that compiles the demo extension gives it the namespace ``ds4demo`` (the package names differ): the
compiled source is then the same, and the session's compiler cache (``compiler_cache`` in tests/conftest.py)
compiles it once for all of them and the demo.
"""

from __future__ import annotations

import sys

import pytest

from ds4sync.demo.native_ext import DemoExtension, demo_profile, write_demo_extension
from ds4sync.models.native_profile import BuildProfile
from ds4sync.models.native_results import BuildResult
from ds4sync.native.driver import run_build


@pytest.fixture(scope="module")
def torch_available() -> None:
    """Skip the module's build tests cleanly when torch is not installed."""
    pytest.importorskip("torch")


@pytest.fixture(scope="module")
def cpu_profile(torch_available: None) -> BuildProfile:
    """Builds into a fresh venv that sees this interpreter's torch and setuptools."""
    return demo_profile(python=sys.executable)


@pytest.fixture(scope="module")
def built_demo(
    tmp_path_factory: pytest.TempPathFactory, cpu_profile: BuildProfile
) -> tuple[DemoExtension, BuildResult]:
    """One real CPU build of the demo extension, shared by the proof tests of a module."""
    root = tmp_path_factory.mktemp("demo-build")
    ext = write_demo_extension(root / "proj", namespace="ds4demo", package="ds4demo_ext")
    result = run_build(ext.path, cpu_profile, manifest=ext.manifest, work_dir=root / "work", profile_name="demo")
    return ext, result
