"""DeepSeek V4 MoE routing: sqrt(softplus) scores, bias for selection only, hash layers via tid2eid.

Contract (DeepSeek-V4 ``inference/model.py`` Gate; vLLM ``dsv4_topk`` / ``fused_topk_bias``)::

    s   = sqrt(softplus(logits))            # [T, E] fp32 (softplus: x if x > 20 else log1p(exp(x)))
    sel = s + bias, NaN -> -1e30            # selection only; ties go to the lowest expert id
    idx = tid2eid[input_ids] on hash layers, else the top-k of sel (in descending sel order)
    w   = s[idx] / (Σ s[idx] if > 0 else 1) * route_scale

Bounds policy (never a fault): a token id outside [0, vocab) gives a padding row (all ids -1,
weights 0); a table entry outside [0, E) gives id -1 and weight 0 in that slot, the other slots
renormalised among themselves. Ids are int32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .common import Cost


def scores_ref(logits: torch.Tensor) -> torch.Tensor:
    """``sqrt(softplus(x))`` in fp32 (torch's softplus: threshold 20, log1p)."""
    return torch.nn.functional.softplus(logits.float()).sqrt()


def route_weights_ref(s: torch.Tensor, ids: torch.Tensor, route_scale: float) -> torch.Tensor:
    """Weights for given ids (-1 = no expert): gathered unbiased scores, renormalised with the sum guard."""
    w = torch.where(ids >= 0, s.gather(1, ids.long().clamp(min=0)), torch.zeros((), device=s.device))
    total = w.sum(-1, keepdim=True)
    return w / torch.where(total > 0, total, torch.ones((), device=s.device)) * route_scale


def hash_ids_ref(input_ids: torch.Tensor, tid2eid: torch.Tensor, num_experts: int) -> torch.Tensor:
    """Bounds-checked ``tid2eid[input_ids]`` (torch itself would assert on ids >= vocab and wrap negatives)."""
    vocab, topk = tid2eid.shape
    tok = input_ids.long()
    ok = (tok >= 0) & (tok < vocab)
    ids = tid2eid[tok.clamp(0, max(vocab - 1, 0))].long() if vocab else torch.zeros(tok.shape[0], topk).long()
    ids = torch.where(ok[:, None], ids, -1)
    return torch.where((ids >= 0) & (ids < num_experts), ids, -1).int()


def route_ref(
    logits: torch.Tensor,
    bias: torch.Tensor | None,
    route_scale: float,
    topk: int,
    *,
    input_ids: torch.Tensor | None = None,
    tid2eid: torch.Tensor | None = None,
):
    """Torch reference. Returns (ids int32 [T, topk], weights fp32 [T, topk]).

    Args:
        logits: [T, E] router logits (any float dtype). bias: [E] fp32 or None (hash layers: ignored).
        input_ids: [T] int32/int64 and tid2eid: [vocab, topk] int32, both or neither (hash layer).
    """
    s = scores_ref(logits)
    if tid2eid is not None:
        if input_ids is None:
            raise ValueError("a hash layer needs input_ids [T] beside tid2eid [vocab, topk]")
        ids = hash_ids_ref(input_ids, tid2eid, logits.shape[1])
    else:
        sel = s if bias is None else s + bias.float()
        sel = torch.nan_to_num(sel, nan=-1e30, posinf=float("inf"), neginf=float("-inf"))
        ids = torch.sort(sel, dim=1, descending=True, stable=True).indices[:, :topk].int()
    return ids, route_weights_ref(s, ids, route_scale)


@triton.jit
def _sqrt_softplus(x):
    ex = tl.exp(x)
    u = 1.0 + ex
    log1p = tl.where(u == 1.0, ex, tl.log(u) * tl.fdiv(ex, u - 1.0))  # log1p(ex), accurate for small ex
    return tl.sqrt(tl.where(x > 20.0, x, log1p))


@triton.jit
def _route_kernel(
    logits_ptr,
    bias_ptr,
    tok_ptr,
    table_ptr,
    ids_ptr,
    w_ptr,
    T,
    E,
    vocab,
    stride_l,
    route_scale,
    HASH: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    TOPK: tl.constexpr,
    KPAD: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_E: tl.constexpr,
):
    offs_t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_e = tl.arange(0, BLOCK_E)
    offs_k = tl.arange(0, KPAD)
    t_ok = offs_t < T
    e_ok = offs_e < E
    ids = tl.full([BLOCK_T, KPAD], -1, dtype=tl.int32)
    if HASH:  # indices from the table; only the picked logits are read
        tok = tl.load(tok_ptr + offs_t, mask=t_ok, other=-1).to(tl.int64)
        tok_ok = (tok >= 0) & (tok < vocab)
        ent = tl.load(
            table_ptr + tok[:, None] * TOPK + offs_k[None, :], mask=tok_ok[:, None] & (offs_k[None, :] < TOPK), other=-1
        )
        ids = tl.where((ent >= 0) & (ent < E), ent, -1).to(tl.int32)
    else:
        x = tl.load(
            logits_ptr + offs_t[:, None].to(tl.int64) * stride_l + offs_e[None, :],
            mask=t_ok[:, None] & e_ok[None, :],
            other=0.0,
        ).to(tl.float32)
        s = _sqrt_softplus(x)
        sel = s
        if HAS_BIAS:
            sel = s + tl.load(bias_ptr + offs_e, mask=e_ok, other=0.0)[None, :]
        sel = tl.where(sel != sel, -1e30, sel)
        sel = tl.where(e_ok[None, :], sel, float("-inf"))
        # Per pick: the row max, then the lowest expert id holding it (ties go to the lowest id).
        for k in tl.static_range(TOPK):
            mx = tl.max(sel, axis=1)
            idk = tl.min(tl.where(sel == mx[:, None], offs_e[None, :], BLOCK_E), axis=1)
            sel = tl.where(offs_e[None, :] == idk[:, None], float("-inf"), sel)
            ids = tl.where(offs_k[None, :] == k, idk[:, None], ids)
    # weights from the unbiased scores of the picks, recomputed from the gathered logits
    picked = t_ok[:, None] & (ids >= 0)
    xs = tl.load(logits_ptr + offs_t[:, None].to(tl.int64) * stride_l + ids, mask=picked, other=0.0)
    ws = tl.where(picked, _sqrt_softplus(xs.to(tl.float32)), 0.0)
    total = tl.sum(ws, axis=1)
    ws = ws / tl.where(total > 0, total, 1.0)[:, None] * route_scale
    out_off = offs_t[:, None] * TOPK + offs_k[None, :]
    st = t_ok[:, None] & (offs_k[None, :] < TOPK)
    tl.store(ids_ptr + out_off, ids, mask=st)
    tl.store(w_ptr + out_off, ws, mask=st)


def route_config(t: int, e: int, hashed: bool = False) -> dict:
    """Tokens per program and warps (tuned on an H200)."""
    from .common import interpreting, tuned

    if interpreting():
        return {"BLOCK_T": 4, "num_warps": 4}
    return tuned("routing", route_key(t, e, hashed)) or {"BLOCK_T": 4, "num_warps": 1}


def route_key(t: int, e: int, hashed: bool = False) -> str:
    """Tuned-config bucket: hash layers, else the padded expert count."""
    return "hash" if hashed else f"E{triton.next_power_of_2(e)}"


def route(
    logits: torch.Tensor,
    bias: torch.Tensor | None,
    route_scale: float,
    topk: int,
    *,
    input_ids: torch.Tensor | None = None,
    tid2eid: torch.Tensor | None = None,
    config: dict | None = None,
):
    """Triton routing in one launch; same contract and outputs as :func:`route_ref`."""
    t, e = logits.shape
    hashed = tid2eid is not None
    if tid2eid is not None and (input_ids is None or tid2eid.shape[1] != topk):
        raise ValueError("hash layers need input_ids [T] and tid2eid [vocab, topk]")
    ids = torch.empty((t, topk), dtype=torch.int32, device=logits.device)
    w = torch.empty((t, topk), dtype=torch.float32, device=logits.device)
    if t == 0:
        return ids, w
    cfg = dict(config or route_config(t, e, hashed))
    bt = cfg.pop("BLOCK_T")
    logits = logits if logits.stride(1) == 1 else logits.contiguous()
    dummy = ids
    table = tid2eid.int().contiguous() if tid2eid is not None else dummy
    vocab = tid2eid.shape[0] if tid2eid is not None else 0
    _route_kernel[(triton.cdiv(t, bt),)](
        logits,
        bias if bias is not None else w,
        input_ids if hashed else dummy,
        table,
        ids,
        w,
        t,
        e,
        vocab,
        logits.stride(0),
        float(route_scale),
        HASH=hashed,
        HAS_BIAS=bias is not None and not hashed,
        TOPK=topk,
        KPAD=triton.next_power_of_2(topk),
        BLOCK_T=bt,
        BLOCK_E=triton.next_power_of_2(e),
        **cfg,
    )
    return ids, w


def route_cost(t: int, e: int, topk: int, *, hashed: bool, id_bytes: int = 4) -> Cost:
    """Bytes by the spec page (§4): logits, bias, ids and table rows in, weights and ids out."""
    nbytes = 4 * t * e + 4 * e + 8 * t * topk
    if hashed:
        nbytes += t * id_bytes + t * topk * id_bytes
    return Cost(bytes=float(nbytes), flops=0.0, peak=None)
