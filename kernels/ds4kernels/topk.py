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
def _kth_largest(keys, mask, j, t, first):
    """The j-th largest of the uint32 ``keys`` where ``mask`` (1-based rank; j > count gives ``t``), given
    that its bits above bit ``first`` (counted from the top) are those of ``t`` and ``t``'s lower bits are
    zero: per bit from ``first`` down, keep it when at least j keys are >= the prefix."""
    for i in range(first, 32):  # a loop, not unrolled: small code (instruction-fetch stalls) and fewer registers
        c = t | (tl.full([], 0x80000000, tl.uint32) >> (tl.zeros([], dtype=tl.uint32) + i))
        t = tl.where(tl.sum((mask & (keys >= c)).to(tl.int32), axis=0) >= j, c, t)
    return t


@triton.jit
def _kth_largest2(keys, j1, j2, BITS: tl.constexpr):
    """The top ``BITS`` bits (lower bits zero) of the j1-th and j2-th largest of ``keys`` (j <= 0 gives all
    ones in those bits, j > count gives 0), both found in one bisection loop."""
    t1 = tl.zeros([], dtype=tl.uint32)
    t2 = tl.zeros([], dtype=tl.uint32)
    for i in range(BITS):
        bit = tl.full([], 0x80000000, tl.uint32) >> (tl.zeros([], dtype=tl.uint32) + i)
        c1 = t1 | bit
        c2 = t2 | bit
        t1 = tl.where(tl.sum((keys >= c1).to(tl.int32), axis=0) >= j1, c1, t1)
        t2 = tl.where(tl.sum((keys >= c2).to(tl.int32), axis=0) >= j2, c2, t2)
    return t1, t2


@triton.jit
def _bracket(base, stride_xn, length, K, GROUPS: tl.constexpr, BITS: tl.constexpr):
    """Keys in (lo, hi] bracket the row's k-th largest key (w.h.p.): two quantiles of GROUPS x 8 sampled
    keys, 4 sigma of the sample rank either side of K's, widened to whole ``BITS``-bit prefix bins."""
    gi = tl.arange(0, GROUPS)
    pos = (gi[:, None].to(tl.int64) * length) // GROUPS + tl.arange(0, 8)[None, :]
    pos = tl.minimum(pos, length - 1)
    sk = tl.reshape(_sort_key(tl.load(base + pos * stride_xn)), [GROUPS * 8])
    q = (K * 1.0) / length.to(tl.float32)
    r = q * (GROUPS * 8)
    m = 4.0 * tl.sqrt(r * (1.0 - q)) + 4.0  # 4 sigma of the sample rank, plus slack
    j_hi = tl.floor(r - m).to(tl.int32)
    j_lo = tl.ceil(r + m).to(tl.int32)
    h, lo = _kth_largest2(sk, j_hi, j_lo, BITS)
    low_bits = (tl.full([], 0xFFFFFFFF, tl.uint32) >> (BITS - 1)) >> 1  # the bits below the prefix
    hi = tl.where(j_hi >= 1, h | low_bits, tl.full([], 0xFFFFFFFF, tl.uint32))
    lo = tl.where((j_lo <= GROUPS * 8) & (lo > 0), lo - 1, tl.zeros([], dtype=tl.uint32))  # keys > lo-1: >= lo
    return hi, lo


@triton.jit
def _common_prefix(a, b):
    """(t, n): the n leading bits a and b share, as t (lower bits zero)."""
    t = tl.zeros([], dtype=tl.uint32)
    n = tl.zeros([], dtype=tl.int32)
    same = n == 0
    for i in range(32):
        bit = tl.full([], 0x80000000, tl.uint32) >> (tl.zeros([], dtype=tl.uint32) + i)
        same = same & (((a ^ b) & bit) == 0)
        t = tl.where(same, t | (a & bit), t)
        n = tl.where(same, i + 1, n)
    return t, n


