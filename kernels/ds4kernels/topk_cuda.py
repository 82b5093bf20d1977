"""The CUDA top-k (``topk_cuda.cu``): radix select, one block per row, built on first use.

Same contract as :func:`ds4kernels.topk.topk_per_row_ref` (fp32 logits on a CUDA device). Built on first use
(:mod:`ds4kernels.cuda_ext`; about a minute the first time).
"""

from __future__ import annotations

import torch

from . import cuda_ext

NAME = "topk_cuda"
SOURCE = cuda_ext.source(NAME)


def extension():
    """The compiled extension module (see :mod:`ds4kernels.cuda_ext`)."""
    return cuda_ext.extension(NAME)


def build_error() -> str | None:
    """None when the extension builds (or is cached), else why not, in one line."""
    return cuda_ext.build_error(NAME)


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
