"""The overlay build profile: a tree's Python sources over an installed build's native libraries.

Real parts: a base environment made with ``python -m venv`` holding an installed package whose native
module is a real C extension compiled here with gcc; a git tree of the same package with newer Python
sources; the driver's real venv, link and proof steps.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.models.native_profile import BuildProfile, load_profiles
from ds4sync.native.driver import OVERLAY_PTH, run_build
from ds4sync.native.manifest import Manifest, ModuleSpec

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the native module")

C_SOURCE = r"""
#include <Python.h>
static PyObject *hello(PyObject *self, PyObject *args) { return PyUnicode_FromString("native"); }
static PyMethodDef methods[] = {{"hello", hello, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};
PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&mod); }
"""


@pytest.fixture(scope="module")
def base_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with ``demopkg`` installed: Python sources saying 'wheel' and a compiled ``_native`` module."""
    root = tmp_path_factory.mktemp("base")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "env")], check=True)
    python = root / "env" / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    pkg = Path(purelib) / "demopkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('VERSION = "wheel"\n')
    (root / "native.c").write_text(C_SOURCE)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        ["gcc", "-shared", "-fPIC", f"-I{include}", str(root / "native.c"), "-o", str(pkg / f"_native{suffix}")],
        check=True,
    )
    return python


def _tree(tmp_path: Path, *, ignore: str = "*.so\n") -> RepoBuilder:
    builder = RepoBuilder(tmp_path / "tree")
    builder.commit({"demopkg/__init__.py": 'VERSION = "tree"\n', ".gitignore": ignore}, "tree")
    return builder


def _profile(base: Path) -> BuildProfile:
    return BuildProfile.model_validate(
        {
            "venv": {"create": True, "python": str(base), "inherit_site_packages": True},
            "overlay": {"package": "demopkg", "native": ["*.so"], "dist_name": "demopkg"},
            "requires": [],
            "requires_torch": False,
            "check_deps": False,
        }
    )


MANIFEST = Manifest(modules=(ModuleSpec(name="demopkg._native"),))


def test_overlay_imports_the_tree_over_the_installed_native_module(base_env: Path, tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    result = run_build(tree.path, _profile(base_env), manifest=MANIFEST, work_dir=tmp_path / "work")
    assert result.status == "passed", (result.failed_step, result.tail)
    assert [s.name for s in result.steps] == ["venv", "overlay", "overlay origin"]
    assert result.checks["imports"] == {"passed": 1, "total": 1, "failed": []}
    link = next((tree.path / "demopkg").glob("_native*.so"))
    assert link.is_symlink() and "base" in str(link.resolve())
    assert GitRepo(tree.path).status_porcelain() == []  # the link is ignored: the tree stays clean
    probe = (
        "import demopkg, demopkg._native, importlib.metadata as m;"
        "print(demopkg.VERSION, demopkg._native.hello(), m.version('demopkg'))"
    )
    out = subprocess.run([result.python, "-c", probe], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.split() == ["tree", "native", "0+overlay.cpu"]
    # a second build over the same tree reuses the links and replaces its own distribution record
    again = run_build(tree.path, _profile(base_env), manifest=MANIFEST, work_dir=tmp_path / "work2")
    assert again.status == "passed"
    purelib = Path(again.venv or "") / "lib"
    assert len(list(purelib.glob(f"*/site-packages/{OVERLAY_PTH}"))) == 1


def test_overlay_refuses_to_dirty_the_tree(base_env: Path, tmp_path: Path) -> None:
    tree = _tree(tmp_path, ignore="*.pyc\n")
    result = run_build(tree.path, _profile(base_env), manifest=MANIFEST, work_dir=tmp_path / "work")
    assert result.status == "failed" and result.failed_step == "overlay"
    assert any("is not ignored by git" in line for line in result.tail)
    assert not list((tree.path / "demopkg").glob("_native*"))


def test_overlay_keeps_the_trees_own_native_file_and_fails_without_the_package(base_env: Path, tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    own = tree.path / "demopkg" / f"_native{sysconfig.get_config_var('EXT_SUFFIX')}"
    own.write_text("not a library")  # the tree's own (broken) build wins: the proof must catch it
    result = run_build(tree.path, _profile(base_env), manifest=MANIFEST, work_dir=tmp_path / "work")
    assert not own.is_symlink() and result.status == "failed" and result.failed_step == "proof"
    other = _profile(base_env).model_copy(
        update={"overlay": _profile(base_env).overlay.model_copy(update={"package": "nopkg"})}
    )
    missing = run_build(tree.path, other, manifest=MANIFEST, work_dir=tmp_path / "work2")
    assert missing.failed_step == "overlay" and any("no installed package 'nopkg'" in line for line in missing.tail)


def test_shipped_cpu_overlay_profile() -> None:
    from ds4sync.models.config import shipped_profile

    profile = load_profiles(shipped_profile())["cpu-overlay"]
    assert profile.overlay is not None and profile.overlay.package == "vllm"
    assert "cpu" in profile.overlay.dist_version  # vLLM's platform detection looks for it
    assert profile.requires == () and not profile.requires_torch_cuda
    assert profile.manifest == "kernels/manifest-cpu.yaml"
