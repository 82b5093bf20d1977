"""Shape grids per op: the edge cases of the kernel-spec page, at a CI scale (interpreter, CPU) and a
full scale (GPU), plus the benchmark shapes with their targets. Inputs come from a seeded generator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .common import FP8, quant_fp8_rows
from .decode import BLOCK_KV, pack_paged_cache


@dataclass(frozen=True)
class Case:
    """One grid point: ``build(device, generator)`` returns the op's canonical keyword arguments."""

    op: str
    name: str
    build: Callable[[str, torch.Generator], dict]
    tags: frozenset = field(default_factory=frozenset)
    bench: bool = False
    target: dict | None = None


def _gen(device: str, seed: int) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def _randn(g, *shape, device):
    return torch.randn(*shape, generator=g, device=device)


# ---------------------------------------------------------------- prefill
def _prefill(m, n, h, d, bounds: str, *, dtype=FP8, out_dtype=torch.float32, clean=True):
    def build(device, g):
        q = _randn(g, m, h, d, device=device)
        k = _randn(g, n, d, device=device)
        if dtype == FP8:
            q = q.clamp(-448, 448).to(FP8)
            k, sf = quant_fp8_rows(k)
        else:
            q, k = q.bfloat16(), k.bfloat16()
            sf = torch.rand(n, generator=g, device=device) + 0.5
        w = _randn(g, m, h, device=device) * (d**-0.5) * (h**-0.5)
        i = torch.arange(m, device=device)
        if bounds == "causal":  # last chunk of a prompt, COMPRESS_RATIO 1
            ks, ke = torch.zeros_like(i), n - m + i + 1
        elif bounds == "ratio4":  # V4: compressed keys of a fresh prompt, first 3 rows empty
            ks, ke = torch.zeros_like(i), ((i + 1) // 4).clamp(max=n)
        elif bounds == "multi":  # three requests gathered into one K buffer
            req = (i * 3) // max(m, 1)
            starts = torch.tensor([0, n // 3, (2 * n) // 3], device=device)
            ends = torch.tensor([n // 3, (2 * n) // 3, n], device=device)
            ks = starts[req]
            ke = torch.minimum(ks + 1 + (i % max(1, n // 3)), ends[req])
        elif bounds == "cp":  # context parallel: two half-chunks with different ke
            half = m // 2
            ks = torch.zeros_like(i)
            ke = torch.where(i < half, n // 2 - half + i + 1, n - (m - half) + (i - half) + 1).clamp(0, n)
        elif bounds == "empty":
            ks = torch.randint(0, n + 1, (m,), generator=g, device=device)
            ke = ks.clone()
        else:  # "random": ragged, unaligned, some empty rows
            ks = torch.randint(0, n + 1, (m,), generator=g, device=device)
            ke = torch.minimum(ks + torch.randint(0, n + 1, (m,), generator=g, device=device), torch.tensor(n))
        return {
            "q": q,
            "k": k,
            "k_sf": sf,
            "weights": w.float(),
            "ks": ks.int(),
            "ke": ke.int(),
            "clean": clean,
            "out_dtype": out_dtype,
        }

    return build


def prefill_cases(scale: str) -> list[Case]:
    """Prefill logits grid: ragged bounds, ks = ke, M/N unaligned, N = 1, M = 0, bf16 in/out."""
    h, d = (8, 32) if scale == "ci" else (64, 128)
    small = [(37, 53), (1, 1), (0, 16), (20, 1)] if scale == "ci" else [(257, 1000), (1, 1), (0, 256), (130, 1)]
    m, n = small[0]
    out = [
        Case("prefill", f"{b}-M{m}-N{n}", _prefill(m, n, h, d, b), frozenset({"fp8"}))
        for b in ("causal", "ratio4", "multi", "cp", "empty", "random")
    ]
    out += [
        Case("prefill", f"random-M{mm}-N{nn}", _prefill(mm, nn, h, d, "random"), frozenset({"fp8"}))
        for mm, nn in small[1:]
    ]
    out += [
        Case(
            "prefill",
            f"causal-M{m}-N{n}-bf16in",
            _prefill(m, n, h, d, "causal", dtype=torch.bfloat16),
            frozenset({"bf16-in"}),
        ),
        Case(
            "prefill",
            f"causal-M{m}-N{n}-bf16out",
            _prefill(m, n, h, d, "causal", out_dtype=torch.bfloat16),
            frozenset({"fp8", "bf16-out"}),
        ),
        Case("prefill", f"causal-M{m}-N{n}-H{h // 2}", _prefill(m, n, h // 2, d, "causal"), frozenset({"fp8"})),
    ]
    if scale == "full":
        out += [
            Case(
                "prefill",
                "bench-fp8-M4096-N32768",
                _prefill(4096, 32768, 64, 128, "causal", clean=False),
                frozenset({"fp8"}),
                bench=True,
                target={"pct_peak_min": 0.60},
            ),
            Case(
                "prefill",
                "bench-bf16-M4096-N32768",
                _prefill(4096, 32768, 64, 128, "causal", dtype=torch.bfloat16, clean=False),
                frozenset({"bf16-in"}),
                bench=True,
                target={"pct_peak_min": 0.50},
            ),
            Case(
                "prefill",
                "bench-v4flash-M8192-N2048",
                _prefill(8192, 2048, 64, 128, "ratio4", clean=True),
                frozenset({"fp8"}),
                bench=True,
            ),
        ]
    return out


# ---------------------------------------------------------------- decode
def _decode(b, next_n, h, d, max_ctx, lens_kind: str, *, stride_pad=0, shared=False):
    def build(device, g):
        if lens_kind == "uniform":
            lens = torch.full((b, next_n), max_ctx, dtype=torch.int32, device=device)
        else:
            base = torch.randint(0, max_ctx + 1, (b,), generator=g, device=device)
            edges = torch.tensor([0, 1, 63, 64, 65, 127, max_ctx], device=device)
            base[: min(b, edges.numel())] = edges[: min(b, edges.numel())]
            lens = torch.stack([(base - next_n + 1 + t).clamp(0, max_ctx) for t in range(next_n)], 1).int()
            if lens_kind == "ragged" and next_n == 2:  # spec decode: per-row lengths
                lens[:, 0] = (lens[:, 0] - torch.randint(0, 70, (b,), generator=g, device=device)).clamp(min=0)
        max_blocks = -(-max_ctx // BLOCK_KV)
        nb = max(1, b * max_blocks if not shared else max_blocks)
        kf = _randn(g, nb * BLOCK_KV, d, device=device)
        kq, ksf = quant_fp8_rows(kf)
        row = BLOCK_KV * (d + 4)
        cache = pack_paged_cache(kq.view(nb, BLOCK_KV, d), ksf.view(nb, BLOCK_KV), row + stride_pad)
        if shared:
            table = torch.randperm(nb, generator=g, device=device)[None].repeat(b, 1).int()
        else:
            table = torch.randperm(nb, generator=g, device=device).view(b, max_blocks).int()
        used = (lens.max(1).values.long() + BLOCK_KV - 1) // BLOCK_KV
        junk = torch.arange(max_blocks, device=device)[None, :] >= used[:, None]
        table = torch.where(junk, torch.tensor(-1 if b % 2 else 2**30, device=device, dtype=torch.int32), table)
        q = _randn(g, b, next_n, h, d, device=device).to(FP8)
        w = _randn(g, b * next_n, h, device=device) * (d**-0.5) * (h**-0.5)
        return {
            "q": q,
            "kv_cache": cache,
            "weights": w.float(),
            "context_lens": lens.contiguous(),
            "block_table": table.contiguous(),
            "max_context_len": max_ctx,
            "out_dtype": torch.float32,
        }

    return build


def decode_cases(scale: str) -> list[Case]:
    """Paged decode grid: L in {0, 1, 63, 64, 65, max}, unaligned max_ctx, junk table slots, shared and
    permuted blocks, next_n 1 and 2 (ragged rows), a padded kv_cache stride(0) (16-byte aligned, and not)."""
    h, d = (8, 32) if scale == "ci" else (64, 128)
    b, mc = (9, 200) if scale == "ci" else (33, 1000)
    out = []
    for nn in (1, 2):
        out.append(Case("decode", f"edges-B{b}-n{nn}-ctx{mc}", _decode(b, nn, h, d, mc, "edges")))
        out.append(
            Case(
                "decode",
                f"ragged-B{b}-n{nn}-ctx{mc}-pad",
                _decode(b, nn, h, d, mc, "ragged", stride_pad=256),
                frozenset({"ragged"} if nn == 2 else set()),
            )
        )
    # A block stride that is a multiple of 4 bytes but not of 16: no TMA descriptor can address it.
    out.append(Case("decode", f"ragged-B{b}-n2-ctx{mc}-pad4", _decode(b, 2, h, d, mc, "ragged", stride_pad=4)))
    out.append(Case("decode", f"shared-B4-n1-ctx{mc}", _decode(4, 1, h, d, mc, "edges", shared=True)))
    out.append(Case("decode", "B1-n2-ctx1", _decode(1, 2, h, d, 1, "uniform")))
    if scale == "full":
        for bb, ctx in ((32, 8192), (64, 8192), (64, 32768), (128, 16384), (256, 8192), (32, 65536)):
            for nn in (1, 2):
                out.append(
                    Case(
                        "decode",
                        f"bench-B{bb}-n{nn}-ctx{ctx}",
                        _decode(bb, nn, 64, 128, ctx, "uniform"),
                        bench=True,
                        target={"pct_hbm_min": 0.60 if nn == 1 else 0.50},
                    )
                )
    return out


# ---------------------------------------------------------------- top-k
def _topk(rows, cols, k, data: str, lengths: str, *, stride_pad=0, transposed=False):
    def build(device, g):
        if data == "lsb10":  # only the low 10 bits differ
            bits = torch.randint(0, 1024, (rows, cols), generator=g, device=device, dtype=torch.int32) | 0x3F800000
            x = bits.view(torch.float32)
        elif data == "const":
            x = torch.ones(rows, cols, device=device)
        elif data == "ascending":
            x = torch.arange(cols, device=device, dtype=torch.float32)[None].repeat(rows, 1)
        else:
            x = _randn(g, rows, cols, device=device)
        if data == "special":
            x[::3, ::7] = float("nan")
            x[1::3] = float("-inf")
            x[2::3, ::5] = float("inf")
        if lengths == "edges":
            ll = torch.tensor([0, 1, k - 1, k, k + 1, cols], device=device)
            length = ll[torch.arange(rows, device=device) % ll.numel()].clamp(max=cols)
        elif lengths == "full":
            length = torch.full((rows,), cols, device=device)
        else:
            length = torch.randint(0, cols + 1, (rows,), generator=g, device=device)
        starts = ((cols - length) * torch.rand(rows, generator=g, device=device)).long()
        ends = starts + length
        if lengths == "negative":  # end < start (L < 0): the row is all -1, nothing written before it
            starts, ends = ends.clamp(max=cols - 1), (starts - 1).clamp(min=0)
        if transposed:  # non-unit stride1
            x = x.T.contiguous().T
        elif stride_pad:  # DeepGEMM's padded row stride; stale garbage past each row's end
            buf = torch.full((rows, cols + stride_pad), 1e30, device=device)
            buf[:, :cols] = x
            x = buf[:, :cols]
        return {"logits": x, "starts": starts.int(), "ends": ends.int(), "k": k}

    return build


def topk_cases(scale: str) -> list[Case]:
    """Top-k grid: L in {0, 1, K-1, K, K+1} and L < 0, 10-LSB data, constant/ascending/-inf/NaN rows, padded
    and transposed strides, and (GPU) more than 12288 and 200k columns."""
    k, rows, cols = (16, 12, 100) if scale == "ci" else (512, 36, 3000)
    out = [
        Case("topk", f"{dt}-{ln}-R{rows}-C{cols}-K{k}", _topk(rows, cols, k, dt, ln))
        for dt, ln in (
            ("randn", "edges"),
            ("lsb10", "edges"),
            ("const", "edges"),
            ("ascending", "random"),
            ("special", "edges"),
            ("randn", "random"),
        )
    ]
    out.append(Case("topk", f"padded-R{rows}-C{cols}-K{k}", _topk(rows, cols, k, "randn", "random", stride_pad=64)))
    out.append(
        Case("topk", f"transposed-R{rows}-C{cols}-K{k}", _topk(rows, cols, k, "randn", "edges", transposed=True))
    )
    out.append(Case("topk", f"rows0-K{k}", _topk(0, cols, k, "randn", "full")))
    out.append(Case("topk", f"negative-length-R{rows}-K{k}", _topk(rows, cols, k, "randn", "negative")))
    if scale == "full":
        out.append(Case("topk", "K2048-R20-C13000", _topk(20, 13000, 2048, "randn", "edges")))
        for dt in ("const", "lsb10", "special", "ascending"):  # rows past 8192 columns: the sampled bracket
            out.append(Case("topk", f"{dt}-K2048-R20-C13000", _topk(20, 13000, 2048, dt, "edges")))
        for dt in ("lsb10", "special"):  # and as many rows as the CUDA kernel's many-row launch takes
            out.append(Case("topk", f"{dt}-K2048-R1024-C13000", _topk(1024, 13000, 2048, dt, "edges")))
        out.append(Case("topk", "K2048-R8-C200000", _topk(8, 200_000, 2048, "randn", "full")))
        for r, c, kk in (
            (64, 8192, 512),
            (128, 32768, 1024),
            (256, 16384, 2048),
            (256, 32768, 2048),
            (4096, 8192, 2048),
            (2048, 32768, 2048),
            (4096, 32768, 2048),
        ):
            target = {"pct_hbm_min": 0.30} if (r, c) in ((256, 32768), (4096, 32768)) else None
            out.append(
                Case("topk", f"bench-R{r}-C{c}-K{kk}", _topk(r, c, kk, "randn", "full"), bench=True, target=target)
            )
    return out


# ---------------------------------------------------------------- routing
def _route(t, e, topk, data: str, *, hashed=False, vocab=1000, scale=1.5):
    def build(device, g):
        x = _randn(g, t, e, device=device) * 2
        if data == "ties":
            x = (x * 2).round() / 2
        elif data == "negative":
            x = x - 50.0
        elif data == "special" and t:
            x[0] = float("-inf")
            x[1 % t, :3] = float("nan")
            x[2 % t, :7] = 25.0
            x[3 % t, 5] = float("inf")
        bias = torch.rand(e, generator=g, device=device) * 0.1
        if data == "ties":  # exact ties in s + bias: quantised logits, one bias for all experts
            bias = torch.full((e,), 0.5, device=device)
        if data == "bigbias":
            bias = bias + 8.08
        args = {"logits": x, "bias": bias, "route_scale": scale, "topk": topk, "input_ids": None, "tid2eid": None}
        if hashed:
            table = torch.randint(0, e, (vocab, topk), generator=g, device=device, dtype=torch.int32)
            table[3, 1] = table[3, 0]  # duplicate expert inside one row
            table[4, 2] = e  # entries outside [0, E)
            table[5, 0] = -7
            ids = torch.randint(0, vocab, (t,), generator=g, device=device)
            edge = torch.tensor([-1, 0, vocab - 1, vocab, 2**31 - 1, 3, 4, 5], device=device)
            ids[: min(t, edge.numel())] = edge[: min(t, edge.numel())]
            args.update(bias=None, input_ids=ids.long(), tid2eid=table)
        return args

    return build


def routing_cases(scale: str) -> list[Case]:
    """Routing grid: T in {0, 1, small}, E in {256, 384, other}, ties, huge bias, very negative, NaN/inf and
    > 20 logits, hash layers with ids at/beyond the vocab edge and bad table entries."""
    t = 7 if scale == "ci" else 300
    es = (16, 64) if scale == "ci" else (256, 384)
    out = []
    for e in es:
        for data in ("randn", "ties", "negative", "special", "bigbias"):
            out.append(Case("routing", f"{data}-T{t}-E{e}", _route(t, e, 6, data)))
        out.append(Case("routing", f"hash-T{t}-E{e}", _route(t, e, 6, "randn", hashed=True), frozenset({"hash"})))
    out += [
        Case("routing", "T0", _route(0, es[0], 6, "randn")),
        Case("routing", "T1", _route(1, es[0], 6, "randn")),
        Case("routing", f"top8-T{t}-E{es[0] + 8}", _route(t, es[0] + 8, 8, "randn"), frozenset({"fallback"})),
    ]
    if scale == "full":
        out += [
            Case(
                "routing",
                "bench-T8192-E256-top6",
                _route(8192, 256, 6, "randn"),
                bench=True,
                target={"max_us": 10.0, "min_speedup": 5.0},
            ),
            Case("routing", "bench-T8192-E384-top6", _route(8192, 384, 6, "randn", scale=2.5), bench=True),
            Case(
                "routing",
                "bench-hash-T8192-E256",
                _route(8192, 256, 6, "randn", hashed=True, vocab=129280),
                frozenset({"hash"}),
                bench=True,
            ),
        ]
    return out


# ---------------------------------------------------------------- mHC
def _mhc(t, d, kind: str, *, post: bool, n=4, iters=20):
    def build(device, g):
        x = _randn(g, t, n, d, device=device)
        if kind == "zero-row" and t:
            x[0] = 0.0
        if kind == "nan-row" and t:
            x[t // 2, 1, 3] = float("nan")
        x = x.bfloat16()
        mixc = (2 + n) * n
        fn = _randn(g, mixc, n * d, device=device) * (n * d) ** -0.5
        scale = torch.rand(3, generator=g, device=device) + 0.5
        if kind == "saturated":  # mix logits around ±1e4: softmax one-hot, slow Sinkhorn
            scale = torch.tensor([1.0, 1.0, 1e4], device=device)
        base = _randn(g, mixc, device=device) * 0.1
        if not post:
            return {"x": x, "fn": fn, "scale": scale, "base": base, "iters": iters, "hc_eps": 1e-6, "rms_eps": 1e-6}
        comb = torch.rand(t, n, n, generator=g, device=device)
        return {
            "x": _randn(g, t, d, device=device).bfloat16(),
            "residual": x,
            "post": 2 * torch.rand(t, n, generator=g, device=device),
            "comb": comb / comb.sum(1, keepdim=True),
        }

    return build


def mhc_pre_cases(scale: str) -> list[Case]:
    """hc_pre grid: T in {0, 1, 13, 37/137}, d % 256 != 0, iters = 1, saturated mix, zero and NaN rows."""
    d = 96 if scale == "ci" else 4096
    t = 37 if scale == "ci" else 137
    out = [
        Case("mhc_pre", f"{k}-T{tt}-d{d}", _mhc(tt, d, k, post=False))
        for k, tt in (
            ("randn", t),
            ("randn", 1),
            ("randn", 0),
            ("randn", 13),
            ("zero-row", t),
            ("nan-row", t),
            ("saturated", t),
        )
    ]
    out.append(Case("mhc_pre", f"iters1-T{t}-d{d}", _mhc(t, d, "randn", post=False, iters=1)))
    if scale == "full":
        out.append(Case("mhc_pre", "T137-d7168", _mhc(137, 7168, "randn", post=False)))
        out.append(
            Case(
                "mhc_pre", "bench-T137-d4096", _mhc(137, 4096, "randn", post=False), bench=True, target={"max_us": 30.0}
            )
        )
        out.append(
            Case(
                "mhc_pre",
                "bench-T8192-d4096",
                _mhc(8192, 4096, "randn", post=False),
                bench=True,
                target={"pct_hbm_min": 0.50},
            )
        )
    return out


def mhc_post_cases(scale: str) -> list[Case]:
    """hc_post grid: T in {0, 1, small}, d % 256 != 0, a NaN in the residual."""
    d = 96 if scale == "ci" else 7168
    out = [
        Case("mhc_post", f"{k}-T{t}-d{d}", _mhc(t, d, k, post=True))
        for k, t in (("randn", 37), ("randn", 1), ("randn", 0), ("nan-row", 13))
    ]
    if scale == "full":
        out.append(Case("mhc_post", "bench-T8192-d4096", _mhc(8192, 4096, "randn", post=True), bench=True))
    return out


ALL_CASES = {
    "prefill": prefill_cases,
    "decode": decode_cases,
    "topk": topk_cases,
    "routing": routing_cases,
    "mhc_pre": mhc_pre_cases,
    "mhc_post": mhc_post_cases,
}
