"""Lightning-indexer MQA logits, prefill (ragged ``[ks_i, ke_i)`` key ranges).

Contract (DeepGEMM ``fp8_mqa_logits`` / ``fp8_fp4_mqa_logits``, SM90 path; DeepSeek V3.2/V4 Indexer):
for every query i and key j in ``[ks_i, ke_i)``::

    logits[i, j] = k_sf[j] * Σ_h w[i, h] * relu(Σ_d q[i, h, d] * k[j, d])

With ``clean=True`` every entry outside the range is -inf; with ``clean=False`` those entries are
unspecified. Inputs are FP8 e4m3 (the DeepGEMM path) or bf16; logits are fp32 or bf16.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import FP8, Cost, interpreting, tma_descriptor, tuned


def check_prefill_inputs(q, k, k_sf, weights, ks, ke, *, ranges: bool = True) -> None:
    """Host-side preconditions. The range part (``ranges``) reads ks/ke on the host (a device sync), so
    the kernel skips it: it masks every load and store instead, and never reads outside q, k or the output.

    Raises:
        ValueError: on a shape, dtype or (with ``ranges``) range violation.
    """
    m, h, d = q.shape
    n = k.shape[0]
    if k.shape != (n, d) or k_sf.shape != (n,) or weights.shape != (m, h):
        raise ValueError(
            f"shape mismatch: q {tuple(q.shape)}, k {tuple(k.shape)}, k_sf {tuple(k_sf.shape)}, "
            f"weights {tuple(weights.shape)}"
        )
    if q.dtype != k.dtype or q.dtype not in (FP8, torch.bfloat16):
        raise ValueError(f"q/k must both be float8_e4m3fn or bfloat16, got {q.dtype}/{k.dtype}")
    if ks.shape != (m,) or ke.shape != (m,) or ks.dtype != torch.int32 or ke.dtype != torch.int32:
        raise ValueError("ks and ke must be int32 [M]")
    if ranges and m and (bool((ks < 0).any()) or bool((ke > n).any()) or bool((ke < 0).any())):
        raise ValueError(f"ks/ke out of [0, N={n}]: negative bounds or ke > N are precondition violations")


def mqa_logits_ref(
    q, k, k_sf, weights, ks, ke, *, clean: bool = True, out_dtype=torch.float32, chunk_elems: int = 1 << 27
) -> torch.Tensor:
    """Exact plain-torch reference in fp32 (inputs dequantised first: DeepGEMM's "simulated" reference).

    Args:
        q: [M, H, D] e4m3 or bf16. k: [N, D] same dtype. k_sf: [N] fp32 (> 0). weights: [M, H] fp32.
        ks, ke: [M] int32, 0 <= ks, ke <= N. clean: accepted for signature parity; the reference is always
            clean (-inf outside [ks, ke)), the specification the checks compare against. out_dtype: fp32 or bf16.
        chunk_elems: bound on the [m, H, n] fp32 intermediate, so large shapes fit.
    Returns:
        [M, N] logits of ``out_dtype``.
    """
    check_prefill_inputs(q, k, k_sf, weights, ks, ke)
    m, h, d = q.shape
    n = k.shape[0]
    out = torch.full((m, n), float("-inf"), dtype=torch.float32, device=q.device)
    if m == 0 or n == 0:
        return out.to(out_dtype)
    kf = k.float() * k_sf.float()[:, None]
    w = weights.float()
    cn = min(n, 8192)
    cm = max(1, min(m, chunk_elems // (h * cn)))
    for m0 in range(0, m, cm):
        qm = q[m0 : m0 + cm].float().reshape(-1, d)
        for n0 in range(0, n, cn):
            s = (qm @ kf[n0 : n0 + cn].T).view(-1, h, min(cn, n - n0))
            s.relu_().mul_(w[m0 : m0 + cm, :, None])
            out[m0 : m0 + cm, n0 : n0 + cn] = s.sum(1)
    j = torch.arange(n, device=q.device)
    mask = (j[None, :] >= ks[:, None]) & (j[None, :] < ke[:, None])
    out.masked_fill_(~mask, float("-inf"))
    return out.to(out_dtype)


@triton.jit
def _mqa_logits_kernel(
    q_ptr,
    k_ptr,
    sf_ptr,
    w_ptr,
    ks_ptr,
    ke_ptr,
    out_ptr,
    M,
    N,
    num_n,
    stride_qm,
    stride_qh,
    stride_kn,
    stride_wm,
    stride_om,
    q_desc,
    H: tl.constexpr,
    D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CLEAN: tl.constexpr,
    UPCAST: tl.constexpr,
    LOAD: tl.constexpr = "ptr",
    STAGES: tl.constexpr = 0,
):
    pid = tl.program_id(0)
    pid_m = pid // num_n
    pid_n = pid % num_n  # key blocks vary fastest: concurrent programs share the Q tile in L2
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    m_ok = offs_m < M
    n_ok = offs_n < N
    ks = tl.load(ks_ptr + offs_m, mask=m_ok, other=N)
    ke = tl.load(ke_ptr + offs_m, mask=m_ok, other=0)
    lo = tl.min(ks, axis=0)
    hi = tl.max(ke, axis=0)
    n0 = pid_n * BLOCK_N
    if (n0 < hi) & (n0 + BLOCK_N > lo):
        kb = tl.load(k_ptr + offs_n[:, None].to(tl.int64) * stride_kn + offs_d[None, :], mask=n_ok[:, None], other=0.0)
        kt = tl.trans(kb)
        if UPCAST:  # the interpreter mis-multiplies bf16 dots (Triton 3.9); bf16 products are exact in fp32
            kt = kt.to(tl.float32)
        q_ptrs = q_ptr + offs_m[:, None].to(tl.int64) * stride_qm + offs_d[None, :]
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for h in tl.range(H, num_stages=STAGES if STAGES > 0 else None):
            if LOAD == "tma":  # head h's [BLOCK_M, D] tile by TMA: no pointer tensor lives across the loop
                qh = q_desc.load([pid_m * BLOCK_M, h * D])
            else:
                qh = tl.load(q_ptrs + h * stride_qh, mask=m_ok[:, None], other=0.0)
            wh = tl.load(w_ptr + offs_m * stride_wm + h, mask=m_ok, other=0.0)
            s = tl.dot(qh.to(tl.float32), kt, input_precision="ieee") if UPCAST else tl.dot(qh, kt)
            acc += tl.maximum(s, 0.0) * wh[:, None]
        # The output's pointers and masks are formed here, after the head loop: live across it they
        # would hold ~200 registers per thread (64-bit pointers for a [BLOCK_M, BLOCK_N] tile) and spill.
        sf = tl.load(sf_ptr + offs_n, mask=n_ok, other=0.0)
        res = acc * sf[None, :]
        if CLEAN:
            in_range = (offs_n[None, :] >= ks[:, None]) & (offs_n[None, :] < ke[:, None])
            res = tl.where(in_range, res, float("-inf"))
        out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :]
        tl.store(out_ptrs, res.to(out_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])
    elif CLEAN:
        ninf = tl.full([BLOCK_M, BLOCK_N], float("-inf"), dtype=tl.float32)
        out_ptrs = out_ptr + offs_m[:, None].to(tl.int64) * stride_om + offs_n[None, :]
        tl.store(out_ptrs, ninf.to(out_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def prefill_config(m: int, n: int, dtype: torch.dtype) -> dict:
    """Tile configuration for the prefill kernel (tuned on an H200; small tiles under the interpreter)."""
    if interpreting():
        return {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}
    return tuned("prefill", prefill_key(dtype)) or {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 4}


def prefill_key(dtype: torch.dtype) -> str:
    """Tuned-config bucket: the input dtype."""
    return "fp8" if dtype == FP8 else "bf16"


def mqa_logits(
    q, k, k_sf, weights, ks, ke, *, clean: bool = True, out_dtype=torch.float32, config: dict | None = None
) -> torch.Tensor:
    """Triton kernel for the prefill indexer logits; same contract and shapes as :func:`mqa_logits_ref`.

    One program per (BLOCK_M queries x BLOCK_N keys) tile loops over the H heads: an FP8 (or bf16) tensor-core
    dot per head with fp32 accumulation, ReLU and the per-head weight fused, the key scale after the head sum.
    Tiles outside the union of the tile's ranges skip the math (and write -inf when clean).
    """
    check_prefill_inputs(q, k, k_sf, weights, ks, ke, ranges=False)
    m, h, d = q.shape
    n = k.shape[0]
    out = torch.empty((m, n), dtype=out_dtype, device=q.device)
    if m == 0 or n == 0:
        return out
    q, k = q.contiguous(), k.contiguous()
    weights, k_sf = weights.float().contiguous(), k_sf.float().contiguous()
    cfg = dict(config or prefill_config(m, n, q.dtype))
    bm, bn = cfg.pop("BLOCK_M"), cfg.pop("BLOCK_N")
    if cfg.get("LOAD", "ptr") not in ("ptr", "tma"):
        raise ValueError(f"config LOAD must be 'ptr' or 'tma', got {cfg['LOAD']!r}")
    q_desc = _query_descriptor(q, bm) if cfg.get("LOAD") == "tma" else None
    if cfg.get("LOAD") == "tma" and q_desc is None:
        cfg.update(LOAD="ptr", STAGES=0)
    num_n = triton.cdiv(n, bn)
    grid = (triton.cdiv(m, bm) * num_n,)
    _mqa_logits_kernel[grid](
        q,
        k,
        k_sf,
        weights,
        ks,
        ke,
        out,
        m,
        n,
        num_n,
        q.stride(0),
        q.stride(1),
        k.stride(0),
        weights.stride(0),
        out.stride(0),
        q_desc if q_desc is not None else q,
        H=h,
        D=d,
        BLOCK_M=bm,
        BLOCK_N=bn,
        CLEAN=clean,
        UPCAST=interpreting() and q.dtype == torch.bfloat16,
        **cfg,
    )
    return out


def _query_descriptor(q: torch.Tensor, block_m: int):
    """A TMA descriptor over contiguous ``q`` [M, H, D] seen as [M, H*D], loaded one [BLOCK_M, D] head tile at a
    time (rows past M read as zero); None where TMA cannot address it (a row or base not 16-byte aligned)."""
    m, h, d = q.shape
    return tma_descriptor(q.view(m, h * d), [block_m, d])


def prefill_cost(
    m: int, n: int, h: int, d: int, ks: torch.Tensor, ke: torch.Tensor, *, fp8: bool, clean: bool, out_bytes: int = 4
) -> Cost:
    """Bytes and FLOPs of one call, by the spec page's formulas (§1 Cost)."""
    nnz = int((ke.clamp(max=n).long() - ks.clamp(min=0).long()).clamp(min=0).sum())
    in_bytes = 1 if fp8 else 2
    nbytes = m * h * d * in_bytes + n * (d * in_bytes + 4) + 4 * m * h + 8 * m + nnz * out_bytes
    if clean:
        nbytes += (m * n - nnz) * out_bytes
    return Cost(bytes=float(nbytes), flops=2.0 * nnz * h * d, peak="fp8" if fp8 else "bf16")
