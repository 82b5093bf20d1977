"""Lightning-indexer MQA logits, decode over the paged FP8 key cache.

Contract (DeepGEMM ``fp8_fp4_paged_mqa_logits``, SM90, 2-D ``context_lens``): row r = b*next_n + t has
length L = context_lens[b, t]; for j < L, with blk = block_table[b, j // 64] and o = j % 64::

    logits[r, j] = sf[blk, o] * Σ_h w[r, h] * relu(q[b, t, h] · k[blk, o])

kv_cache is uint8 [NB, 64, 1, D+4]; each 64-token block holds 64*D e4m3 bytes, then 64 fp32 scales
(split layout, not interleaved per token). stride(0) may exceed 64*(D+4). Our kernel writes -inf for
j >= L (DeepGEMM leaves those columns unspecified). Block-table slots past ceil(L/64) are never read.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import FP8, Cost, tma_descriptor

BLOCK_KV = 64


def pack_paged_cache(k_fp8: torch.Tensor, k_sf: torch.Tensor, block_stride: int | None = None) -> torch.Tensor:
    """Pack per-block keys and scales into the split layout ``[NB, 64, 1, D+4]`` uint8.

    Args:
        k_fp8: [NB, 64, D] e4m3. k_sf: [NB, 64] fp32. block_stride: bytes between blocks (>= 64*(D+4)),
            for caches that pack other pages beside the indexer page.
    """
    nb, bk, d = k_fp8.shape
    row = bk * (d + 4)
    stride = block_stride or row
    buf = torch.zeros((nb, stride), dtype=torch.uint8, device=k_fp8.device)
    buf[:, : bk * d] = k_fp8.reshape(nb, -1).view(torch.uint8)
    buf[:, bk * d : row] = k_sf.float().contiguous().view(torch.uint8).reshape(nb, -1)
    return buf.as_strided((nb, bk, 1, d + 4), (stride, d + 4, d + 4, 1))


def unpack_paged_cache(kv_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of :func:`pack_paged_cache`: ([NB, 64, D] e4m3, [NB, 64] fp32)."""
    nb, bk, _, dp4 = kv_cache.shape
    d = dp4 - 4
    flat = kv_cache.as_strided((nb, bk * dp4), (kv_cache.stride(0), 1))
    vals = flat[:, : bk * d].contiguous().view(FP8).view(nb, bk, d)
    scales = flat[:, bk * d :].contiguous().view(torch.float32).view(nb, bk)
    return vals, scales


def check_decode_inputs(
    q, kv_cache, weights, context_lens, block_table, max_context_len, *, ranges: bool = False
) -> None:
    """Host-side preconditions (``ranges`` reads the lengths on the host, a device sync: the reference
    does, the kernel does not). Raises ValueError on a shape, dtype or range violation."""
    b, next_n, h, d = q.shape
    if kv_cache.dtype != torch.uint8 or kv_cache.dim() != 4 or kv_cache.shape[1:] != (BLOCK_KV, 1, d + 4):
        raise ValueError(f"kv_cache must be uint8 [NB, 64, 1, {d + 4}], got {tuple(kv_cache.shape)} {kv_cache.dtype}")
    if kv_cache.stride(1) != d + 4 or kv_cache.stride(3) != 1:
        raise ValueError("kv_cache needs stride(1) == D+4 and stride(3) == 1")
    if weights.shape != (b * next_n, h) or context_lens.shape != (b, next_n):
        raise ValueError(
            f"weights must be [B*next_n, H] and context_lens [B, next_n]; got "
            f"{tuple(weights.shape)}, {tuple(context_lens.shape)}"
        )
    if block_table.dim() != 2 or block_table.shape[0] != b or block_table.dtype != torch.int32:
        raise ValueError("block_table must be int32 [B, max_blocks]")
    if ranges and b and int(context_lens.max()) > min(max_context_len, block_table.shape[1] * BLOCK_KV):
        raise ValueError("a context length exceeds max_context_len or the block table")


