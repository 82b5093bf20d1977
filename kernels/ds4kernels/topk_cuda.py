"""The CUDA top-k (``topk_cuda.cu``): radix select, one block per row, built on first use.

Same contract as :func:`ds4kernels.topk.topk_per_row_ref` (fp32 logits on a CUDA device). The extension is
compiled by ``torch.utils.cpp_extension.load`` for the visible GPU's architecture (nvcc needed; about a
minute the first time, then cached in torch's extensions directory).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("topk_cuda.cu")


@functools.cache
def extension():
    """The compiled extension module.

    Raises:
        RuntimeError / OSError: nvcc or a compiler is missing, or the build failed (torch's message).
    """
    from torch.utils.cpp_extension import load

    return load(name="ds4kernels_topk_cuda", sources=[str(SOURCE)], extra_cuda_cflags=["-O3"], verbose=False)


@functools.cache
def build_error() -> str | None:
    """None when the extension builds (or is cached), else why not, in one line (no CUDA device or toolkit,
    or the compiler's last line). Decided once per process."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME is None:
        return "no CUDA toolkit (nvcc) found: set CUDA_HOME or put nvcc on PATH"
    try:
        extension()
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


def topk_per_row_cuda(
    logits: torch.Tensor,
    starts: torch.Tensor,
    ends: torch.Tensor,
    k: int,
    *,
    float_pass: bool = True,
) -> torch.Tensor:
    """int32 [rows, k] request-local indices; logits [rows, cols] fp32 CUDA, any strides; starts, ends [rows].

    ``float_pass``: the pass over the row compares floats against the bracket instead of computing every
    column's key (where the bracket allows it; same result).

    Raises:
        RuntimeError: the extension cannot be built here (why, in one line), or not a 2-D fp32 CUDA tensor,
            k < 1, or starts/ends not [rows] (from the extension).
    """
    why = build_error()
    if why is not None:
        raise RuntimeError(f"the CUDA top-k (topk_cuda.cu) is unavailable here: {why}")
    return extension().topk_per_row(logits, starts, ends, int(k), bool(float_pass))
