"""Launch-configuration sweep on the benchmark shapes (GPU only): time each config, check it against
the default config's output, print the best. Used to pick the defaults in the ``*_config`` functions."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import torch

from . import decode, mhc, prefill, routing, topk
from .bench import _time_us, case_cost
from .check import CHECKS
from .grid import decode_cases, mhc_pre_cases, prefill_cases, routing_cases, topk_cases

PREFILL: list[dict[str, Any]] = [  # pointer loads, then each head's query tile by TMA pipelined STAGES deep
    *(
        dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)
        for bm, bn, w, s in (
            (64, 128, 4, 4),
            (64, 128, 4, 3),
            (64, 128, 4, 5),
            (128, 128, 8, 4),
            (64, 64, 4, 4),
            (64, 256, 8, 4),
        )
    ),
    *(
        dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=4, num_stages=3, LOAD="tma", STAGES=st)
        for bm, bn, st in ((64, 128, 2), (64, 128, 3), (128, 64, 3))
    ),
]
# pointer loads (any cache), then keys by TMA pipelined STAGES deep; SPLIT false: one [TILE, 2H] dot
DECODE: list[dict[str, Any]] = [
    *(
        dict(BLOCKS=b, TILE=64, HEAD_DOT=False, SPLIT=True, num_warps=4, num_stages=s)
        for b, s in ((8, 6), (16, 5), (32, 5), (64, 5))
    ),
    *(
        dict(BLOCKS=b, TILE=64, HEAD_DOT=False, SPLIT=sp, LOAD="tma", STAGES=st, num_warps=4, num_stages=3, **reg)
        for b, sp, st, reg in (
            (4, True, 3, {"maxnreg": 64}),
            (4, True, 3, {}),
            (8, True, 3, {}),
            (8, False, 3, {}),
            (16, False, 3, {}),
            (32, False, 3, {}),
            (64, False, 3, {}),
            (64, False, 4, {}),
            (64, False, 3, {"maxnreg": 128}),
        )
    ),
]
TOPK = [  # the sample-bracket kernel: one part per row (FUSED or not) or rows cut until PROGRAMS programs;
    # PRE: the bracket in a launch of its own (warps per row) instead of in every part
    dict(SAMPLE=True, BLOCK=b, num_warps=w, PROGRAMS=p, GROUPS=g, FUSED=f, PRE=pre)
    for b, w, p, g, f, pre in (
        (1024, 4, 0, 256, False, 0),
        (1024, 4, 0, 512, False, 0),
        (2048, 4, 0, 256, False, 0),
        (1024, 8, 0, 256, False, 0),
        (1024, 4, 0, 256, False, 1),
        (1024, 4, 0, 256, False, 4),
        (1024, 4, 0, 512, True, 4),
        (1024, 4, 512, 256, True, 0),
        (1024, 4, 1024, 256, True, 4),
        (1024, 4, 2048, 256, True, 4),
        (1024, 4, 2048, 256, True, 1),
        (512, 4, 2048, 256, True, 4),
        (1024, 4, 4096, 256, True, 4),
    )
]
MHC_PRE = [  # LOAD "tma": the mix stage's tiles by TMA (16-19% faster at T=137, a tie at T=8192; 2026-12-03)
    dict(SPLIT=sp, BLOCK_T=bt, BLOCK_K=bk, BT2=bt2, BLOCK_D=bd, num_warps=w, PRECISION=pr, num_stages=st)
    | ({"LOAD": "tma", "STAGES": tma} if tma else {})
    for sp, bt, bk, bt2, bd, w, pr, st, tma in (
        (0, 16, 128, 8, 256, 4, "tf32x2", 3, 0),
        (0, 16, 128, 8, 256, 4, "bf16x3", 3, 0),
        (4, 128, 64, 8, 256, 8, "bf16x3", 3, 0),
        (4, 128, 64, 8, 256, 8, "bf16x3", 2, 0),
        (4, 128, 64, 8, 256, 8, "bf16x3", 4, 0),
        (4, 128, 32, 8, 256, 8, "bf16x3", 4, 0),
        (4, 256, 32, 8, 256, 8, "bf16x3", 3, 0),
        (4, 256, 64, 8, 256, 8, "bf16x3", 2, 0),
        (3, 128, 64, 8, 256, 8, "bf16x3", 3, 0),
        (4, 128, 64, 8, 512, 8, "bf16x3", 3, 0),
        (0, 16, 128, 8, 256, 4, "tf32x2", 3, 3),
        (0, 16, 64, 8, 256, 4, "tf32x2", 3, 4),
        (0, 16, 128, 8, 256, 4, "bf16x3", 3, 3),
        (4, 128, 64, 8, 256, 8, "bf16x3", 4, 4),
    )
]
ROUTE = [dict(BLOCK_T=b, num_warps=w) for b, w in ((4, 1), (2, 1), (1, 1), (8, 1), (4, 2), (8, 2), (16, 4))]

#: op -> (the kernel, its candidate configs, the names of the cases a sweep times).
TARGETS: dict[str, tuple[Callable[..., Any], list[dict[str, Any]], tuple[str, ...]]] = {
    "prefill": (prefill.mqa_logits, PREFILL, ("bench-fp8-M4096-N32768", "bench-bf16-M4096-N32768")),
    "decode": (
        decode.paged_mqa_logits,
        DECODE,
        (
            "bench-B32-n1-ctx8192",
            "bench-B64-n1-ctx8192",
            "bench-B64-n1-ctx32768",
            "bench-B32-n2-ctx8192",
            "bench-B64-n2-ctx8192",
            "bench-B64-n2-ctx32768",
            "bench-B256-n2-ctx8192",
        ),
    ),
    "topk": (
        topk.topk_per_row,
        TOPK,
        ("bench-R256-C32768-K2048", "bench-R4096-C32768-K2048"),
    ),
    "mhc_pre": (mhc.mhc_pre, MHC_PRE, ("bench-T137-d4096", "T137-d7168", "bench-T8192-d4096")),
    "routing": (routing.route, ROUTE, ("bench-T8192-E256-top6", "bench-T8192-E384-top6", "bench-hash-T8192-E256")),
}
CASES = {
    "prefill": prefill_cases,
    "decode": decode_cases,
    "topk": topk_cases,
    "routing": routing_cases,
    "mhc_pre": mhc_pre_cases,
}


def run_sweep(ops=None, device: str = "cuda", *, plan: dict | None = None) -> list[dict]:
    """Time every config of every target case; returns rows (op, case, config, time_us, pct_roof, ok).

    ``plan`` maps op -> (configs, case names) in place of the built-in lists (a probe of new variants)."""
    rows = []
    for op in ops or (plan or TARGETS):
        fn, configs, names = TARGETS[op]
        if plan and op in plan:
            configs, names = plan[op]
        by_name = {c.name: c for c in CASES[op]("full")}
        for name in names:
            g = torch.Generator(device=device)
            g.manual_seed(1)
            args = by_name[name].build(device, g)
            base = _in_range(op, fn(**args), args)
            roof = case_cost(op, args).roof_seconds()
            key = tuning_key(op, args)
            for cfg in configs:
                try:
                    out = fn(**args, config=cfg)
                    verdict = CHECKS[op](out, base, args, False)
                    t, _ = _time_us(lambda cfg=cfg, fn=fn, a=args: fn(**a, config=cfg), heavy=False, graph=True)
                    t *= 1e-3
                    rows.append(
                        {
                            "op": op,
                            "case": name,
                            "key": key,
                            "config": cfg,
                            "time_us": t * 1e3,
                            "pct_roof": roof / (t * 1e-3),
                            "ok": verdict["ok"],
                            "detail": verdict["detail"],
                        }
                    )
                except Exception as exc:  # a config the compiler rejects is a result of the sweep
                    rows.append(
                        {
                            "op": op,
                            "case": name,
                            "key": key,
                            "config": cfg,
                            "time_us": None,
                            "pct_roof": None,
                            "ok": False,
                            "detail": f"{type(exc).__name__}: {str(exc)[:200]}",
                        }
                    )
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


def tuning_key(op: str, a: dict) -> str:
    """The tuned-config bucket a case falls in (the same keys the ``*_config`` functions look up)."""
    if op == "prefill":
        return prefill.prefill_key(a["q"].dtype)
    if op == "decode":
        return decode.decode_key(a["q"].shape[0], a["q"].shape[1], a["max_context_len"])
    if op == "topk":
        return "many" if a["logits"].shape[0] >= 1024 else "few"
    if op == "mhc_pre":
        return "small" if a["x"].shape[0] <= 1024 else "large"
    return routing.route_key(a["logits"].shape[0], a["logits"].shape[1], a["tid2eid"] is not None)


def best_configs(rows: list[dict]) -> dict:
    """Per op and key, the config with the least total time over that key's cases, among configs that
    were correct on all of them: the content of a ``tuned/<GPU>.json`` file."""
    totals: dict[tuple[str, str, str], list] = {}
    for r in rows:
        slot = totals.setdefault((r["op"], r["key"], json.dumps(r["config"], sort_keys=True)), [0.0, True])
        slot[0] += r["time_us"] or 0.0
        slot[1] = slot[1] and r["ok"] and r["time_us"] is not None
    best: dict[str, dict] = {}
    for (op, key, cfg), (_total, ok) in sorted(totals.items(), key=lambda kv: kv[1][0]):
        if ok and key not in best.setdefault(op, {}):
            best[op][key] = json.loads(cfg)
    return best
