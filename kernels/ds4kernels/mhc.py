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

Both kernels pass the grid on an H200; hc_pre walks the whole n·d reduction in one program per 16 tokens,
so it is slower than the torch reference at small T (no split-K yet), and the suite runs these ops only
when asked (``--op mhc_pre`` / ``--op mhc_post``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import Cost, interpreting


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
        acc += tl.dot(xk, tl.trans(fk), input_precision=PRECISION)
    mix = acc * tl.rsqrt(sq / K + rms_eps)[:, None]
    grp = offs_m // N  # 0: pre, 1: post, 2..N+1: rows of C
    sc = tl.load(scale_ptr + tl.minimum(grp, 2))
    z = mix * sc[None, :] + tl.load(base_ptr + offs_m, mask=m_ok, other=0.0)[None, :]
    sig = 1.0 / (1.0 + tl.exp(-z))
    col = offs_m % N
    row = offs_t[:, None] * N + col[None, :]
    tl.store(post_ptr + row, 2.0 * sig, mask=t_ok[:, None] & (grp == 1)[None, :])
    # Sinkhorn on [BLOCK_T, GROUPS, N]: groups 2..N+1 hold C's rows, the others are zeroed out.
    g3 = tl.reshape(grp[None, :] + tl.zeros([BLOCK_T, GROUPS * N], dtype=tl.int32), [BLOCK_T, GROUPS, N])
    is_c = (g3 >= 2) & (g3 < 2 + N)
    z3 = tl.where(is_c, tl.reshape(z, [BLOCK_T, GROUPS, N]), 0.0)
    e3 = tl.exp(z3 - tl.max(z3, axis=2)[:, :, None])
    c3 = tl.where(is_c, e3 / tl.sum(e3, axis=2)[:, :, None] + hc_eps, 0.0)
    c3 = c3 / (tl.sum(c3, axis=1)[:, None, :] + hc_eps)
    for _ in range(iters - 1):
        c3 = c3 / (tl.sum(c3, axis=2)[:, :, None] + hc_eps)
        c3 = c3 / (tl.sum(c3, axis=1)[:, None, :] + hc_eps)
    c_flat = tl.reshape(c3, [BLOCK_T, GROUPS * N])
    tl.store(
        c_ptr + offs_t[:, None] * (N * N) + (offs_m - 2 * N)[None, :],
        c_flat,
        mask=t_ok[:, None] & ((grp >= 2) & m_ok)[None, :],
    )
    # y = Σ_i pre_i · X[:, i]: pre as [BLOCK_T, N], then a second pass over X (recently read: L2).
    pre2 = tl.reshape(tl.where((grp == 0)[None, :], sig + hc_eps, 0.0), [BLOCK_T, GROUPS, N])
    pre = tl.sum(pre2, axis=1)  # [BLOCK_T, N]
    offs_n = tl.arange(0, N)
    for d0 in range(0, D, BLOCK_D):
        offs_d = d0 + tl.arange(0, BLOCK_D)
        d_ok = offs_d < D
        ptr = x_ptr + offs_t[:, None, None].to(tl.int64) * K + offs_n[None, :, None] * D + offs_d[None, None, :]
        xs = tl.load(ptr, mask=t_ok[:, None, None] & d_ok[None, None, :], other=0.0).to(tl.float32)
        y = tl.sum(xs * pre[:, :, None], axis=1)
        tl.store(
            y_ptr + offs_t[:, None].to(tl.int64) * D + offs_d[None, :],
            y.to(y_ptr.dtype.element_ty),
            mask=t_ok[:, None] & d_ok[None, :],
        )


def mhc_pre(
    x, fn, scale, base, iters: int = 20, hc_eps: float = 1e-6, rms_eps: float = 1e-6, *, config: dict | None = None
):
    """Triton hc_pre, one launch: mixing GEMV (TF32x3 dot) with the RMS factor, sigmoid gates, Sinkhorn on
    the [n, n] combination matrices and the pre-weighted sum. Same contract as :func:`mhc_pre_ref`."""
    t, n, d = x.shape
    y = torch.empty((t, d), dtype=x.dtype, device=x.device)
    post = torch.empty((t, n), dtype=torch.float32, device=x.device)
    comb = torch.empty((t, n, n), dtype=torch.float32, device=x.device)
    if t == 0:
        return y, post, comb
    cfg = dict(
        config
        or (
            {"BLOCK_T": 16, "BLOCK_K": 32, "BLOCK_D": 32, "num_warps": 4}
            if interpreting()
            else {"BLOCK_T": 16, "BLOCK_K": 128, "BLOCK_D": 256, "num_warps": 4}
        )
    )
    bt = cfg.pop("BLOCK_T")
    groups = triton.next_power_of_2(2 + n)
    _hc_pre_kernel[(triton.cdiv(t, bt),)](
        x.contiguous(),
        fn.float().contiguous(),
        scale.float().contiguous(),
        base.float().contiguous(),
        y,
        post,
        comb,
        t,
        n * d,
        d,
        iters,
        hc_eps,
        rms_eps,
        N=n,
        GROUPS=groups,
        BLOCK_T=bt,
        PRECISION="ieee" if interpreting() else "tf32x3",
        **cfg,
    )
    return y, post, comb


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