def paged_mqa_logits_ref(
    q, kv_cache, weights, context_lens, block_table, max_context_len: int, *, out_dtype=torch.float32
) -> torch.Tensor:
    """Exact torch reference (fp32 on dequantised keys), one sequence at a time.

    Args:
        q: [B, next_n, H, D] e4m3. kv_cache: [NB, 64, 1, D+4] uint8. weights: [B*next_n, H] fp32.
        context_lens: [B, next_n] int32 (negative means 0). block_table: [B, max_blocks] int32.
    Returns:
        [B*next_n, max_context_len] logits, -inf at j >= L.
    """
    check_decode_inputs(q, kv_cache, weights, context_lens, block_table, max_context_len, ranges=True)
    b, next_n, _, d = q.shape
    out = torch.full((b * next_n, max_context_len), float("-inf"), dtype=torch.float32, device=q.device)
    vals, scales = unpack_paged_cache(kv_cache)
    lens = context_lens.clamp(min=0)
    for i in range(b):
        lmax = int(lens[i].max()) if next_n else 0
        if lmax == 0:
            continue
        blocks = block_table[i, : triton.cdiv(lmax, BLOCK_KV)].long()
        k = (vals[blocks].float() * scales[blocks][..., None]).reshape(-1, d)[:lmax]
        s = torch.einsum("thd,nd->thn", q[i].float(), k)
        lg = (s.relu() * weights[i * next_n : (i + 1) * next_n, :, None].float()).sum(1)
        for t in range(next_n):
            lt = int(lens[i, t])
            out[i * next_n + t, :lt] = lg[t, :lt]
    return out.to(out_dtype)


