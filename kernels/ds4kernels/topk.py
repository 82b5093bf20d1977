"""Top-k per row after the indexer (vLLM ``top_k_per_row_prefill`` / ``_decode`` contract).

Row r covers ``logits[r, start_r:end_r]`` (L = end - start, negative L counts as 0). The output is int32
[rows, K], request-local (``j - start``): if L <= K it is ``0..L-1`` then -1; otherwise the K indices of
the largest values, in unspecified order (ours: ascending index). NaN ranks above +inf, as in torch.topk.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import Cost


def topk_per_row_ref(
    logits: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, k: int, *, chunk_rows: int = 256
) -> torch.Tensor:
    """Torch reference: ``torch.topk`` over each row's range, -1 padded, request-local indices.

    Columns outside [start, end) are masked below any float32 value (float64 -inf, real -inf mapped to
    the float64 minimum) so that in-range -inf values still rank above them.

    Args:
        logits: [rows, cols] fp32, any strides. starts, ends: [rows] int32. k: K >= 1.
    Returns:
        [rows, K] int32.
    """
    rows, cols = logits.shape
    out = torch.full((rows, k), -1, dtype=torch.int32, device=logits.device)
    starts, ends = starts.long().clamp(0, cols), ends.long().clamp(0, cols)
    j = torch.arange(cols, device=logits.device)
    kk = min(k, cols)
    for r0 in range(0, rows, chunk_rows):
        s, e = starts[r0 : r0 + chunk_rows, None], ends[r0 : r0 + chunk_rows, None]
        x = logits[r0 : r0 + chunk_rows].double()
        x = torch.where(x == float("-inf"), torch.finfo(torch.float64).min, x)
        x = torch.where((j >= s) & (j < e), x, float("-inf"))
        if kk == 0:
            continue
        idx = x.topk(kk, dim=1).indices - s
        length = (e - s).clamp(min=0)
        col = torch.arange(kk, device=logits.device)[None, :]
        short = length <= k
        picked = torch.where(short, col, idx)
        out[r0 : r0 + chunk_rows, :kk] = torch.where(col < length, picked, -1).int()
    return out


@triton.jit
def _sort_key(x):
    bits = x.to(tl.uint32, bitcast=True)
    key = tl.where((bits >> 31) != 0, ~bits, bits | 0x80000000)
    return tl.where(x != x, 0xFFFFFFFF, key)


@triton.jit
def _topk_kernel(x_ptr, starts_ptr, ends_ptr, out_ptr, cols, stride_xm, stride_xn, stride_om, K, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    start = tl.minimum(tl.maximum(tl.load(starts_ptr + row), 0), cols)  # clamped: never read outside the row
    length = tl.maximum(tl.minimum(tl.load(ends_ptr + row), cols) - start, 0)
    out_row = out_ptr + row.to(tl.int64) * stride_om
    base = x_ptr + row.to(tl.int64) * stride_xm + start.to(tl.int64) * stride_xn
    ar = tl.arange(0, BLOCK)
    if length <= K:
        for c0 in range(0, K, BLOCK):
            idx = c0 + ar
            tl.store(out_row + idx, tl.where(idx < length, idx, -1), mask=idx < K)
    else:
        bins = tl.arange(0, 256)
        prefix = tl.zeros([], dtype=tl.uint32)
        want = K
        for p in tl.static_range(4):
            hist = tl.zeros([256], dtype=tl.int32)
            for c0 in range(0, length, BLOCK):
                offs = c0 + ar
                valid = offs < length
                key = _sort_key(tl.load(base + offs * stride_xn, mask=valid, other=0.0))
                match = valid
                if p > 0:
                    match = valid & ((key >> (32 - 8 * p)) == prefix)
                digit = tl.where(match, (key >> (24 - 8 * p)) & 255, 0).to(tl.int32)
                hist += tl.histogram(digit, 256)
                hist -= tl.where(bins == 0, tl.sum((~match).to(tl.int32), axis=0), 0)
            ge = tl.cumsum(hist, 0, reverse=True)
            d_star = tl.sum((ge >= want).to(tl.int32), axis=0) - 1
            gt = tl.sum(tl.where(bins == d_star, ge - hist, 0), axis=0)
            want = want - gt
            prefix = (prefix << 8) | d_star.to(tl.uint32)
        taken = 0
        eq_seen = 0
        for c0 in range(0, length, BLOCK):
            offs = c0 + ar
            valid = offs < length
            key = _sort_key(tl.load(base + offs * stride_xn, mask=valid, other=0.0))
            gt_m = valid & (key > prefix)
            eq_m = valid & (key == prefix)
            eq_rank = eq_seen + tl.cumsum(eq_m.to(tl.int32), 0)
            take = gt_m | (eq_m & (eq_rank <= want))
            pos = taken + tl.cumsum(take.to(tl.int32), 0) - 1
            tl.store(out_row + pos, offs, mask=take)
            taken += tl.sum(take.to(tl.int32), axis=0)
            eq_seen += tl.sum(eq_m.to(tl.int32), axis=0)


def topk_config(rows: int, cols: int, k: int) -> dict:
    """Tile size and warps (tuned on an H200; small under the interpreter)."""
    from .common import interpreting, tuned

    if interpreting():
        return {"BLOCK": 64, "num_warps": 4}
    many = rows >= 1024  # enough rows to fill the SMs: small programs, many resident per SM
    found = tuned("topk", "many" if many else "few")
    if found:
        return found
    return {"BLOCK": 1024, "num_warps": 4} if many else {"BLOCK": 4096, "num_warps": 16}


def topk_per_row(
    logits: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, k: int, *, config: dict | None = None
) -> torch.Tensor:
    """Triton radix-select top-k per row; same contract as :func:`topk_per_row_ref`.

    One program per row: four 8-bit histogram passes over order-preserving uint32 keys find the exact
    k-th largest key, a fifth pass writes every index above it and the lowest-index ties at it.
    Deterministic (ascending index order). Ranges are clamped to [0, cols] in the kernel (no host sync).
    """
    rows, cols = logits.shape
    if starts.shape != (rows,) or ends.shape != (rows,):
        raise ValueError("starts and ends must be [rows]")
    out = torch.empty((rows, k), dtype=torch.int32, device=logits.device)
    if rows == 0:
        return out
    cfg = dict(config or topk_config(rows, cols, k))
    _topk_kernel[(rows,)](
        logits,
        starts.int().contiguous(),
        ends.int().contiguous(),
        out,
        cols,
        logits.stride(0),
        logits.stride(1),
        out.stride(0),
        k,
        **cfg,
    )
    return out


def topk_cost(starts: torch.Tensor, ends: torch.Tensor, k: int) -> Cost:
    """Bytes by the spec page (§3): one read of each row's range plus the index write; no tensor work."""
    total = int((ends.long() - starts.long()).clamp(min=0).sum())
    return Cost(bytes=float(4 * total + 4 * starts.shape[0] * k), flops=0.0, peak=None)
