"""Top-k per row after the indexer (vLLM ``top_k_per_row_prefill`` / ``_decode`` contract).

Row r covers ``logits[r, start_r:end_r]`` (L = end - start, negative L counts as 0). The output is int32
[rows, K], request-local (``j - start``): if L <= K it is ``0..L-1`` then -1; otherwise the K indices of
the largest values, in unspecified order. NaN ranks above +inf, as in torch.topk.
"""

from __future__ import annotations

import math

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
def _radix_select(base, stride_xn, length, K, out_row, BLOCK: tl.constexpr):
    """Exact k-th largest key by four 8-bit histogram passes, then one pass writing exactly K indices
    (every key above it, then the lowest-index ties at it), in ascending index order."""
    ar = tl.arange(0, BLOCK)
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


@triton.jit
def _kth_largest2(keys, mask, j1, j2):
    """The j1-th and j2-th largest of the uint32 ``keys`` where ``mask`` (1-based ranks; j <= 0 gives
    0xFFFFFFFF, j > count gives 0): per bit from the top, keep it when at least j keys are >= the prefix."""
    t1 = tl.zeros([], dtype=tl.uint32)
    t2 = tl.zeros([], dtype=tl.uint32)
    for i in range(32):  # a loop, not unrolled: small code (instruction-fetch stalls) and fewer registers
        bit = tl.full([], 0x80000000, tl.uint32) >> (tl.zeros([], dtype=tl.uint32) + i)
        c1 = t1 | bit
        c2 = t2 | bit
        n1 = tl.sum((mask & (keys >= c1)).to(tl.int32), axis=0)
        n2 = tl.sum((mask & (keys >= c2)).to(tl.int32), axis=0)
        t1 = tl.where(n1 >= j1, c1, t1)
        t2 = tl.where(n2 >= j2, c2, t2)
    return t1, t2


@triton.jit
def _kth_largest(keys, mask, j):
    """The j-th largest of the uint32 ``keys`` where ``mask`` (see :func:`_kth_largest2`)."""
    t = tl.zeros([], dtype=tl.uint32)
    for i in range(32):
        c = t | (tl.full([], 0x80000000, tl.uint32) >> (tl.zeros([], dtype=tl.uint32) + i))
        t = tl.where(tl.sum((mask & (keys >= c)).to(tl.int32), axis=0) >= j, c, t)
    return t


@triton.jit
def _topk_sample_kernel(
    x_ptr,
    starts_ptr,
    ends_ptr,
    out_ptr,
    ck_ptr,
    ci_ptr,
    cols,
    stride_xm,
    stride_xn,
    stride_om,
    K,
    BLOCK: tl.constexpr,
    GROUPS: tl.constexpr,
    CAP: tl.constexpr,
):
    row = tl.program_id(0)
    start = tl.minimum(tl.maximum(tl.load(starts_ptr + row), 0), cols)  # clamped: never read outside the row
    length = tl.maximum(tl.minimum(tl.load(ends_ptr + row), cols) - start, 0)
    out_row = out_ptr + row.to(tl.int64) * stride_om
    ck_row = ck_ptr + row.to(tl.int64) * CAP
    ci_row = ci_ptr + row.to(tl.int64) * CAP
    base = x_ptr + row.to(tl.int64) * stride_xm + start.to(tl.int64) * stride_xn
    ar = tl.arange(0, BLOCK)
    if length <= K:
        for c0 in range(0, K, BLOCK):
            idx = c0 + ar
            tl.store(out_row + idx, tl.where(idx < length, idx, -1), mask=idx < K)
    else:
        # 1. Bracket the k-th largest key with two sample quantiles: keys above ``hi`` are in, keys in
        #    (lo, hi] are candidates, keys <= lo are out. Rows short enough are all candidates.
        hi = tl.full([], 0xFFFFFFFF, tl.uint32)
        lo = tl.zeros([], dtype=tl.uint32)
        if length > CAP:
            gi = tl.arange(0, GROUPS)
            pos = (gi[:, None].to(tl.int64) * length) // GROUPS + tl.arange(0, 8)[None, :]
            pos = tl.minimum(pos, length - 1)
            sk = tl.reshape(_sort_key(tl.load(base + pos * stride_xn)), [GROUPS * 8])
            q = (K * 1.0) / length.to(tl.float32)
            r = q * (GROUPS * 8)
            m = 4.0 * tl.sqrt(r * (1.0 - q)) + 4.0  # 4 sigma of the sample rank, plus slack
            j_hi = tl.floor(r - m).to(tl.int32)
            j_lo = tl.ceil(r + m).to(tl.int32)
            everything = sk == sk
            hi, lo = _kth_largest2(sk, everything, j_hi, j_lo)
            hi = tl.where(j_hi >= 1, hi, tl.full([], 0xFFFFFFFF, tl.uint32))
            lo = tl.where(j_lo <= GROUPS * 8, lo, tl.zeros([], dtype=tl.uint32))
        # 2. One pass: keys above hi go straight to the output, candidates to the row's scratch.
        n_gt = 0
        n_c = 0
        for c0 in range(0, length, BLOCK):
            offs = c0 + ar
            valid = offs < length
            key = _sort_key(tl.load(base + offs * stride_xn, mask=valid, other=0.0))
            gt = valid & (key > hi)
            cd = valid & (key > lo) & (key <= hi)
            packed = gt.to(tl.int32) + (cd.to(tl.int32) << 16)  # both counts in one scan (BLOCK < 2**16)
            cs = tl.cumsum(packed, 0)
            pg = n_gt + (cs & 0xFFFF) - 1
            pc = n_c + (cs >> 16) - 1
            tl.store(out_row + pg, offs, mask=gt & (pg < K))
            tl.store(ck_row + pc, key.to(tl.int32, bitcast=True), mask=cd & (pc < CAP))
            tl.store(ci_row + pc, offs, mask=cd & (pc < CAP))
            tot = tl.sum(packed, axis=0)
            n_gt += tot & 0xFFFF
            n_c += tot >> 16
        if (n_gt <= K) & (n_gt + n_c >= K) & (n_c <= CAP):
            # 3. The (K - n_gt)-th largest candidate, then candidates above it and its lowest-index ties.
            want = K - n_gt
            cidx = tl.arange(0, CAP)
            cm = cidx < n_c
            ck = tl.load(ck_row + cidx, mask=cm, other=0).to(tl.uint32, bitcast=True)
            v = _kth_largest(ck, cm, want)
            above = cm & (ck > v)
            eq = cm & (ck == v)
            ties = want - tl.sum(above.to(tl.int32), axis=0)
            take = above | (eq & (tl.cumsum(eq.to(tl.int32), 0) <= ties))
            pos_t = n_gt + tl.cumsum(take.to(tl.int32), 0) - 1
            idx = tl.load(ci_row + cidx, mask=take, other=0)
            tl.store(out_row + pos_t, idx, mask=take)
        else:  # the bracket missed (adversarial or heavily tied data): exact radix select, rewrites all K
            _radix_select(base, stride_xn, length, K, out_row, BLOCK)


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
        _radix_select(base, stride_xn, length, K, out_row, BLOCK)