@triton.jit
def _paged_logits_kernel(
    q_ptr,
    kv_ptr,
    w_ptr,
    lens_ptr,
    bt_ptr,
    out_ptr,
    max_ctx,
    table_blocks,
    stride_kvb,
    stride_bt,
    stride_om,
    k_desc,
    NEXT_N: tl.constexpr,
    H: tl.constexpr,
    D: tl.constexpr,
    BLOCKS: tl.constexpr,
    TILE: tl.constexpr,
    HEAD_DOT: tl.constexpr,
    SPLIT: tl.constexpr,
    LOAD: tl.constexpr = "u8",
    STAGES: tl.constexpr = 0,
):
    b = tl.program_id(0)
    split = tl.program_id(1)
    offs_c = tl.arange(0, NEXT_N * H)  # columns: (next-token t, head h)
    offs_d = tl.arange(0, D)
    offs_r = tl.arange(0, TILE)  # rows: tokens of this tile
    l0 = tl.maximum(tl.load(lens_ptr + b * NEXT_N), 0)
    l1 = l0
    if NEXT_N == 2:
        l1 = tl.maximum(tl.load(lens_ptr + b * NEXT_N + 1), 0)
    lmax = tl.maximum(l0, l1)
    # Q[b]^T as the dot's B operand [D, next_n*H] (contiguous along D), weights [next_n*H].
    q_t = tl.load(q_ptr + b * (NEXT_N * H * D) + offs_c[None, :] * D + offs_d[:, None])
    w = tl.load(w_ptr + b * (NEXT_N * H) + offs_c)
    offs_o = tl.arange(0, 16)
    # HEAD_DOT: the weighted head sum as a second (TF32) tensor-core dot with a block matrix W [next_n*H, 16]
    # whose column t holds next-token t's head weights; otherwise row reductions on the CUDA cores.
    w_mat = tl.where((offs_c[:, None] // H) == offs_o[None, :], w[:, None], 0.0)
    # SPLIT (next_n = 2): one [TILE, H] dot per next-token instead of one [TILE, 2H] dot and a [TILE, 2, H] sum.
    offs_h = tl.arange(0, H)
    q0_t = tl.load(q_ptr + b * (NEXT_N * H * D) + offs_h[None, :] * D + offs_d[:, None])
    q1_t = tl.load(
        q_ptr + b * (NEXT_N * H * D) + (H + offs_h[None, :] % H) * D + offs_d[:, None],
        mask=offs_h[None, :] < H * (NEXT_N - 1),
        other=0.0,
    )
    w0 = tl.load(w_ptr + b * (NEXT_N * H) + offs_h)
    w1 = tl.load(w_ptr + b * (NEXT_N * H) + H + offs_h % H, mask=offs_h < H * (NEXT_N - 1), other=0.0)
    row0 = out_ptr + (b * NEXT_N).to(tl.int64) * stride_om
    tok_lo = split * (BLOCKS * 64)
    tok_hi = tl.minimum(tok_lo + BLOCKS * 64, max_ctx)
    tok_valid = tl.minimum(tok_hi, lmax)
    for t0 in tl.range(tok_lo, tok_valid, TILE, num_stages=STAGES if STAGES > 0 else None):
        tok = t0 + offs_r
        live = (tok < lmax) & (tok // 64 < table_blocks)  # never touch table slots or blocks past the sequence
        if LOAD == "tma":  # one 64-token block per tile: its keys by TMA into shared memory, as e4m3
            tl.static_assert(TILE == 64)
            slot = t0 // 64
            phys_s = tl.load(bt_ptr + b * stride_bt + slot, mask=slot < table_blocks, other=0).to(tl.int64)
            k8 = k_desc.load([phys_s.to(tl.int32), 0, 0]).reshape(TILE, D)
            sf_ptr = (kv_ptr + phys_s * stride_kvb + 64 * D).to(tl.pointer_type(tl.float32))
            sf = tl.load(sf_ptr + tok % 64, mask=live, other=0.0)
        else:
            phys = tl.load(bt_ptr + b * stride_bt + tok // 64, mask=live, other=0).to(tl.int64)
            base = kv_ptr + phys * stride_kvb
            kb = tl.load(base[:, None] + (tok % 64)[:, None] * D + offs_d[None, :], mask=live[:, None], other=0)
            sf = tl.load((base + 64 * D).to(tl.pointer_type(tl.float32)) + tok % 64, mask=live, other=0.0)
            k8 = kb.to(tl.float8e4nv, bitcast=True)
        st = tok < tok_hi
        if SPLIT:
            lg0 = tl.sum(tl.maximum(tl.dot(k8, q0_t), 0.0) * w0[None, :], axis=1) * sf
            lg1 = tl.sum(tl.maximum(tl.dot(k8, q1_t), 0.0) * w1[None, :], axis=1) * sf
        elif HEAD_DOT:
            s = tl.dot(k8, q_t)  # [TILE, next_n*H]
            r = tl.dot(tl.maximum(s, 0.0), w_mat, input_precision="tf32")  # [TILE, 16]
            lg0 = tl.sum(tl.where(offs_o[None, :] == 0, r, 0.0), axis=1) * sf
            lg1 = tl.sum(tl.where(offs_o[None, :] == 1, r, 0.0), axis=1) * sf
        else:
            x = tl.maximum(tl.dot(k8, q_t), 0.0) * w[None, :]
            if NEXT_N == 1:
                lg0 = tl.sum(x, axis=1) * sf
                lg1 = lg0
            else:  # both next-tokens' head sums as one reduction over [TILE, 2, H]
                lg2 = tl.sum(tl.reshape(x, (TILE, 2, H)), axis=2) * sf[:, None]
        if NEXT_N == 2:  # one [TILE, 2] store for both rows
            offs_n = tl.arange(0, 2)
            if SPLIT or HEAD_DOT:
                lg2 = tl.join(lg0, lg1)
            lens2 = tl.where(offs_n == 0, l0, l1)
            lg2 = tl.where(tok[:, None] < lens2[None, :], lg2, float("-inf")).to(out_ptr.dtype.element_ty)
            tl.store(row0 + offs_n[None, :] * stride_om + tok[:, None], lg2, mask=st[:, None])
        else:
            tl.store(row0 + tok, tl.where(tok < l0, lg0, float("-inf")).to(out_ptr.dtype.element_ty), mask=st)
    ninf = tl.full([TILE], float("-inf"), dtype=tl.float32).to(out_ptr.dtype.element_ty)
    fill_lo = tok_lo + tl.cdiv(tl.maximum(tok_valid - tok_lo, 0), TILE) * TILE
    for t0 in range(fill_lo, tok_hi, TILE):
        tok = t0 + offs_r
        for t in tl.static_range(NEXT_N):
            tl.store(row0 + t * stride_om + tok, ninf, mask=tok < tok_hi)


def decode_key(b: int, next_n: int, max_context_len: int) -> str:
    """Tuned-config bucket: ``n1``/``n2``, with ``-few`` when 16 blocks per program would launch fewer than
    1024 programs (small batches at short contexts: more, shorter programs fill the SMs better there)."""
    few = b * triton.cdiv(triton.cdiv(max_context_len, BLOCK_KV), 16) < 1024
    return f"n{next_n}" + ("-few" if few else "")


def decode_config(b: int, next_n: int, max_context_len: int) -> dict:
    """Blocks per program, tokens per dot tile and launch shape (tuned on an H200; tiny under the interpreter)."""
    from .common import interpreting, tuned

    if interpreting():
        return {"BLOCKS": 2, "TILE": 64, "HEAD_DOT": next_n == 1, "SPLIT": next_n == 2, "num_warps": 4, "num_stages": 1}
    found = tuned("decode", decode_key(b, next_n, max_context_len)) or tuned("decode", f"n{next_n}")
    return (
        {"SPLIT": False, **found}
        if found
        else {"BLOCKS": 8, "TILE": 64, "HEAD_DOT": False, "SPLIT": False, "num_warps": 4, "num_stages": 3}
    )


def paged_mqa_logits(
    q,
    kv_cache,
    weights,
    context_lens,
    block_table,
    max_context_len: int,
    *,
    out_dtype=torch.float32,
    config: dict | None = None,
) -> torch.Tensor:
    """Triton kernel for the paged decode logits; same contract as :func:`paged_mqa_logits_ref`.

    Grid (B, splits): each program keeps Q[b]^T (D x next_n*H, e4m3) resident and streams BLOCKS KV blocks,
    TILE tokens (one or two 64-token blocks, gathered through the block table) per FP8 tensor-core dot
    ``K_tile @ Q^T``, so the head sum is a row reduction inside each warp; ReLU, weights and the key scale fuse.
    Tokens past the row's length are written as -inf; table slots past ceil(L/64) are never read.

    ``config["LOAD"] == "tma"`` loads each block's keys with a TMA descriptor (one [64, D] e4m3 box per tile)
    in a loop software-pipelined ``STAGES`` deep; a cache whose base or block stride is not a multiple of 16
    bytes takes the pointer loads instead (any stride). Config keys: BLOCKS, TILE, HEAD_DOT, SPLIT, LOAD, STAGES
    and the launch options (num_warps, num_stages, maxnreg).
    """
    check_decode_inputs(q, kv_cache, weights, context_lens, block_table, max_context_len)
    b, next_n, h, d = q.shape
    if next_n not in (1, 2) or q.dtype != FP8:
        raise ValueError("the paged kernel takes next_n in {1, 2} and e4m3 q (as DeepGEMM on SM90)")
    out = torch.empty((b * next_n, max_context_len), dtype=out_dtype, device=q.device)
    if b == 0 or max_context_len == 0:
        return out
    cfg = dict(config or decode_config(b, next_n, max_context_len))
    blocks = cfg.pop("BLOCKS")
    grid = (b, triton.cdiv(triton.cdiv(max_context_len, BLOCK_KV), blocks))
    if cfg.get("LOAD", "u8") not in ("u8", "tma"):
        raise ValueError(f"config LOAD must be 'u8' or 'tma', got {cfg['LOAD']!r}")
    k_desc = _key_descriptor(kv_cache, d) if cfg.get("LOAD") == "tma" else None
    if cfg.get("LOAD") == "tma" and k_desc is None:  # pointer loads take any stride, best with a dot per row
        cfg.update(LOAD="u8", SPLIT=True, HEAD_DOT=False, STAGES=0)
    _paged_logits_kernel[grid](
        q.contiguous(),
        kv_cache,
        weights.float().contiguous(),
        context_lens.contiguous(),
        block_table,
        out,
        max_context_len,
        block_table.shape[1],
        kv_cache.stride(0),
        block_table.stride(0),
        out.stride(0),
        k_desc if k_desc is not None else kv_cache,
        NEXT_N=next_n,
        H=h,
        D=d,
        BLOCKS=blocks,
        **cfg,
    )
    return out


def _key_descriptor(kv_cache: torch.Tensor, d: int):
    """A TMA descriptor over the keys of every block, ``[NB, 64, D]`` e4m3 (the scales after them left out),
    loaded one ``[1, 64, D]`` block at a time; None where TMA cannot address the cache (a base or block
    stride that is not a multiple of 16 bytes, or no blocks)."""
    keys = kv_cache.as_strided((kv_cache.shape[0], BLOCK_KV, d), (kv_cache.stride(0), d, 1)).view(FP8)
    return tma_descriptor(keys, [1, BLOCK_KV, d])


def decode_cost(context_lens: torch.Tensor, h: int, d: int) -> Cost:
    """Bytes and FLOPs by the spec page's formulas (§2 Cost); KV read once per sequence."""
    b, next_n = context_lens.shape
    lens = context_lens.clamp(min=0).long()
    per_seq = lens.max(dim=1).values if next_n else torch.zeros(b, dtype=torch.long)
    nblk = (per_seq + BLOCK_KV - 1) // BLOCK_KV
    total_rows = int(lens.sum())
    nbytes = int(nblk.sum()) * BLOCK_KV * (d + 4) + b * next_n * (h * d + 4 * h) + 4 * total_rows
    nbytes += 4 * int(nblk.sum())
    return Cost(bytes=float(nbytes), flops=2.0 * h * d * total_rows, peak="fp8")
