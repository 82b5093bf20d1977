"""The CUDA routing (``routing_cuda.cu``): one warp per token, picks by warp-wide redux, built on first use.

Same contract as :func:`ds4kernels.routing.route_ref` for fp32 logits on a CUDA device, at most 512 experts
and top-k at most 32 (and at most E). A candidate, not the default: ``route(..., config={"IMPL": "cuda"})``
runs it; on the H200 it is slower than the Triton kernel (benchmarks/results/kernels_h200_notes.md).
Built by :mod:`ds4kernels.cuda_ext` (under a minute the first time).
"""

from __future__ import annotations

import torch

from . import cuda_ext

NAME = "routing_cuda"
MAX_EXPERTS = 512
MAX_TOPK = 32


def build_error() -> str | None:
    """None when the extension builds (or is cached), else why not, in one line."""
    return cuda_ext.build_error(NAME)


def takes(logits: torch.Tensor, topk: int) -> bool:
    """Whether the CUDA kernel covers this call's shape and dtype (fp32 [T, E], E <= 512, 1 <= topk <= min(32, E))."""
    e = logits.shape[1]
    return logits.dtype == torch.float32 and e <= MAX_EXPERTS and 1 <= topk <= min(MAX_TOPK, e)


def route_cuda(
    logits: torch.Tensor,
    bias: torch.Tensor | None,
    route_scale: float,
    topk: int,
    *,
    input_ids: torch.Tensor | None = None,
    tid2eid: torch.Tensor | None = None,
    warps: int = 4,
    tokens: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids int32 [T, topk], weights fp32 [T, topk]); logits fp32 [T, E] CUDA, unit stride along E.

    ``warps``: warps per block (1-8); ``tokens``: tokens per warp (scored layers route two side by side,
    the rest in turn). Hash layers: ``input_ids`` [T] (any integer dtype) and ``tid2eid``
    [vocab, topk] (any integer dtype), both or neither.

    Raises:
        RuntimeError: the extension cannot be built here (why, in one line), or shapes/dtypes outside
            :func:`takes` (from the extension).
    """
    why = build_error()
    if why is not None:
        raise RuntimeError(f"the CUDA routing (routing_cuda.cu) is unavailable here: {why}")
    t = logits.shape[0]
    ids = torch.empty((t, topk), dtype=torch.int32, device=logits.device)
    w = torch.empty((t, topk), dtype=torch.float32, device=logits.device)
    logits = logits if logits.stride(1) == 1 else logits.contiguous()
    ext = cuda_ext.extension(NAME)
    if tid2eid is not None:
        if input_ids is None:
            raise ValueError("hash layers need input_ids [T] and tid2eid [vocab, topk]")
        table = tid2eid.to(torch.int32).contiguous()
        tokens_i64 = input_ids.to(torch.int64).contiguous()
        ext.route_hash(logits, tokens_i64, table, float(route_scale), topk, ids, w, warps, tokens)
    else:
        b = bias.to(torch.float32).contiguous() if bias is not None else logits
        ext.route_scored(logits, b, bias is not None, float(route_scale), topk, ids, w, warps, tokens)
    return ids, w
