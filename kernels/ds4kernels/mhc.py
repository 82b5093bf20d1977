"""mHC (manifold-constrained hyper-connections) pre/post ops of DeepSeek V4 (arXiv 2512.24880).

Contract (DeepSeek-V4 ``inference/model.py`` Block.hc_pre / hc_post; vLLM ``kernels/mhc/torch.py``), n = hc_mult::

    x    = X.flatten(1).float()                                   # X [T, n, d] bf16
    mix  = (x @ fn.T) * rsqrt(mean(x²) + rms_eps)                 # fn [(2+n)n, n·d] fp32; RMS over all n·d
    pre  = sigmoid(mix[:, :n]·scale[0] + base[:n]) + hc_eps       # [T, n]
    post = 2·sigmoid(mix[:, n:2n]·scale[1] + base[n:2n])          # [T, n]
    C    = softmax((mix[:, 2n:]·scale[2] + base[2n:]).view(T,n,n), -1) + eps;  C /= C.sum(-2) + eps
    iters-1 times: C /= C.sum(-1) + eps;  C /= C.sum(-2) + eps    # rows, then columns (Sinkhorn)
    y    = Σ_i pre[:, i] · X[:, i]                                # [T, d] bf16
    post op: out[:, j] = post[:, j]·x + Σ_i C[:, i, j]·residual[:, i]     # [T, n, d] bf16

Both kernels pass the grid on an H200 and beat the torch reference at every shape of it (hc_pre: a split-K
mixing stage, then a finish stage), so they are part of the default kernel tier.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import Cost, interpreting, tma_descriptor


def mhc_pre_ref(x, fn, scale, base, iters: int = 20, hc_eps: float = 1e-6, rms_eps: float = 1e-6):
    """Torch reference. x [T, n, d] bf16; fn [(2+n)n, n·d] fp32; scale [3]; base [(2+n)n].
    Returns (y [T, d] bf16, post [T, n] fp32, comb [T, n, n] fp32)."""
    t, n, d = x.shape
    xf = x.reshape(t, n * d).float()
    mix = (xf @ fn.float().T) * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + rms_eps)
    pre = torch.sigmoid(mix[:, :n] * scale[0] + base[:n]) + hc_eps
    post = 2 * torch.sigmoid(mix[:, n : 2 * n] * scale[1] + base[n : 2 * n])
    comb = (mix[:, 2 * n :] * scale[2] + base[2 * n :]).view(t, n, n).softmax(-1) + hc_eps
    comb = comb / (comb.sum(-2, keepdim=True) + hc_eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + hc_eps)
        comb = comb / (comb.sum(-2, keepdim=True) + hc_eps)
    y = (pre[:, :, None] * x.float()).sum(1)
    return y.to(x.dtype), post, comb


def mhc_post_ref(x, residual, post, comb):
    """Torch reference. x [T, d] bf16, residual [T, n, d] bf16, post [T, n], comb [T, n, n] -> [T, n, d] bf16."""
    out = post[:, :, None].float() * x.float()[:, None, :] + torch.einsum(
        "tij,tid->tjd", comb.float(), residual.float()
    )
    return out.to(residual.dtype)


@triton.jit
def _mix_dot(acc, xr, fk, PRECISION: tl.constexpr, INTERPRET: tl.constexpr):
    """acc [BT, MIXP] fp32 += xr [BT, BK] (bf16 or fp32, as loaded) @ fk [MIXP, BK] fp32 ᵀ, at ``PRECISION``."""
    xk = xr.to(tl.float32)
    if PRECISION == "bf16x3":  # x is bf16: it feeds the tensor cores as loaded; fn = three bf16 parts
        f1 = fk.to(tl.bfloat16)
        r1 = fk - f1.to(tl.float32)
        f2 = r1.to(tl.bfloat16)
        f3 = (r1 - f2.to(tl.float32)).to(tl.bfloat16)
        if INTERPRET:  # the interpreter's bf16 dot is unreliable: the same parts, as exact fp32 dots
            acc += tl.dot(xk, tl.trans(f1.to(tl.float32)), input_precision="ieee")
            acc += tl.dot(xk, tl.trans(f2.to(tl.float32)), input_precision="ieee")
            acc += tl.dot(xk, tl.trans(f3.to(tl.float32)), input_precision="ieee")
        else:
            acc += tl.dot(xr, tl.trans(f1))
            acc += tl.dot(xr, tl.trans(f2))
            acc += tl.dot(xr, tl.trans(f3))
    elif PRECISION == "tf32x2":  # x is bf16, exact in tf32: only fn needs a high and a low tf32 part
        f_hi = (fk.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)
        acc += tl.dot(xk, tl.trans(f_hi), input_precision="tf32")
        acc += tl.dot(xk, tl.trans(fk - f_hi), input_precision="tf32")
    else:
        acc += tl.dot(xk, tl.trans(fk), input_precision=PRECISION)
    return acc


@triton.jit
def _sum_partials(mix_ptr, sq_ptr, offs_t, t_ok, T, SPLITS, MIXP: tl.constexpr):
    """The SPLITS partial mixes [BT, MIXP] and Σx² [BT] of ``offs_t``, summed in split order (deterministic)."""
    offs_m = tl.arange(0, MIXP)
    acc = tl.zeros([offs_t.shape[0], MIXP], dtype=tl.float32)
    sq = tl.zeros([offs_t.shape[0]], dtype=tl.float32)
    for s in range(0, SPLITS):
        row = (s * T + offs_t).to(tl.int64)
        acc += tl.load(mix_ptr + row[:, None] * MIXP + offs_m[None, :], mask=t_ok[:, None], other=0.0)
        sq += tl.load(sq_ptr + row, mask=t_ok, other=0.0)
    return acc, sq


@triton.jit
def _gates_and_maps(
    acc, sq, offs_t, t_ok, scale_ptr, base_ptr, post_ptr, c_ptr, K, iters, hc_eps, rms_eps, store,
    N: tl.constexpr, GROUPS: tl.constexpr,
):  # fmt: skip
    """From the mix acc [BT, GROUPS·N] (x @ fnᵀ) and Σx² [BT]: the RMS factor, the gates and Sinkhorn.
    Stores post [T, N] and C [T, N, N] when ``store``; returns pre [BT, N] fp32."""
    bt: tl.constexpr = acc.shape[0]
    offs_m = tl.arange(0, GROUPS * N)
    m_ok = offs_m < (2 + N) * N
    mix = acc * tl.rsqrt(sq / K + rms_eps)[:, None]
    grp = offs_m // N  # 0: pre, 1: post, 2..N+1: rows of C
    sc = tl.load(scale_ptr + tl.minimum(grp, 2))
    z = mix * sc[None, :] + tl.load(base_ptr + offs_m, mask=m_ok, other=0.0)[None, :]
    sig = 1.0 / (1.0 + tl.exp(-z))
    if store:
        col = offs_m % N
        prow = offs_t[:, None] * N + col[None, :]
        tl.store(post_ptr + prow, 2.0 * sig, mask=t_ok[:, None] & (grp == 1)[None, :])
        # Sinkhorn on [BT, GROUPS, N]: groups 2..N+1 hold C's rows, the others are zeroed out.
        g3 = tl.reshape(grp[None, :] + tl.zeros([bt, GROUPS * N], dtype=tl.int32), [bt, GROUPS, N])
        is_c = (g3 >= 2) & (g3 < 2 + N)
        z3 = tl.where(is_c, tl.reshape(z, [bt, GROUPS, N]), 0.0)
        e3 = tl.exp(z3 - tl.max(z3, axis=2)[:, :, None])
        c3 = tl.where(is_c, e3 / tl.sum(e3, axis=2)[:, :, None] + hc_eps, 0.0)
        c3 = c3 / (tl.sum(c3, axis=1)[:, None, :] + hc_eps)
        for _ in range(iters - 1):
            c3 = c3 / (tl.sum(c3, axis=2)[:, :, None] + hc_eps)
            c3 = c3 / (tl.sum(c3, axis=1)[:, None, :] + hc_eps)
        c_flat = tl.reshape(c3, [bt, GROUPS * N])
        tl.store(
            c_ptr + offs_t[:, None] * (N * N) + (offs_m - 2 * N)[None, :],
            c_flat,
            mask=t_ok[:, None] & ((grp >= 2) & m_ok)[None, :],
        )
    pre2 = tl.reshape(tl.where((grp == 0)[None, :], sig + hc_eps, 0.0), [bt, GROUPS, N])
    return tl.sum(pre2, axis=1)


@triton.jit
def _weighted_sum(x_ptr, y_ptr, pre, offs_t, t_ok, K, D, d_lo, d_hi, N: tl.constexpr, BLOCK_D: tl.constexpr):
    """y[offs_t, d_lo:d_hi] = Σ_i pre[:, i] · X[offs_t, i, d_lo:d_hi], in BLOCK_D columns at a time."""
    offs_n = tl.arange(0, N)
    for d0 in range(d_lo, d_hi, BLOCK_D):
        offs_d = d0 + tl.arange(0, BLOCK_D)
        d_ok = offs_d < d_hi
        ptr = x_ptr + offs_t[:, None, None].to(tl.int64) * K + offs_n[None, :, None] * D + offs_d[None, None, :]
        xs = tl.load(ptr, mask=t_ok[:, None, None] & d_ok[None, None, :], other=0.0).to(tl.float32)
        y = tl.sum(xs * pre[:, :, None], axis=1)
        tl.store(
            y_ptr + offs_t[:, None].to(tl.int64) * D + offs_d[None, :],
            y.to(y_ptr.dtype.element_ty),
            mask=t_ok[:, None] & d_ok[None, :],
        )


@triton.jit
def _hc_pre_kernel(
    x_ptr,
    fn_ptr,
    scale_ptr,
    base_ptr,
    y_ptr,
    post_ptr,
    c_ptr,
    T,
    K,
    D,
    iters,
    hc_eps,
    rms_eps,
    N: tl.constexpr,
    GROUPS: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """The older single launch: one program per BLOCK_T tokens walks all of n·d, then y (a second read of X)."""
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = offs_t < T
    offs_m = tl.arange(0, GROUPS * N)
    m_ok = offs_m < (2 + N) * N
    acc = tl.zeros([BLOCK_T, GROUPS * N], dtype=tl.float32)
    sq = tl.zeros([BLOCK_T], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_ok = offs_k < K
        xk = tl.load(
            x_ptr + offs_t[:, None].to(tl.int64) * K + offs_k[None, :], mask=t_ok[:, None] & k_ok[None, :], other=0.0
        ).to(tl.float32)
        sq += tl.sum(xk * xk, axis=1)
        fk = tl.load(fn_ptr + offs_m[:, None] * K + offs_k[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        acc = _mix_dot(acc, xk, fk, PRECISION, False)
    pre = _gates_and_maps(
        acc, sq, offs_t, t_ok, scale_ptr, base_ptr, post_ptr, c_ptr, K, iters, hc_eps, rms_eps, True, N, GROUPS
    )
    _weighted_sum(x_ptr, y_ptr, pre, offs_t, t_ok, K, D, 0, D, N, BLOCK_D)


def mhc_pre(
    x, fn, scale, base, iters: int = 20, hc_eps: float = 1e-6, rms_eps: float = 1e-6, *, config: dict | None = None
):
    """Triton hc_pre: mixing GEMV (tensor-core dots) with the RMS factor, sigmoid gates, Sinkhorn on the [n, n]
    combination matrices and the pre-weighted sum. Same contract as :func:`mhc_pre_ref`.

    ``PRECISION``: "tf32x3" (default on a GPU), "tf32x2" (bf16 x is exact in tf32, so fn alone is split
    into a high and a low tf32 part: two tensor-core dots instead of three), "bf16x3" (x feeds bf16 dots as
    loaded, fn is split into three bf16 parts, 24 bits in all: three dots at twice the tf32 rate and half
    the operand bytes), or "ieee" (the interpreter). tf32x2 and bf16x3 need bf16 x (else tf32x3 runs).

    Two launches: a split-K mix stage (``SPLIT`` slices of n·d per token block; 0 = as many as fill the
    SMs) writing fp32 partials, then a finish stage over (token block, d-slice) that sums the partials
    in a fixed order (deterministic), applies the RMS factor, gates and Sinkhorn, and writes y.
    ``config["LOAD"] == "tma"`` loads the mix stage's x and fn tiles by TMA, in a loop pipelined ``STAGES``
    deep; where TMA cannot address x or fn (a base or row not 16-byte aligned) the pointer loads run.
    ``config={"FUSED": True, ...}`` runs the older single-launch kernel (one program per 16 tokens).

    Raises:
        ValueError: ``config["LOAD"]`` other than "ptr" or "tma".
    """
    t, n, d = x.shape
    y = torch.empty((t, d), dtype=x.dtype, device=x.device)
    post = torch.empty((t, n), dtype=torch.float32, device=x.device)
    comb = torch.empty((t, n, n), dtype=torch.float32, device=x.device)
    if t == 0:
        return y, post, comb
    cfg = dict(config or mhc_pre_config(t, n, d))
    precision = cfg.pop("PRECISION", "ieee" if interpreting() else "tf32x3")
    if precision in ("tf32x2", "bf16x3") and x.dtype != torch.bfloat16:  # both rely on x being bf16
        precision = "tf32x3"
    groups = triton.next_power_of_2(2 + n)
    x = x.contiguous()
    fn32, scale32, base32 = fn.float().contiguous(), scale.float().contiguous(), base.float().contiguous()
    if cfg.pop("FUSED", False):
        bt = cfg.pop("BLOCK_T")
        precision = precision if precision in ("ieee", "tf32", "tf32x3") else "tf32x3"
        _hc_pre_kernel[(triton.cdiv(t, bt),)](
            x, fn32, scale32, base32, y, post, comb, t, n * d, d, iters, hc_eps, rms_eps,
            N=n, GROUPS=groups, BLOCK_T=bt, PRECISION=precision, **cfg,
        )  # fmt: skip
        return y, post, comb
    k = n * d
    mixp = groups * n
    bt, bk, bt2, bd = cfg.pop("BLOCK_T"), cfg.pop("BLOCK_K"), cfg.pop("BT2"), cfg.pop("BLOCK_D")
    warps = cfg.pop("num_warps", 4)
    splits = cfg.pop("SPLIT", 0)
    if not splits:
        sms = 132 if interpreting() else torch.cuda.get_device_properties(x.device).multi_processor_count
        splits = _auto_splits(t, k, bt, bk, sms)
    k_split = triton.cdiv(triton.cdiv(k, splits), bk) * bk
    splits = triton.cdiv(k, k_split)
    mix = torch.empty((splits, t, mixp), dtype=torch.float32, device=x.device)
    sq = torch.empty((splits, t), dtype=torch.float32, device=x.device)
    grid, args, kwargs = mix_stage_launch(
        x.view(t, k), fn32, mix, sq, k_split=k_split, mix_rows=(2 + n) * n, block_t=bt, block_k=bk,
        precision=precision, warps=warps, load=cfg.pop("LOAD", "ptr"), extra=cfg,
    )  # fmt: skip
    _hc_mix_kernel[grid](*args, **kwargs)
    _hc_finish_kernel[(triton.cdiv(t, bt2), triton.cdiv(d, bd))](
        x, mix, sq, scale32, base32, y, post, comb, t, k, d, splits, iters, hc_eps, rms_eps,
        N=n, GROUPS=groups, BLOCK_T=bt2, BLOCK_D=bd, num_warps=warps,
    )  # fmt: skip
    return y, post, comb


@triton.jit
def _hc_mix_kernel(
    x_ptr,
    fn_ptr,
    mix_ptr,
    sq_ptr,
    T,
    K,
    K_SPLIT,
    x_desc,
    fn_desc,
    MIXP: tl.constexpr,
    MIX: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
    INTERPRET: tl.constexpr = False,
    LOAD: tl.constexpr = "ptr",
    STAGES: tl.constexpr = 0,
):
    """Split-K stage: program (i, s) writes x[tokens i] @ fn[:, K slice s].T and Σ x² of that slice.
    ``LOAD == "tma"``: both tiles by TMA (rows past T or MIX and columns past K read as zero), in a loop
    pipelined ``STAGES`` deep; else pointer loads."""
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    split = tl.program_id(1)
    t_ok = offs_t < T
    offs_m = tl.arange(0, MIXP)
    m_ok = offs_m < MIX
    acc = tl.zeros([BLOCK_T, MIXP], dtype=tl.float32)
    sq = tl.zeros([BLOCK_T], dtype=tl.float32)
    k_lo = split * K_SPLIT
    k_hi = tl.minimum(k_lo + K_SPLIT, K)
    for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=STAGES if STAGES > 0 else None):
        if LOAD == "tma":  # K_SPLIT is a multiple of BLOCK_K: a tile crosses no split, only K's end (zeros)
            xr = x_desc.load([tl.program_id(0) * BLOCK_T, k0])
            fk = fn_desc.load([0, k0])
        else:
            offs_k = k0 + tl.arange(0, BLOCK_K)
            k_ok = offs_k < k_hi
            xr = tl.load(
                x_ptr + offs_t[:, None].to(tl.int64) * K + offs_k[None, :],
                mask=t_ok[:, None] & k_ok[None, :],
                other=0.0,
            )
            fk = tl.load(fn_ptr + offs_m[:, None] * K + offs_k[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        xk = xr.to(tl.float32)
        sq += tl.sum(xk * xk, axis=1)
        acc = _mix_dot(acc, xr, fk, PRECISION, INTERPRET)
    row = split.to(tl.int64) * T + offs_t
    tl.store(mix_ptr + row[:, None] * MIXP + offs_m[None, :], acc, mask=t_ok[:, None])
    tl.store(sq_ptr + row, sq, mask=t_ok)


@triton.jit
def _hc_finish_kernel(
    x_ptr,
    mix_ptr,
    sq_ptr,
    scale_ptr,
    base_ptr,
    y_ptr,
    post_ptr,
    c_ptr,
    T,
    K,
    D,
    SPLITS,
    iters,
    hc_eps,
    rms_eps,
    N: tl.constexpr,
    GROUPS: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """Sum the split partials (fixed order), RMS factor, gates, Sinkhorn, then y for one d-slice.
    Every d-slice program recomputes the [N, N] maps of its tokens (cheap); slice 0 stores post and C."""
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    pid_d = tl.program_id(1)
    t_ok = offs_t < T
    acc, sq = _sum_partials(mix_ptr, sq_ptr, offs_t, t_ok, T, SPLITS, GROUPS * N)
    pre = _gates_and_maps(
        acc, sq, offs_t, t_ok, scale_ptr, base_ptr, post_ptr, c_ptr, K, iters, hc_eps, rms_eps, pid_d == 0, N, GROUPS
    )
    d_lo = pid_d * BLOCK_D
    _weighted_sum(x_ptr, y_ptr, pre, offs_t, t_ok, K, D, d_lo, tl.minimum(d_lo + BLOCK_D, D), N, BLOCK_D)


def mix_stage_launch(
    x2,
    fn32,
    mix,
    sq,
    *,
    k_split: int,
    mix_rows: int,
    block_t: int,
    block_k: int,
    precision: str,
    warps: int = 4,
    load: str = "ptr",
    extra: dict | None = None,
) -> tuple[tuple[int, int], tuple, dict]:
    """(grid, args, kwargs) of one launch of the split-K mix stage :func:`_hc_mix_kernel`, the one place that
    spells its signature (``mhc_pre`` and the H200 benchmark's stage rows both launch through it).

    Args:
        x2: [T, K] activations (bf16 or fp32, contiguous); fn32: [mix_rows, K] fp32 weights.
        mix: [splits, T, MIXP] fp32 partial sums (MIXP >= mix_rows); sq: [splits, T] fp32 partial Σx².
        k_split: K columns per split (a multiple of ``block_k``); ``extra``: further kernel constexprs (STAGES).

    Raises:
        ValueError: ``load`` other than "ptr" or "tma".
    """  # fmt: skip
    if load not in ("ptr", "tma"):
        raise ValueError(f"config LOAD must be 'ptr' or 'tma', got {load!r}")
    t, k = x2.shape
    splits, mixp = mix.shape[0], mix.shape[2]
    descs = _mix_descriptors(x2, fn32, block_t, block_k, mixp) if load == "tma" else None
    load = load if descs is not None else "ptr"  # pointer loads take any layout
    args = (x2, fn32, mix, sq, t, k, k_split, *(descs or (x2, fn32)))
    kwargs = dict(
        LOAD=load, MIXP=mixp, MIX=mix_rows, BLOCK_T=block_t, BLOCK_K=block_k, PRECISION=precision,
        INTERPRET=interpreting(), num_warps=warps, **(extra or {}),
    )  # fmt: skip
    return (triton.cdiv(t, block_t), splits), args, kwargs


def _mix_descriptors(x2: torch.Tensor, fn32: torch.Tensor, block_t: int, block_k: int, mixp: int):
    """TMA descriptors for the mix stage: x as [T, n·d] bf16/fp32 in [BLOCK_T, BLOCK_K] tiles and fn as
    [(2+n)n, n·d] fp32 in [MIXP, BLOCK_K] tiles (rows past (2+n)n read as zero). None where TMA cannot
    address either (a base or row not a multiple of 16 bytes, or a box side over 256)."""
    x_desc, fn_desc = tma_descriptor(x2, [block_t, block_k]), tma_descriptor(fn32, [mixp, block_k])
    return None if x_desc is None or fn_desc is None else (x_desc, fn_desc)


def mhc_pre_config(t: int, n: int, d: int) -> dict:
    """Launch config: split-K mix stage sized to fill the SMs, then the finish stage (tuned on an H200)."""
    from .common import tuned

    if interpreting():
        return {"SPLIT": 0, "BLOCK_T": 16, "BLOCK_K": 32, "BT2": 8, "BLOCK_D": 32, "num_warps": 4}
    found = tuned("mhc_pre", "small" if t <= 1024 else "large")
    if found:
        return found
    if t <= 1024:
        return {"SPLIT": 0, "BLOCK_T": 16, "BLOCK_K": 128, "BT2": 8, "BLOCK_D": 256, "num_warps": 4}
    return {"SPLIT": 1, "BLOCK_T": 64, "BLOCK_K": 64, "BT2": 8, "BLOCK_D": 256, "num_warps": 4}


def _auto_splits(t: int, k: int, block_t: int, block_k: int, sms: int) -> int:
    blocks = triton.cdiv(t, block_t)
    return max(1, min(triton.cdiv(2 * sms, blocks), triton.cdiv(k, 4 * block_k), 64))


@triton.jit
def _hc_post_kernel(x_ptr, res_ptr, post_ptr, c_ptr, out_ptr, D, N: tl.constexpr, BLOCK_D: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    offs_n = tl.arange(0, N)
    x = tl.load(x_ptr + t * D + offs_d, mask=d_ok, other=0.0).to(tl.float32)
    res = tl.load(res_ptr + t * N * D + offs_n[:, None] * D + offs_d[None, :], mask=d_ok[None, :], other=0.0).to(
        tl.float32
    )
    post = tl.load(post_ptr + t * N + offs_n)
    comb = tl.load(c_ptr + t * N * N + offs_n[:, None] * N + offs_n[None, :])  # [i, j]
    mixed = tl.sum(comb[:, :, None] * res[:, None, :], axis=0)  # [j, BLOCK_D]
    out = post[:, None] * x[None, :] + mixed
    tl.store(
        out_ptr + t * N * D + offs_n[:, None] * D + offs_d[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=d_ok[None, :],
    )


def mhc_post(x, residual, post, comb, *, config: dict | None = None):
    """Triton hc_post: one program per (token, BLOCK_D slice); same contract as :func:`mhc_post_ref`."""
    t, n, d = residual.shape
    out = torch.empty_like(residual)
    if t == 0:
        return out
    cfg = dict(config or {"BLOCK_D": 32 if interpreting() else 512, "num_warps": 4})
    bd = cfg.pop("BLOCK_D")
    _hc_post_kernel[(t, triton.cdiv(d, bd))](
        x.contiguous(),
        residual.contiguous(),
        post.float().contiguous(),
        comb.float().contiguous(),
        out,
        d,
        N=n,
        BLOCK_D=bd,
        **cfg,
    )
    return out


def mhc_pre_cost(t: int, n: int, d: int) -> Cost:
    """Spec page §5: bytes ≈ 2·T·nd + 96·nd + 2·T·d + 80·T; FLOPs ≈ 2·T·24·nd + 4·T·nd (TF32)."""
    nd = n * d
    mix = (2 + n) * n
    return Cost(
        bytes=float(2 * t * nd + 4 * mix * nd + 2 * t * d + 80 * t),
        flops=float(2 * t * mix * nd + 4 * t * nd),
        peak="tf32",
    )


def mhc_post_cost(t: int, n: int, d: int) -> Cost:
    """Spec page §5: bytes ≈ 18·T·d (n = 4); no tensor-core work."""
    return Cost(bytes=float(2 * t * d + 4 * t * n * d + 4 * t * (n + n * n)), flops=0.0, peak=None)
