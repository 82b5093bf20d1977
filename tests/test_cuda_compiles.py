"""The CUDA kernels (``kernels/ds4kernels/*.cu``: the top-k) compile with the real nvcc for the
H200 (sm_90) and the fork's SM120 (sm_120), and ptxas reports no register spills in any of their entry points;
the top-k's two launch shapes fit their blocks per SM in the register file.

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
KERNELS = ROOT / "kernels" / "ds4kernels"
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


def _ptxas_report(stderr: str) -> dict[str, dict[str, int]]:
    """{entry function (mangled): registers, spill stores, spill loads} from ``-Xptxas -v`` lines."""
    entries: dict[str, dict[str, int]] = {}
    current: dict[str, int] = {}
    for line in stderr.splitlines():
        if entry := re.search(r"Compiling entry function '(\S+)'", line):
            current = entries.setdefault(entry[1], {})
        elif spill := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line):
            current.update(spill_stores=int(spill[1]), spill_loads=int(spill[2]))
        elif used := re.search(r"Used (\d+) registers", line):
            current["registers"] = int(used[1])
    return entries


def _template_args(name: str, kernel: str) -> tuple[int, ...] | None:
    """The leading integer template arguments of a mangled ``kernel`` entry (``ILi8ELi1024E`` -> (8, 1024)),
    bools as 0/1; None for another function."""
    found = re.search(kernel + r"I((?:L[ib]\d+E)+)", name)
    return tuple(int(v) for v in re.findall(r"L[ib](\d+)E", found[1])) if found else None


def _compile(source: Path, arch: str, out: Path) -> str:
    """ptxas's report (stderr) of compiling ``source`` for ``arch`` to an object file; asserts it compiled."""
    assert NVCC is not None
    env = {**os.environ, "PATH": f"{NVCC.parent}{os.pathsep}{os.environ.get('PATH', '')}", "LC_ALL": "C"}
    cmd = [str(NVCC), "-std=c++17", "-O3", f"-arch={arch}", "-Xptxas=-v", "-I", str(STAND_IN), "-c", str(source)]
    done = subprocess.run([*cmd, "-o", str(out)], capture_output=True, text=True, env=env)
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower() or "fault" in line.lower()]
    assert done.returncode == 0, f"nvcc exit {done.returncode}: {errors[:3] or done.stderr[-500:]}"
    assert out.stat().st_size > 0
    return done.stderr


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="needs nvcc: pip install -e '.[cuda-check]'")
@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
def test_topk_cuda_compiles_for_the_h200_and_sm120_without_spills(arch: str, tmp_path: Path) -> None:
    entries = _ptxas_report(_compile(KERNELS / "topk_cuda.cu", arch, tmp_path / "topk_cuda.o"))
    report = {args: stats for name, stats in entries.items() if (args := _template_args(name, "topk_kernel"))}
    assert set(report) == SHAPES, report
    for (_, _, blocks), stats in report.items():
        assert stats["spill_stores"] == 0 and stats["spill_loads"] == 0, (arch, report)
        assert stats["registers"] <= 65536 // (512 * blocks), (arch, report)  # 512 threads, `blocks` per SM


def test_the_ptxas_report_is_read_per_entry_and_its_template_arguments() -> None:
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
    report = _ptxas_report(stderr)
    assert report == {
        "_ZN4_GLOBAL__N_111topk_kernelILi8ELi1024ELi3ELN3cub2E": {
            "spill_stores": 28,
            "spill_loads": 36,
            "registers": 40,
        },
        "_Z5otherPf": {"spill_stores": 8, "spill_loads": 8, "registers": 12},
        "_ZN4_GLOBAL__N_111topk_kernelILi16ELi2048ELi2ELN3cub0E": {
            "spill_stores": 0,
            "spill_loads": 0,
            "registers": 62,
        },
    }
    assert [_template_args(name, "topk_kernel") for name in report] == [(8, 1024, 3), None, (16, 2048, 2)]
    assert _template_args("_ZN12_GLOBAL__N_113scored_kernelILi2ELb1ELi2EEEvPKf", "scored_kernel") == (2, 1, 2)
