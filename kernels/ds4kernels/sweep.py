"""Launch-configuration sweep on the benchmark shapes (GPU only): time each config, check it against
the default config's output, print the best. Used to pick the defaults in the ``*_config`` functions."""

from __future__ import annotations

import torch

from . import decode, prefill, routing, topk
from .bench import _time_us, case_cost
from .check import CHECKS
from .grid import decode_cases, prefill_cases, routing_cases, topk_cases

PREFILL = [dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s) for bm, bn, w, s in
           ((64, 128, 4, 4), (64, 128, 4, 3), (64, 128, 4, 5), (128, 128, 8, 4), (64, 64, 4, 4), (64, 256, 8, 4))]
DECODE = [dict(BLOCKS=b, TILE=t, num_warps=w, num_stages=s) for b, t, w, s in
          ((8, 128, 4, 3), (8, 64, 4, 3), (16, 128, 4, 3), (4, 128, 4, 3), (8, 128, 8, 3), (16, 128, 4, 4),
           (8, 128, 4, 2))]
TOPK = [dict(BLOCK=b, num_warps=w) for b, w in ((4096, 16), (2048, 8), (1024, 4), (512, 2), (1024, 2))]
ROUTE = [dict(BLOCK_T=b, num_warps=w) for b, w in ((4, 2), (2, 1), (8, 2), (4, 1), (8, 4), (16, 4), (1, 1))]

TARGETS = {
    "prefill": (prefill.mqa_logits, PREFILL, ("bench-fp8-M4096-N32768", "bench-bf16-M4096-N32768")),
    "decode": (decode.paged_mqa_logits, DECODE, ("bench-B32-n1-ctx8192", "bench-B64-n1-ctx32768",
                                                 "bench-B64-n2-ctx32768", "bench-B256-n2-ctx8192")),
    "topk": (topk.topk_per_row, TOPK, ("bench-R128-C32768-K1024", "bench-R4096-C8192-K2048")),
    "routing": (routing.route, ROUTE, ("bench-T8192-E256-top6", "bench-T8192-E384-top6")),
}
CASES = {"prefill": prefill_cases, "decode": decode_cases, "topk": topk_cases, "routing": routing_cases}


def run_sweep(ops=None, device: str = "cuda") -> list[dict]:
    """Time every config of every target case; returns rows (op, case, config, time_us, pct_roof, ok)."""
    rows = []
    for op in ops or TARGETS:
        fn, configs, names = TARGETS[op]
        by_name = {c.name: c for c in CASES[op]("full")}
        for name in names:
            g = torch.Generator(device=device)
            g.manual_seed(1)
            args = by_name[name].build(device, g)
            base = _in_range(op, fn(**args), args)
            roof = case_cost(op, args).roof_seconds()
            for cfg in configs:
                try:
                    out = fn(**args, config=cfg)
                    verdict = CHECKS[op](out, base, args, False)
                    t, _ = _time_us(lambda cfg=cfg, fn=fn, a=args: fn(**a, config=cfg), heavy=False, graph=True)
                    t *= 1e-3
                    rows.append({"op": op, "case": name, "config": cfg, "time_us": t * 1e3,
                                 "pct_roof": roof / (t * 1e-3), "ok": verdict["ok"], "detail": verdict["detail"]})
                except Exception as exc:  # a config the compiler rejects is a result of the sweep
                    rows.append({"op": op, "case": name, "config": cfg, "time_us": None, "pct_roof": None,
                                 "ok": False, "detail": f"{type(exc).__name__}: {str(exc)[:200]}"})
            del args, base
    return rows


def _in_range(op: str, out, a: dict):
    """The default config's output, -inf outside each row's range (what the checks call specified)."""
    if op == "prefill":
        j = torch.arange(out.shape[1], device=out.device)[None, :]
        keep = (j >= a["ks"][:, None]) & (j < a["ke"][:, None])
    elif op == "decode":
        j = torch.arange(out.shape[1], device=out.device)[None, :]
        keep = j < a["context_lens"].reshape(-1, 1).clamp(min=0)
    else:
        return out
    return torch.where(keep, out.float(), float("-inf"))
