"""A profile's ``install_run``: a command in place of the pip install (as the fork's one-CMake-target profile
does), on a real CPU extension: the command builds in place, a .pth puts the tree on the venv's path, and the
proof imports and reads op schemas from outside the tree. Placeholders ({cpus}, {python}, {src}) expand."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from ds4sync.demo.native_ext import write_demo_extension
from ds4sync.models.native_profile import BuildProfile, VenvSpec
from ds4sync.native.driver import run_build

pytestmark = [pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++"), pytest.mark.slow]

_PTH = "import site, sys; open(site.getsitepackages()[0] + '/ds4sync-src.pth', 'w').write(sys.argv[1])"


def _profile(command: str) -> BuildProfile:
    return BuildProfile(
        venv=VenvSpec(create=True, python=sys.executable, inherit_site_packages=True),
        install_run=("sh", "-c", command),
        requires=("g++",),
        check_deps=False,
    )


def test_install_run_builds_in_place_and_the_proof_imports_through_the_pth(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    ext = write_demo_extension(tmp_path / "proj", namespace="ds4demo", package="ds4inplace_ext")
    command = f'"{{python}}" setup.py build_ext --inplace --parallel {{cpus}} && "{{python}}" -c "{_PTH}" "{{src}}"'
    result = run_build(ext.path, _profile(command), manifest=ext.manifest, work_dir=tmp_path / "work")
    assert result.status == "passed", result.message
    assert result.command[:2] == ("sh", "-c")
    assert "{cpus}" not in result.command[2] and "--parallel " in result.command[2]
    assert result.summary.startswith("1/1 imports")
    assert list(ext.path.glob(f"{ext.package}/_C*.so")), "built in place, not into site-packages"


def test_a_failing_install_run_is_the_failed_install_step(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    ext = write_demo_extension(tmp_path / "proj", namespace="ds4demo", package="ds4nope_ext")
    result = run_build(
        ext.path, _profile("echo ds4sync-install-run-broke >&2; exit 3"), manifest=ext.manifest, work_dir=tmp_path / "w"
    )
    assert result.status == "failed" and result.failed_step == "install"
    assert "ds4sync-install-run-broke" in (tmp_path / "w" / "build.log").read_text()
