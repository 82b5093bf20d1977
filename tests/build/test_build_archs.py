"""The build proves its GPU architectures: what it compiled for against the profile's TORCH_CUDA_ARCH_LIST.

Real builds whose output we control: the profile's ``install_run`` compiles a small CUDA kernel
with the real nvcc for the archs we pick (``set -x`` echoes nvcc's own command line into the log,
as a verbose build does) and prints the CMake-style "not building" line for a kernel it skips.
The cubin path (cuobjdump) runs only where cuobjdump is installed.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from ds4sync.models.native_profile import BuildProfile, VenvSpec
from ds4sync.native.driver import run_build
from ds4sync.native.manifest import Manifest
from ds4sync.native.proof import arch_list, archs_in_output, normalize_arch

NVCC = shutil.which("nvcc")
KERNEL = "__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }\n"


def _profile(archs: str, asked: str) -> BuildProfile:
    gencode = " ".join(f"-gencode arch=compute_{a},code=sm_{a}" for a in archs.split())
    script = (
        "set -x; "
        f"nvcc -c {gencode} kernel.cu -o kernel.o; "
        "echo '-- Not building marlin_moe as no compatible archs found in CUDA target architectures'"
    )
    return BuildProfile(
        venv=VenvSpec(path=str(Path(sys.executable).parent.parent), create=False),
        install_run=("sh", "-c", script),
        env={"TORCH_CUDA_ARCH_LIST": asked},
        requires_torch=False,
        check_deps=False,
    )


def _src(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "kernel.cu").write_text(KERNEL)
    return src


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_a_narrowed_arch_list_fails_the_build_naming_the_skipped_kernels(tmp_path: Path) -> None:
    result = run_build(_src(tmp_path), _profile("75 80", "12.0a"), manifest=Manifest(), work_dir=tmp_path / "w")
    assert result.status == "failed" and result.failed_step == "arch proof"
    assert result.archs is not None
    assert result.archs.asked == ("12.0a",) and result.archs.built == ("7.5", "8.0")
    assert result.archs.missing == ("12.0a",) and result.archs.skipped_kernels == ("marlin_moe",)
    assert "missing 12.0a" in result.message and "marlin_moe" in result.message
    assert (tmp_path / "src" / "kernel.o").is_file()  # nvcc really compiled it


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_the_asked_archs_built_pass(tmp_path: Path) -> None:
    result = run_build(_src(tmp_path), _profile("75 80", "7.5;8.0"), manifest=Manifest(), work_dir=tmp_path / "w")
    assert result.status == "passed", result.message
    assert result.archs is not None and result.archs.ok and result.archs.built == ("7.5", "8.0")


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None or shutil.which("cuobjdump") is None, reason="needs nvcc and cuobjdump")
def test_cubins_in_the_built_library_are_read(tmp_path: Path) -> None:
    src = _src(tmp_path)
    profile = _profile("80", "8.0").model_copy(
        update={"install_run": ("sh", "-c", "nvcc -shared -Xcompiler -fPIC -arch=sm_80 kernel.cu -o _k.so")}
    )
    result = run_build(src, profile, manifest=Manifest(), work_dir=tmp_path / "w")
    assert result.archs is not None and "cubins" in result.archs.source and "8.0" in result.archs.built


def test_no_arch_list_no_proof(tmp_path: Path) -> None:
    profile = BuildProfile(
        venv=VenvSpec(path=str(Path(sys.executable).parent.parent), create=False),
        install_run=("sh", "-c", "echo built"),
        requires_torch=False,
        check_deps=False,
    )
    result = run_build(tmp_path, profile, manifest=Manifest(), work_dir=tmp_path / "w")
    assert result.status == "passed" and result.archs is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [("sm_120a", "12.0a"), ("compute_90a", "9.0a"), ("120a-real", "12.0a"), ("8.0+PTX", "8.0"), ("10.0f", "10.0f")],
)
def test_arch_names_normalise(text: str, expected: str) -> None:
    assert normalize_arch(text) == expected


def test_archs_from_cmake_and_nvcc_lines_not_from_ds4syncs_own() -> None:
    log = (
        "==> install: nvcc -arch=sm_120a\n"
        "-- CUDA target architectures: 7.5;8.0\n"
        "[3/9] nvcc --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] -c a.cu\n"
        "-- Not building scaled_mm_c3x_sm100 as no compatible archs found\n"
    )
    assert archs_in_output(log) == (("7.5", "8.0", "9.0a"), ("scaled_mm_c3x_sm100",))
    assert arch_list("12.0a 12.1a;8.0+PTX") == ("12.0a", "12.1a", "8.0")