@triton.jit
def _finish(
    base, stride_xn, length, K, out_row, gt_row, cd_row, cnt_row, n_gt, n_c, fits, hi, lo,
    BLOCK: tl.constexpr, SPLIT: tl.constexpr, CAPG: tl.constexpr, CAPC: tl.constexpr,
):  # fmt: skip
    """Write the row's K indices from the gathered keys: those above ``hi`` (in ``gt_row``, one slice of
    CAPG per part; with one part that is the output row itself), then the (K - n_gt) largest candidates
    in (lo, hi] (``cd_row``, (key << 32 | index) per slot, CAPC per part) with the lowest-index ties at the
    smallest. When the bracket missed or a part overflowed: the exact radix select."""
    if fits & (n_gt <= K) & (n_gt + n_c >= K):
        if SPLIT > 1:
            i = tl.arange(0, SPLIT * CAPG)
            got = (i % CAPG) < tl.load(cnt_row + 4 * (i // CAPG))
            pos = tl.cumsum(got.to(tl.int32), 0) - 1
            tl.store(out_row + pos, tl.load(gt_row + i, mask=got, other=0), mask=got)
        want = K - n_gt
        i = tl.arange(0, SPLIT * CAPC)
        if SPLIT > 1:  # noqa: SIM108 (a constexpr branch, as measured on the GPU)
            cm = (i % CAPC) < tl.load(cnt_row + 4 * (i // CAPC) + 1)
        else:
            cm = i < n_c
        ck = (tl.load(cd_row + i, mask=cm, other=0) >> 32).to(tl.uint32)
        t, first = _common_prefix(lo + 1, hi)  # every candidate lies in [lo + 1, hi]: skip the bits they share
        v = _kth_largest(ck, cm, want, t, first)
        above = cm & (ck > v)
        eq = cm & (ck == v)
        ties = want - tl.sum(above.to(tl.int32), axis=0)
        take = above | (eq & (tl.cumsum(eq.to(tl.int32), 0) <= ties))
        pos_t = n_gt + tl.cumsum(take.to(tl.int32), 0) - 1
        idx = tl.load(cd_row + i, mask=take, other=0) & 0xFFFFFFFF  # loaded again: fewer live registers
        tl.store(out_row + pos_t, idx.to(tl.int32), mask=take)
    else:  # the bracket missed (adversarial or heavily tied data): exact radix select, rewrites all K
        _radix_select(base, stride_xn, length, K, out_row, BLOCK)


@triton.jit
def _row_range(starts_ptr, ends_ptr, row, cols):
    start = tl.minimum(tl.maximum(tl.load(starts_ptr + row), 0), cols)  # clamped: never read outside the row
    length = tl.maximum(tl.minimum(tl.load(ends_ptr + row), cols) - start, 0)
    return start, length


@triton.jit
def _topk_bracket_kernel(x_ptr, starts_ptr, ends_ptr, br_ptr, cols, stride_xm, stride_xn, K,
                         GROUPS: tl.constexpr, BITS: tl.constexpr, CAPC: tl.constexpr):  # fmt: skip
    row = tl.program_id(0)
    start, length = _row_range(starts_ptr, ends_ptr, row, cols)
    if (length > K) & (length > CAPC):
        base = x_ptr + row.to(tl.int64) * stride_xm + start.to(tl.int64) * stride_xn
        hi, lo = _bracket(base, stride_xn, length, K, GROUPS, BITS)
        tl.store(br_ptr + 2 * row, hi.to(tl.int32, bitcast=True))
        tl.store(br_ptr + 2 * row + 1, lo.to(tl.int32, bitcast=True))


@triton.jit
def _topk_gather_kernel(
    x_ptr, starts_ptr, ends_ptr, out_ptr, gt_ptr, cd_ptr, cnt_ptr, br_ptr, cols, stride_xm, stride_xn,
    stride_om, stride_gm, K,
    BLOCK: tl.constexpr, GROUPS: tl.constexpr, BITS: tl.constexpr, SPLIT: tl.constexpr, CAPG: tl.constexpr,
    CAPC: tl.constexpr, FUSED: tl.constexpr, PRE: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    part = tl.program_id(1)
    start, length = _row_range(starts_ptr, ends_ptr, row, cols)
    out_row = out_ptr + row.to(tl.int64) * stride_om
    base = x_ptr + row.to(tl.int64) * stride_xm + start.to(tl.int64) * stride_xn
    ar = tl.arange(0, BLOCK)
    if length <= K:
        if part == 0:
            for c0 in range(0, K, BLOCK):
                idx = c0 + ar
                tl.store(out_row + idx, tl.where(idx < length, idx, -1), mask=idx < K)
    else:
        # 1. The bracket (the same in every part: the whole row's sample). Rows short enough: all candidates.
        hi = tl.full([], 0xFFFFFFFF, tl.uint32)
        lo = tl.zeros([], dtype=tl.uint32)
        if length > CAPC:
            if PRE:  # found once per row by _topk_bracket_kernel
                hi = tl.load(br_ptr + 2 * row).to(tl.uint32, bitcast=True)
                lo = tl.load(br_ptr + 2 * row + 1).to(tl.uint32, bitcast=True)
            else:
                hi, lo = _bracket(base, stride_xn, length, K, GROUPS, BITS)
        # 2. One pass over this part's columns: keys above hi to gt_row, candidates to cd_row.
        rec = row.to(tl.int64) * SPLIT + part
        gt_row = gt_ptr + row.to(tl.int64) * stride_gm + part * CAPG
        cd_row = cd_ptr + rec * CAPC
        span = tl.cdiv(tl.cdiv(length, SPLIT), BLOCK) * BLOCK
        c_end = tl.minimum(part * span + span, length)
        gt_cap = K  # one part: gt_row is the output row
        if SPLIT > 1:
            gt_cap = CAPG
        n_gt = 0
        n_c = 0
        for c0 in range(part * span, c_end, BLOCK):
            offs = c0 + ar
            valid = offs < c_end
            key = _sort_key(tl.load(base + offs * stride_xn, mask=valid, other=0.0))
            gt = valid & (key > hi)
            cd = valid & (key > lo) & (key <= hi)
            packed = gt.to(tl.int32) + (cd.to(tl.int32) << 16)  # both counts in one scan (BLOCK < 2**16)
            cs = tl.cumsum(packed, 0)
            pg = n_gt + (cs & 0xFFFF) - 1
            pc = n_c + (cs >> 16) - 1
            tl.store(gt_row + pg, offs, mask=gt & (pg < gt_cap))
            slot = (key.to(tl.uint64) << 32) | offs.to(tl.uint64)
            tl.store(cd_row + pc, slot.to(tl.int64, bitcast=True), mask=cd & (pc < CAPC))
            tot = tl.sum(packed, axis=0)
            n_gt += tot & 0xFFFF
            n_c += tot >> 16
        if FUSED:
            tl.debug_barrier()  # the candidates stored by every thread are read back by every thread
            _finish(
                base, stride_xn, length, K, out_row, gt_row, cd_row, cnt_ptr, n_gt, n_c, n_c <= CAPC, hi, lo,
                BLOCK, SPLIT, CAPG, CAPC,
            )  # fmt: skip
        else:
            cnt = cnt_ptr + rec * 4
            tl.store(cnt, n_gt)
            tl.store(cnt + 1, n_c)
            tl.store(cnt + 2, hi.to(tl.int32, bitcast=True))
            tl.store(cnt + 3, lo.to(tl.int32, bitcast=True))


@triton.jit
def _topk_finish_kernel(
    x_ptr, starts_ptr, ends_ptr, out_ptr, gt_ptr, cd_ptr, cnt_ptr, cols, stride_xm, stride_xn, stride_om,
    stride_gm, K,
    BLOCK: tl.constexpr, SPLIT: tl.constexpr, CAPG: tl.constexpr, CAPC: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    start, length = _row_range(starts_ptr, ends_ptr, row, cols)
    if length > K:
        cnt_row = cnt_ptr + row.to(tl.int64) * (SPLIT * 4)
        s4 = tl.arange(0, SPLIT) * 4
        ng = tl.load(cnt_row + s4)
        nc = tl.load(cnt_row + s4 + 1)
        fits = tl.max(nc, axis=0) <= CAPC
        if SPLIT > 1:  # one part: its keys above hi went to the output row, n_gt <= K is checked in _finish
            fits = fits & (tl.max(ng, axis=0) <= CAPG)
        _finish(
            x_ptr + row.to(tl.int64) * stride_xm + start.to(tl.int64) * stride_xn, stride_xn, length, K,
            out_ptr + row.to(tl.int64) * stride_om, gt_ptr + row.to(tl.int64) * stride_gm,
            cd_ptr + row.to(tl.int64) * (SPLIT * CAPC), cnt_row, tl.sum(ng, axis=0), tl.sum(nc, axis=0), fits,
            tl.load(cnt_row + 2).to(tl.uint32, bitcast=True), tl.load(cnt_row + 3).to(tl.uint32, bitcast=True),
            BLOCK, SPLIT, CAPG, CAPC,
        )  # fmt: skip


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
MAX_CAP = 8192  # candidate slots per row (all parts); above it the radix kernel runs instead
MAX_SPLIT = 16


def candidate_cap(cols: int, k: int, groups: int = SAMPLE_GROUPS, *, split: int = 1) -> int:
    """Power-of-two candidate capacity of one part (of ``split``) of a row for the sample-bracket kernel:
    1.5x the expected number of keys between the two sample quantiles (4 sigma of the sample rank each
    side, plus slack) at the smallest selected fraction k / cols, at least 512 / split. Rows no longer
    than this skip the sample (all candidates)."""
    s = 8 * groups
    q = min(1.0, k / max(cols, 1))
    margin = 4.0 * math.sqrt(s * q * (1.0 - q)) + 6.0
    expected = cols * (2.0 * margin + 2.0) / s / split
    return max(512 // split, triton.next_power_of_2(int(1.5 * expected) + 64))


def split_parts(rows: int, cols: int, programs: int, block: int) -> int:
    """Parts per row (a power of two <= 16, each at least one BLOCK of columns) so that rows x parts
    reaches ``programs``; 1 when ``programs`` is 0."""
    if programs <= 0 or rows == 0:
        return 1
    want = min(triton.next_power_of_2(triton.cdiv(programs, rows)), MAX_SPLIT)
    fit = max(1, triton.cdiv(cols, block))
    return max(1, min(want, 1 << (fit.bit_length() - 1)))


def topk_config(rows: int, cols: int, k: int, *, device: torch.device | None = None) -> dict:
    """Kernel, tile size, warps and parts per row (tuned on an H200; small under the interpreter).

    ``IMPL="cuda"`` (on a CUDA device when ``topk_cuda.cu`` builds there): the CUDA radix select, faster
    than the Triton kernels at every benchmark shape on the H200 (1.5-2.4x); otherwise the Triton kernels.
    ``SAMPLE`` (default) is the sample-bracket kernel; ``SAMPLE=False`` the four-pass radix kernel.
    ``PROGRAMS``: split rows into parts until rows x parts reaches it (0: one program per row);
    ``FUSED``: with one part, the selection runs in the same program as the pass; ``PRE`` (warps, 0: off):
    the bracket is found once per row by a launch of its own, not in every part.
    """
    from .common import interpreting, tuned

    if interpreting():
        return {"SAMPLE": True, "BLOCK": 64, "num_warps": 4, "SPLIT": 2}
    if device is not None and device.type == "cuda":
        from .topk_cuda import build_error

        if build_error() is None:
            return {"IMPL": "cuda"}
    many = rows >= 1024  # enough rows to fill the SMs: small programs, many resident per SM
    found = tuned("topk", "many" if many else "few")
    if found:
        return found
    if many:
        return {"SAMPLE": True, "BLOCK": 1024, "num_warps": 4}
    return {"SAMPLE": True, "BLOCK": 1024, "num_warps": 4, "PROGRAMS": 1024}


def backend(device: torch.device) -> str:
    """Which kernel :func:`topk_per_row` runs by default on ``device``: ``CUDA radix select (topk_cuda.cu)``, or
    ``Triton`` with the reason the CUDA kernel is not used on a CUDA device (``Triton interpreter`` on the CPU)."""
    from .common import interpreting

    if interpreting():
        return "Triton interpreter"
    if device.type != "cuda":
        return "Triton"
    from .topk_cuda import build_error

    why = build_error()
    return "CUDA radix select (topk_cuda.cu)" if why is None else f"Triton; CUDA top-k unavailable: {why}"


def topk_per_row(
    logits: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, k: int, *, config: dict | None = None
) -> torch.Tensor:
    """Top-k per row; same contract as :func:`topk_per_row_ref`. Deterministic.

    On a CUDA device where ``topk_cuda.cu`` builds, the default is that CUDA radix select (see its header);
    ``{"IMPL": "cuda", "FLOAT": False}`` makes its pass compare keys, never floats (same output, for checks);
    ``config={"IMPL": "triton"}`` or no CUDA toolkit: the Triton kernels below.

    Default Triton (sample-bracket) kernel: 2048 keys sampled from the row bracket the k-th largest key between
    two sample quantiles (widened to 16-bit key prefixes). Each row is cut into parts (one program each;
    one part when rows fill the GPU); one pass over a part writes every key above the upper quantile and
    gathers the keys between them (a few % of the row, as key << 32 | index) into a per-part buffer. The
    selection (in the same program with one part, else a second launch per row) copies the keys above,
    then finds the (K - above)-th largest candidate by a bitwise bisection over the bits the bracket
    leaves open and writes the candidates above it and its lowest-index ties. When the bracket misses
    (heavily tied or adversarial rows) or a part overflows, the row falls back to the exact radix select
    (four 8-bit histogram passes and a write pass), so the result never depends on the sample. Order
    within a row: unspecified, the same on every call. Ranges are clamped to [0, cols] in the kernel
    (no host sync).

    Raises:
        ValueError: starts/ends are not [rows].
    """
    rows, cols = logits.shape
    if starts.shape != (rows,) or ends.shape != (rows,):
        raise ValueError("starts and ends must be [rows]")
    cfg = dict(config or topk_config(rows, cols, k, device=logits.device))
    impl = cfg.pop("IMPL", "triton")
    if impl == "cuda":  # the radix-select CUDA kernel (topk_cuda.cu)
        from .topk_cuda import topk_per_row_cuda

        return topk_per_row_cuda(logits, starts, ends, k, float_pass=cfg.pop("FLOAT", True))
    cfg = cfg or topk_config(rows, cols, k)  # {"IMPL": "triton"}: the Triton kernels' own tuned config
    out = torch.empty((rows, k), dtype=torch.int32, device=logits.device)
    if rows == 0:
        return out
    sample = cfg.pop("SAMPLE", True)
    forced = cfg.pop("CAP", None)  # forced capacity per part (tests: exercise the sample and its fallback)
    groups = cfg.pop("GROUPS", SAMPLE_GROUPS)
    bits = cfg.pop("BITS", 16)
    fused = cfg.pop("FUSED", True)
    programs = cfg.pop("PROGRAMS", 0)
    pre = cfg.pop("PRE", 0)  # > 0: the bracket in its own launch first, with this many warps per row
    split = cfg.pop("SPLIT", None) or split_parts(rows, cols, programs, cfg["BLOCK"])
    cap = forced or candidate_cap(cols, k, groups, split=split)
    while split > 1 and cap * split > MAX_CAP:  # the selection holds every part's candidates at once
        split //= 2
        cap = forced or candidate_cap(cols, k, groups, split=split)
    common = (starts.int().contiguous(), ends.int().contiguous(), out)
    if not (sample and cap * split <= MAX_CAP and cfg["BLOCK"] < 2**16):
        _topk_kernel[(rows,)](logits, *common, cols, logits.stride(0), logits.stride(1), out.stride(0), k, **cfg)
        return out
    fused = fused and split == 1
    capg = triton.next_power_of_2(int(1.5 * k / split) + 64) if split > 1 else 1
    cd = torch.empty((rows, split, cap), dtype=torch.int64, device=logits.device)
    gt = torch.empty((rows, split, capg), dtype=torch.int32, device=logits.device) if split > 1 else out
    cnt = out if fused else torch.empty((rows, split, 4), dtype=torch.int32, device=logits.device)
    strides = (cols, logits.stride(0), logits.stride(1), out.stride(0), gt.stride(0), k)
    br = out  # unused unless PRE
    if pre:
        br = torch.empty((rows, 2), dtype=torch.int32, device=logits.device)
        _topk_bracket_kernel[(rows,)](
            logits, *common[:2], br, cols, logits.stride(0), logits.stride(1), k, GROUPS=groups, BITS=bits,
            CAPC=cap, num_warps=pre,
        )  # fmt: skip
    _topk_gather_kernel[(rows, split)](
        logits, *common, gt, cd, cnt, br, *strides, GROUPS=groups, BITS=bits, SPLIT=split, CAPG=capg, CAPC=cap,
        FUSED=fused, PRE=bool(pre), **cfg,
    )  # fmt: skip
    if not fused:
        _topk_finish_kernel[(rows,)](logits, *common, gt, cd, cnt, *strides, SPLIT=split, CAPG=capg, CAPC=cap, **cfg)
    return out


def topk_cost(starts: torch.Tensor, ends: torch.Tensor, k: int) -> Cost:
    """Bytes by the spec page (§3): one read of each row's range plus the index write; no tensor work."""
    total = int((ends.long() - starts.long()).clamp(min=0).sum())
    return Cost(bytes=float(4 * total + 4 * starts.shape[0] * k), flops=0.0, peak=None)
