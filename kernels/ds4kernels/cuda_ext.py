"""The CUDA extensions beside this file (``topk_cuda.cu``), built on first use.

Each ``NAME.cu`` is compiled by ``torch.utils.cpp_extension.load`` for the visible GPU's architecture as the
module ``ds4kernels_NAME`` (nvcc needed; a minute or so the first time, then cached in torch's extensions
directory). Where one cannot be built, the op that uses it runs its Triton kernel and names the reason.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import torch

HERE = Path(__file__).parent


def source(name: str) -> Path:
    """The ``.cu`` file of extension ``name`` (``topk_cuda``)."""
    return HERE / f"{name}.cu"


@functools.cache
def extension(name: str):
    """The compiled extension module of ``name``.

    Raises:
        RuntimeError / OSError: nvcc or a compiler is missing, or the build failed (torch's message).
    """
    from torch.utils.cpp_extension import load

    return load(name=f"ds4kernels_{name}", sources=[str(source(name))], extra_cuda_cflags=["-O3"], verbose=False)


@functools.cache
def build_error(name: str) -> str | None:
    """None when extension ``name`` builds (or is cached), else why not, in one line (no CUDA device or
    toolkit, or the compiler's first error). Decided once per process and extension."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME is None:
        return "no CUDA toolkit (nvcc) found: set CUDA_HOME or put nvcc on PATH"
    try:
        extension(name)
    except Exception as exc:  # any build failure means "use the Triton kernel", with the reason kept
        return build_failure_line(exc)
    return None


def build_failure_line(exc: BaseException) -> str:
    """One line (at most 300 characters) for a failed build: the compiler's first error line, and the message's
    last line when it differs (ninja's "build stopped" alone names no cause). Torch's message carries the
    whole build log."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    first = next(
        (
            line
            for line in lines
            if re.search(r"\berror\b|segmentation fault|died due to signal", line, re.IGNORECASE)
            and not line.startswith(("Error building extension", "ninja:", "FAILED:"))
        ),
        None,
    )
    cause = f"{first} ({last})" if first and first != last else last
    return f"{type(exc).__name__}: {cause}"[:300]
