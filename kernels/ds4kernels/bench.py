"""Benchmarks with ``triton.testing.do_bench`` (median, L2 flushed before every iteration by its
256 MB cache clear), against the torch reference in the same run, placed on the H200 roofline."""

from __future__ import annotations

from typing import Any

import torch

from .common import FP8, H200, Cost
from .decode import decode_cost
from .mhc import mhc_post_cost, mhc_pre_cost
from .prefill import prefill_cost
from .routing import route_cost
from .topk import topk_cost


def case_cost(op: str, a: dict) -> Cost:
    """Bytes/FLOPs of one call of ``op`` on the canonical arguments ``a`` (spec page §1-4)."""
    if op == "prefill":
        m, h, d = a["q"].shape
        out_bytes = 2 if a["out_dtype"] == torch.bfloat16 else 4
        return prefill_cost(
            m, a["k"].shape[0], h, d, a["ks"], a["ke"], fp8=a["q"].dtype == FP8, clean=a["clean"], out_bytes=out_bytes
        )
    if op == "decode":
        return decode_cost(a["context_lens"], a["q"].shape[2], a["q"].shape[3])
    if op == "topk":
        return topk_cost(a["starts"], a["ends"], a["k"])
    if op == "mhc_pre":
        return mhc_pre_cost(*a["x"].shape)
    if op == "mhc_post":
        return mhc_post_cost(*a["residual"].shape)
    return route_cost(a["logits"].shape[0], a["logits"].shape[1], a["topk"], hashed=a["tid2eid"] is not None)


GRAPH_SAFE_REFS = frozenset({"topk", "routing", "mhc_pre", "mhc_post"})  # references with no host sync inside


def _graphed(fn):
    """Capture ``fn`` in a CUDA graph so replays time the GPU work without Python launch overhead."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay


def _time_us(fn, heavy: bool, graph: bool) -> tuple[float, str]:
    """Median µs over do_bench iterations; do_bench zeroes a 256 MB buffer before each one (L2 flush)."""
    import triton.testing

    mode = "eager"
    if graph:
        try:
            fn, mode = _graphed(fn), "graph"
        except Exception:  # a host sync inside (capture refused it): time it eagerly, and say so
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    warmup, rep = (25, 100) if not heavy else (5, 20)
    return 1e3 * float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median")), mode


def bench_case(op: str, name: str, impl_call, ref_call, a: dict, target: dict | None, graph_safe: bool = False) -> dict:
    """Time ours and the reference; derive bandwidth, TFLOP/s, % of roofline and the target verdict.

    Implementations and references without host syncs are timed as CUDA-graph replays (kernel time, as
    the roofline assumes); the others eagerly, launch overhead included (``timing`` says which).
    """
    cost = case_cost(op, a)
    t_us, mode = _time_us(lambda: impl_call(a), heavy=False, graph=graph_safe)
    ref_us, ref_mode = _time_us(lambda: ref_call(a), heavy=True, graph=op in GRAPH_SAFE_REFS)
    t = t_us * 1e-6
    roof = cost.roof_seconds()
    row: dict[str, Any] = {
        "op": op,
        "case": name,
        "time_us": t_us,
        "ref_time_us": ref_us,
        "speedup": ref_us / t_us,
        "bytes": cost.bytes,
        "flops": cost.flops,
        "gb_per_s": cost.bytes / t / 1e9,
        "tflop_per_s": cost.flops / t / 1e12,
        "roof_us": roof * 1e6,
        "pct_roof": roof / t,
        "pct_hbm": cost.bytes / t / H200["hbm_bytes_per_s"],
        "pct_hbm_achievable": cost.bytes / t / H200["hbm_achievable_bytes_per_s"],
        "pct_peak": (cost.flops / t / H200[f"{cost.peak}_flops"]) if cost.peak else None,
        "peak": cost.peak,
        "target": target or {},
        "timing": mode,
        "ref_timing": ref_mode,
    }
    flags = []
    if row["pct_roof"] > 1.0:
        flags.append("measurement-error: above 100% of roofline")
    if row["speedup"] < 1.0:
        flags.append("slower than the torch reference")
    misses = _target_misses(row, target or {})
    flags += misses
    row["target_met"] = None if not target else not misses
    row["flags"] = flags
    return row


def _target_misses(row: dict, target: dict) -> list[str]:
    misses = []
    if "pct_peak_min" in target and (row["pct_peak"] or 0.0) < target["pct_peak_min"]:
        misses.append(f"target: {row['pct_peak']:.1%} of {row['peak']} peak < {target['pct_peak_min']:.0%}")
    if "pct_hbm_min" in target and row["pct_hbm"] < target["pct_hbm_min"]:
        misses.append(f"target: {row['pct_hbm']:.1%} of HBM < {target['pct_hbm_min']:.0%}")
    if "max_us" in target and row["time_us"] > target["max_us"]:
        misses.append(f"target: {row['time_us']:.1f} us > {target['max_us']} us")
    if "min_speedup" in target and row["speedup"] < target["min_speedup"]:
        misses.append(f"target: {row['speedup']:.1f}x < {target['min_speedup']}x vs reference")
    return misses
