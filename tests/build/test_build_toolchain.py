"""Toolchain capture: real interpreters and compilers; a missing tool is one line before anything runs."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ds4sync.core.errors import ToolMissingError
from ds4sync.models.native_profile import BuildProfile, VenvSpec
from ds4sync.native.driver import run_build
from ds4sync.native.manifest import Manifest
from ds4sync.native.toolchain import capture_toolchain, require_tools

pytestmark = pytest.mark.slow  # compiles, builds or runs a whole pipeline: seconds to minutes


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return path


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_capture_reads_python_and_compiler_versions() -> None:
    env = dict(os.environ)
    toolchain = capture_toolchain(sys.executable, env)
    assert toolchain.python_version == platform.python_version()
    gcc = toolchain.tools["gcc"]
    assert gcc.path == shutil.which("gcc")
    dumped = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    assert gcc.version == dumped
    assert f"gcc {dumped}" in toolchain.line()


def test_capture_reports_torch_as_the_target_sees_it() -> None:
    torch = pytest.importorskip("torch")
    toolchain = capture_toolchain(sys.executable, dict(os.environ))
    assert toolchain.torch == torch.__version__
    assert toolchain.torch_cuda == torch.version.cuda


def test_nvcc_comes_from_cuda_home(tmp_path: Path) -> None:
    cuda = tmp_path / "cuda-12.8"
    _script(
        cuda / "bin" / "nvcc",
        'echo "nvcc: NVIDIA (R) Cuda compiler driver"\necho "Cuda compilation tools, release 12.8, V12.8.93"\n',
    )
    env = {**os.environ, "CUDA_HOME": str(cuda)}
    toolchain = capture_toolchain(sys.executable, env)
    assert toolchain.tools["nvcc"].path == str(cuda / "bin" / "nvcc")
    assert toolchain.tools["nvcc"].version == "12.8"


@pytest.mark.parametrize(
    ("env", "cache", "how"),
    [
        ({"CXX": "ccache g++"}, "ccache", "CXX=ccache g++"),
        ({"CMAKE_CXX_COMPILER_LAUNCHER": "/usr/bin/sccache"}, "sccache", "CMAKE_CXX_COMPILER_LAUNCHER"),
        ({}, None, "no compiler launcher"),
    ],
)
def test_compiler_cache_from_launcher_variables(env: dict, cache: str | None, how: str) -> None:
    toolchain = capture_toolchain(sys.executable, {**os.environ, **env})
    assert toolchain.compiler_cache == cache
    assert how in toolchain.compiler_cache_how


def test_ccache_masquerade_link_counts_as_ccache(tmp_path: Path) -> None:
    ccache = _script(tmp_path / "bin" / "ccache", 'exec "$@"\n')
    masquerade = tmp_path / "masq" / "c++"
    masquerade.parent.mkdir()
    masquerade.symlink_to(ccache)
    toolchain = capture_toolchain(sys.executable, {**os.environ, "CXX": str(masquerade)})
    assert toolchain.compiler_cache == "ccache"
    assert toolchain.compiler_cache_how == f"CXX={masquerade}"


def test_auto_compiler_cache_follows_path_like_vllm_setup(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    _script(bin_dir / "sccache", 'echo "sccache 0.8.1"\n')
    _script(bin_dir / "ccache", 'echo "ccache version 4.9"\n')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    assert capture_toolchain(sys.executable, env, auto_cache=True).compiler_cache == "sccache"
    env["VLLM_DISABLE_SCCACHE"] = "1"
    chosen = capture_toolchain(sys.executable, env, auto_cache=True)
    assert chosen.compiler_cache == "ccache"
    assert chosen.tools["ccache"].version == "4.9"


def test_missing_tools_are_named_in_one_line(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path / "empty"), "CUDA_HOME": str(tmp_path / "no-cuda")}
    with pytest.raises(ToolMissingError) as caught:
        require_tools(["nvcc", "cmake", "ninja"], env, python=None, where="build profile 'sm90'")
    line = caught.value.one_line()
    assert "\n" not in line
    assert line.startswith("build profile 'sm90': missing build tools:")
    assert f"nvcc (not in $CUDA_HOME/bin = {tmp_path / 'no-cuda'}/bin)" in line
    assert "cmake (not on PATH)" in line and "ninja (not on PATH)" in line


def test_torch_without_cuda_is_refused_for_a_cuda_profile() -> None:
    torch = pytest.importorskip("torch")
    if torch.version.cuda:
        pytest.skip("this torch has CUDA")
    with pytest.raises(ToolMissingError, match="has no CUDA"):
        capture_toolchain(sys.executable, dict(os.environ), require_torch_cuda=True)


def test_build_stops_before_any_step_when_a_tool_is_missing(tmp_path: Path) -> None:
    profile = BuildProfile(
        requires=("nvcc", "cmake"),
        env={"CUDA_HOME": str(tmp_path / "none")},
        venv=VenvSpec(python=sys.executable, create=True),
        requires_torch=False,
    )
    with pytest.raises(ToolMissingError, match="nvcc"):
        run_build(
            tmp_path / "src",
            profile,
            manifest=Manifest(),
            work_dir=tmp_path / "work",
            profile_name="x",
            base_env={"PATH": str(tmp_path / "empty")},
        )
    assert not (tmp_path / "work" / "venv").exists()
    assert "==> venv" not in (tmp_path / "work" / "build.log").read_text()
