"""Numerics checks per op against the torch references: calc_diff, exact masks, top-k set/value
invariants, routing ids and weights; bitwise determinism over repeated calls."""

from __future__ import annotations

import torch

from .common import bitwise_equal, calc_diff
from .decode import paged_mqa_logits_ref
from .mhc import mhc_post_ref, mhc_pre_ref
from .prefill import mqa_logits_ref
from .routing import route_ref, route_weights_ref, scores_ref
from .topk import topk_per_row_ref

REFERENCES = {
    "prefill": lambda a: mqa_logits_ref(**a),
    "decode": lambda a: paged_mqa_logits_ref(**a),
    "topk": lambda a: topk_per_row_ref(**a),
    "routing": lambda a: route_ref(**a),
    "mhc_pre": lambda a: mhc_pre_ref(**a),
    "mhc_post": lambda a: mhc_post_ref(**a),
}


def _logits_check(out: torch.Tensor, ref: torch.Tensor, *, clean: bool, tol: float) -> dict:
    valid = torch.isfinite(ref)
    if out.shape != ref.shape:
        return {"ok": False, "detail": f"shape {tuple(out.shape)} != {tuple(ref.shape)}"}
    diff = calc_diff(out.float()[valid], ref.float()[valid]) if bool(valid.any()) else 0.0
    problems = []
    if not diff < tol:  # also catches NaN
        problems.append(f"calc_diff {diff:.3g} >= {tol:g}")
    if bool((~torch.isfinite(out.float()[valid])).any()):
        problems.append("non-finite logits inside the ranges")
    if clean and not torch.equal(torch.isneginf(out.float()), torch.isneginf(ref.float())):
        problems.append("-inf mask differs from the reference")
    return {"ok": not problems, "metric": diff, "tolerance": tol, "detail": "; ".join(problems)}


def check_prefill(out, ref, args, clean: bool) -> dict:
    """calc_diff over in-range entries (< 5e-6 fp32 logits, < 3e-5 bf16), exact -inf masks when clean."""
    tol = 3e-5 if args["out_dtype"] == torch.bfloat16 else 5e-6
    return _logits_check(out, ref, clean=clean and args.get("clean", True), tol=tol)


def check_decode(out, ref, args, clean: bool) -> dict:
    """calc_diff over j < L (< 5e-6), exact -inf for j >= L when the implementation is clean."""
    return _logits_check(out, ref, clean=clean, tol=5e-6)


def check_topk(out, ref, args, clean: bool) -> dict:
    """Per row: count = min(K, L), no duplicates, -1 elsewhere, indices in [0, L), and the gathered
    values equal torch.topk's exactly as sorted multisets (ties may pick different indices)."""
    x, starts, ends, k = args["logits"], args["starts"].long(), args["ends"].long(), args["k"]
    if out.shape != ref.shape or out.dtype != torch.int32:
        return {"ok": False, "detail": f"output {tuple(out.shape)} {out.dtype}, want {tuple(ref.shape)} int32"}
    lengths = (ends - starts).clamp(min=0)
    valid = out >= 0
    count_ok = torch.equal(valid.sum(1), torch.minimum(lengths, torch.tensor(k, device=x.device)))
    in_bounds = bool(((out < lengths[:, None]) | ~valid).all())
    srt = out.sort(1).values
    dup = bool(((srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)).any()) if k > 1 else False
    compact = bool((valid.long().diff(dim=1) <= 0).all()) if k > 1 else True
    problems = [
        p
        for p, bad in (
            ("count != min(K, L)", not count_ok),
            ("index outside [0, L)", not in_bounds),
            ("duplicate indices", dup),
            ("-1 before a valid index", not compact),
        )
        if bad
    ]
    if not problems and out.numel():
        cols = (starts[:, None] + out.long().clamp(min=0)).clamp(max=max(x.shape[1] - 1, 0))
        ref_cols = (starts[:, None] + ref.long().clamp(min=0)).clamp(max=max(x.shape[1] - 1, 0))
        big = float(torch.finfo(torch.float32).max)
        got = torch.where(valid, x.gather(1, cols), -big).nan_to_num(nan=big).sort(1).values
        want = torch.where(ref >= 0, x.gather(1, ref_cols), -big).nan_to_num(nan=big).sort(1).values
        if not torch.equal(got, want):
            problems.append("selected values differ from torch.topk")
    return {"ok": not problems, "detail": "; ".join(problems)}


