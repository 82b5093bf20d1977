"""``kernels/ds4kernels/topk_cuda.cu`` compiles with the real nvcc for the H200 (sm_90) and the fork's SM120
(sm_120), and ptxas reports no register spills in either of its two launch shapes.

No GPU is needed. nvcc is CUDA 13.0 from PyPI's ``nvidia-cuda-nvcc`` wheels (the ``cuda-check`` extra). The device
code is compiled for real. The torch host declarations it uses come from ``tests/cuda_compile/``: a compile-only
stand-in for torch's CUDA headers, which a CPU build of torch does not ship. The object file is never linked or run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "kernels" / "ds4kernels" / "topk_cuda.cu"
STAND_IN = Path(__file__).resolve().parent / "cuda_compile"
SHAPES = {(8, 1024, 3), (16, 2048, 2)}  # (columns per thread, sample, blocks per SM) of the two launches


def _nvcc() -> Path | None:
    """nvcc of the installed ``nvidia-cuda-nvcc`` wheel (``site-packages/nvidia/cu13/bin``), if any."""
    spec = importlib.util.find_spec("nvidia")
    roots = (spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        candidate = Path(root) / "cu13" / "bin" / "nvcc"
        if candidate.is_file():
            return candidate
    return None


NVCC = _nvcc()


def _ptxas_report(stderr: str) -> dict[tuple[int, int, int], dict[str, int]]:
    """{launch shape: registers, spill stores, spill loads} from ``-Xptxas -v`` lines, per topk_kernel entry."""
    kernels: dict[tuple[int, int, int], dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in stderr.splitlines():
        entry = re.search(r"Compiling entry function '\S*topk_kernelILi(\d+)ELi(\d+)ELi(\d+)E", line)
        if entry:
            current = kernels.setdefault((int(entry[1]), int(entry[2]), int(entry[3])), {})
        elif "Compiling entry function" in line:
            current = None
        elif current is not None and (spill := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)):
            current.update(spill_stores=int(spill[1]), spill_loads=int(spill[2]))
        elif current is not None and (used := re.search(r"Used (\d+) registers", line)):
            current["registers"] = int(used[1])
    return kernels


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="needs nvcc: pip install -e '.[cuda-check]'")
@pytest.mark.parametrize(
    ("arch", "flags"),
    [("sm_90", []), ("sm_120", []), ("sm_90", ["-DDS4_TOPK_PHASES"])],  # the last: benchmarks/kernels_topk_phases.py
)
def test_topk_cuda_compiles_for_the_h200_and_sm120_without_spills(arch: str, flags: list[str], tmp_path: Path) -> None:
    assert NVCC is not None
    env = {**os.environ, "PATH": f"{NVCC.parent}{os.pathsep}{os.environ.get('PATH', '')}", "LC_ALL": "C"}
    cmd = [
        str(NVCC),
        "-std=c++17",
        "-O3",
        f"-arch={arch}",
        *flags,
        "-Xptxas=-v",
        "-I",
        str(STAND_IN),
        "-c",
        str(SOURCE),
    ]
    done = subprocess.run([*cmd, "-o", str(tmp_path / "topk_cuda.o")], capture_output=True, text=True, env=env)
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower() or "fault" in line.lower()]
    assert done.returncode == 0, f"nvcc exit {done.returncode}: {errors[:3] or done.stderr[-500:]}"
    assert (tmp_path / "topk_cuda.o").stat().st_size > 0
    report = _ptxas_report(done.stderr)
    assert set(report) == SHAPES, report
    for (_, _, blocks), stats in report.items():
        assert stats["spill_stores"] == 0 and stats["spill_loads"] == 0, (arch, report)
        assert stats["registers"] <= 65536 // (512 * blocks), (arch, report)  # 512 threads, `blocks` per SM


def test_the_ptxas_report_is_read_per_launch_shape() -> None:
    stderr = (
        "ptxas info    : Compiling entry function '_ZN4_GLOBAL__N_111topk_kernelILi8ELi1024ELi3ELN3cub2E'\n"
        "ptxas info    : Function properties for _ZN4_GLOBAL__N_111topk_kernelILi8ELi1024ELi3E\n"
        "    16 bytes stack frame, 28 bytes spill stores, 36 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers\n"
        "ptxas info    : Compiling entry function '_Z5otherPf' for 'sm_90'\n"
        "    0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
        "ptxas info    : Used 12 registers\n"
        "ptxas info    : Compiling entry function '_ZN4_GLOBAL__N_111topk_kernelILi16ELi2048ELi2ELN3cub0E'\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 62 registers, used 1 barriers\n"
    )
    assert _ptxas_report(stderr) == {
        (8, 1024, 3): {"spill_stores": 28, "spill_loads": 36, "registers": 40},
        (16, 2048, 2): {"spill_stores": 0, "spill_loads": 0, "registers": 62},
    }