SAMPLE_GROUPS = 256  # 256 groups of 8 neighbours: 2048 sampled keys per row, 8-16 KB of reads
MAX_CAP = 8192  # candidate buffer per row; above it the radix kernel runs instead


def candidate_cap(cols: int, k: int, groups: int = SAMPLE_GROUPS) -> int:
    """Power-of-two candidate capacity for the sample-bracket kernel: 1.5x the expected number of keys
    between the two sample quantiles (4 sigma of the sample rank each side, plus slack) at the smallest
    selected fraction k / cols, at least 512. Rows no longer than this skip the sample (all candidates)."""
    s = 8 * groups
    q = min(1.0, k / max(cols, 1))
    margin = 4.0 * math.sqrt(s * q * (1.0 - q)) + 6.0
    expected = cols * (2.0 * margin + 2.0) / s
    return max(512, triton.next_power_of_2(int(1.5 * expected) + 64))


def topk_config(rows: int, cols: int, k: int) -> dict:
    """Kernel, tile size and warps (tuned on an H200; small under the interpreter).

    ``SAMPLE`` (default) is the sample-bracket kernel; ``SAMPLE=False`` the four-pass radix kernel.
    """
    from .common import interpreting, tuned

    if interpreting():
        return {"SAMPLE": True, "BLOCK": 64, "num_warps": 4}
    many = rows >= 1024  # enough rows to fill the SMs: small programs, many resident per SM
    found = tuned("topk", "many" if many else "few")
    if found:
        return found
    return {"SAMPLE": True, "BLOCK": 2048, "num_warps": 4} if many else {"SAMPLE": True, "BLOCK": 4096, "num_warps": 8}


def topk_per_row(
    logits: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, k: int, *, config: dict | None = None
) -> torch.Tensor:
    """Triton top-k per row; same contract as :func:`topk_per_row_ref`. Deterministic.

    Default (sample-bracket) kernel, one program per row: 2048 keys sampled from the row bracket the k-th
    largest key between two sample quantiles; one pass over the row writes every key above the upper
    one straight to the output and gathers the keys between them (a few % of the row) into a per-row
    buffer; an exact bitwise bisection over that buffer finds the k-th largest key and the lowest-index
    ties at it. When the bracket misses (heavily tied or adversarial rows) the row falls back to the
    exact radix select (four 8-bit histogram passes and a write pass), so the result never depends on
    the sample. Order within a row: unspecified (the radix path: ascending index). Ranges are clamped to
    [0, cols] in the kernel (no host sync).

    Raises:
        ValueError: starts/ends are not [rows].
    """
    rows, cols = logits.shape
    if starts.shape != (rows,) or ends.shape != (rows,):
        raise ValueError("starts and ends must be [rows]")
    out = torch.empty((rows, k), dtype=torch.int32, device=logits.device)
    if rows == 0:
        return out
    cfg = dict(config or topk_config(rows, cols, k))
    sample = cfg.pop("SAMPLE", True)
    cap = cfg.pop("CAP", None) or candidate_cap(cols, k)  # CAP: forced capacity (tests: exercise the sample)
    common = (starts.int().contiguous(), ends.int().contiguous(), out)
    if sample and cap <= MAX_CAP and cfg["BLOCK"] < 2**16:
        scratch = torch.empty((2, rows, cap), dtype=torch.int32, device=logits.device)
        _topk_sample_kernel[(rows,)](
            logits,
            *common,
            scratch[0],
            scratch[1],
            cols,
            logits.stride(0),
            logits.stride(1),
            out.stride(0),
            k,
            GROUPS=SAMPLE_GROUPS,
            CAP=cap,
            **cfg,
        )
        return out
    _topk_kernel[(rows,)](logits, *common, cols, logits.stride(0), logits.stride(1), out.stride(0), k, **cfg)
    return out


def topk_cost(starts: torch.Tensor, ends: torch.Tensor, k: int) -> Cost:
    """Bytes by the spec page (§3): one read of each row's range plus the index write; no tensor work."""
    total = int((ends.long() - starts.long()).clamp(min=0).sum())
    return Cost(bytes=float(4 * total + 4 * starts.shape[0] * k), flops=0.0, peak=None)