def check_routing(out, ref, args, clean: bool) -> dict:
    """Per row the set of ids equals the reference's (order is free; weights are paired with their ids),
    except where the sets differ only among near-ties of ``s + bias`` (within 1e-6, rounding of another
    implementation); sets that differ at exactly equal scores broke a tie away from the lowest expert id
    and fail. Weights within rtol 1e-5 / atol 1e-6 of the reference weights for the ids chosen; padding
    ids are -1 with weight 0."""
    ids, w = out
    rids = ref[0]
    if ids.shape != rids.shape or ids.dtype != torch.int32:
        return {"ok": False, "detail": f"ids {tuple(ids.shape)} {ids.dtype}, want {tuple(rids.shape)} int32"}
    if ids.numel() == 0:
        return {"ok": True, "detail": ""}
    e = args["logits"].shape[1]
    if bool(((ids < -1) | (ids >= e)).any()):
        return {"ok": False, "detail": "ids outside [0, E) ∪ {-1}"}
    s = scores_ref(args["logits"])
    problems = []
    rows = (ids.sort(1).values != rids.sort(1).values).any(1)  # the chosen sets differ (order is free)
    if bool(rows.any()):
        if args.get("tid2eid") is not None:
            problems.append(f"{int(rows.sum())} hash rows differ")
        else:
            sel = s + (args["bias"].float() if args["bias"] is not None else 0.0)
            sel = sel.nan_to_num(nan=-1e30)
            a = sel[rows].gather(1, ids[rows].long().clamp(min=0)).sort(1).values
            b = sel[rows].gather(1, rids[rows].long()).sort(1).values
            if torch.equal(a, b):
                problems.append(f"{int(rows.sum())} rows break exact ties away from the lowest expert id")
            elif not torch.allclose(a, b, rtol=1e-6, atol=1e-6):
                problems.append(f"{int(rows.sum())} rows select different experts (not near-ties)")
    want = route_weights_ref(s, ids, args["route_scale"])
    if not torch.allclose(w, want, rtol=1e-5, atol=1e-6, equal_nan=True):
        problems.append(f"weights off by {float((w - want).abs().nan_to_num(0).max()):.3g}")
    if bool((w[ids < 0] != 0).any()):
        problems.append("padding slot with a non-zero weight")
    return {"ok": not problems, "detail": "; ".join(problems)}


def _values_check(out: torch.Tensor, ref: torch.Tensor, tol: float, what: str) -> list[str]:
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return [f"{what}: {tuple(out.shape)} {out.dtype}, want {tuple(ref.shape)} {ref.dtype}"]
    nan = torch.isnan(ref)
    if not torch.equal(torch.isnan(out), nan):
        return [f"{what}: NaN positions differ"]
    diff = calc_diff(out[~nan].float(), ref[~nan].float()) if bool((~nan).any()) else 0.0
    return [] if diff < tol else [f"{what}: calc_diff {diff:.3g} >= {tol:g}"]


def check_mhc(out, ref, args, clean: bool) -> dict:
    """Each output against the reference: NaN positions equal, calc_diff < 1e-6 (fp32) / 1e-5 (bf16)."""
    outs, refs = (out, ref) if isinstance(out, tuple) else ((out,), (ref,))
    problems = []
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        problems += _values_check(o, r, 1e-5 if r.dtype == torch.bfloat16 else 1e-6, f"output {i}")
    if "comb" not in args and len(outs) == 3 and outs[2].numel() and bool((outs[2].nan_to_num(0) < 0).any()):
        problems.append("negative entries in C")
    return {"ok": not problems, "detail": "; ".join(problems)}


CHECKS = {
    "prefill": check_prefill,
    "decode": check_decode,
    "topk": check_topk,
    "routing": check_routing,
    "mhc_pre": check_mhc,
    "mhc_post": check_mhc,
}


def deterministic(fn, args: dict, first, repeats: int, keep: torch.Tensor | None = None) -> bool:
    """Whether ``repeats`` further calls return bitwise the same outputs as ``first``.

    ``keep`` (bool, output-shaped) limits the comparison to specified entries (unclean logits)."""

    def norm(x):
        x = x if isinstance(x, tuple) else (x,)
        return (
            tuple(torch.where(keep, t, torch.zeros((), dtype=t.dtype, device=t.device)) for t in x)
            if keep is not None
            else x
        )

    firsts = norm(first)
    for _ in range(repeats):
        again = norm(fn(args))
        if not all(bitwise_equal(a, b) for a, b in zip(firsts, again, strict=True)):
            return False
    return True
