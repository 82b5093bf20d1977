"""Probe on a GPU, in one run: the timing harness's own floor (an empty kernel, and a streaming read of the
benchmark shapes' byte counts, timed exactly as the suite times ours), then candidate kernel variants on the
benchmark shapes, each checked against the op's default config before it is timed.

Usage: python benchmarks/kernels_h200_probe.py --out DIR [--ops topk,...] [--grid] [--floor-only]
Prints one line per measurement and writes DIR/probe.json. Needs torch with CUDA and triton.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))

import torch
import triton
import triton.language as tl
from ds4kernels import suite, sweep
from ds4kernels.adapters import Impl
from ds4kernels.bench import _time_us
from ds4kernels.common import H200


@triton.jit
def _empty_kernel(out_ptr):
    tl.store(out_ptr + tl.program_id(0), 0.0)


@triton.jit
def _read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * (BLOCK * ITERS)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(ITERS):
        offs = base + i * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0))


def bare_read(nbytes: float):
    """A call that streams ``nbytes`` of fp32 from a fresh CUDA buffer (``_read_kernel``: one partial sum per
    8192 elements); the buffer lives as long as the call."""
    n = int(nbytes // 4)
    x = torch.randn(n, device="cuda")
    part = torch.empty(triton.cdiv(n, 1024 * 8), device="cuda")

    def read() -> None:
        _read_kernel[(part.numel(),)](x, part, n, BLOCK=1024, ITERS=8)

    return read


def harness_floor() -> list[dict]:
    """The empty kernel and a streaming read of each benchmark's compulsory bytes (fp32), graph-replayed
    after do_bench's L2 flush: what the harness allows at that size."""
    out = torch.empty(1 << 20, device="cuda")
    rows = [{"what": "empty kernel", "bytes": 0, "time_us": _time_us(lambda: _empty_kernel[(1,)](out), False, True)[0]}]
    sizes = {
        "routing T8192 E256": 8.4e6,
        "decode B32 ctx8K": 35.7e6,
        "decode B64 ctx8K": 71.6e6,
        "decode B64 ctx32K": 286e6,
        "mhc_pre T8192 (one read of X + y)": 337e6,
        "mhc_pre T8192 (two reads of X + y)": 604e6,
        "topk R256 C32768": 35.7e6,
        "topk R4096 C32768": 570e6,
    }
    for what, nbytes in sizes.items():
        t = _time_us(bare_read(nbytes), False, True)[0]
        rows.append(
            {
                "what": f"read {what}",
                "bytes": nbytes,
                "time_us": t,
                "pct_hbm": nbytes / (t * 1e-6) / H200["hbm_bytes_per_s"],
            }
        )
    return rows


PLAN = {  # candidate variants, each timed beside the first (the kernel the candidate would replace)
    "topk": (
        [
            {"IMPL": "triton"},
            {"IMPL": "cuda", "FLOAT": False},
            {"IMPL": "cuda"},
        ],
        (
            "bench-R256-C32768-K2048",
            "bench-R4096-C32768-K2048",
            "bench-R2048-C32768-K2048",
            "bench-R4096-C8192-K2048",
            "bench-R256-C16384-K2048",
            "bench-R128-C32768-K1024",
            "bench-R64-C8192-K512",
            "K2048-R8-C200000",
        ),
    ),
}


def grid_check(op: str, configs: list[dict]) -> list[dict]:
    """Every case of the op's full grid with each candidate config, as the suite checks its own kernels
    (the reference and check, bitwise equal on a second call)."""
    fn = sweep.TARGETS[op][0]
    rows = []
    for cfg in configs:
        impl = Impl(json.dumps(cfg), lambda a, cfg=cfg: fn(**a, config=dict(cfg)), graph_safe=True)
        for case in sweep.CASES[op]("full"):
            try:
                result, _ = suite.run_case(case, impl, "cuda", repeats=1, seed=1)
                ok, detail = result["status"] == "pass", result["detail"]
            except Exception as exc:  # a candidate that fails is a result of the check
                ok, detail = False, f"{type(exc).__name__}: {str(exc)[:300]}"
            rows.append({"op": op, "case": case.name, "config": cfg, "ok": ok, "detail": detail})
    return rows


def topk_pass_agreement(trials: int = 300, seed: int = 0) -> dict:
    """The CUDA top-k's float pass against its key pass on random adversarial rows: both must give the same
    output, bitwise (same keys above the bracket, same gathered keys, same lowest-index ties). Rows mix
    +-0, denormals, +-inf, NaN, heavy ties and wide exponents, at both launch shapes."""
    from ds4kernels.topk_cuda import topk_per_row_cuda

    gen = torch.Generator().manual_seed(seed)
    kinds = ("randn", "denormal", "zeros", "ties", "inf", "nan", "negative", "wide", "ascending")
    bad = []
    for trial in range(trials):
        kind = kinds[trial % len(kinds)]
        many = trial % 10 == 0
        rows = 1024 if many else int(torch.randint(1, 48, (1,), generator=gen))
        cols = int(torch.randint(4200, 40000 if not many else 32768, (1,), generator=gen))
        k = [1, 7, 64, 512, 2048][int(torch.randint(0, 5, (1,), generator=gen))]
        x = torch.randn(rows, cols, generator=gen)
        if kind == "denormal":
            x = x * 1e-40
        elif kind == "zeros":  # mostly +-0, a few of either sign around them
            x = torch.where(torch.rand(rows, cols, generator=gen) < 0.9, torch.sign(x) * 0.0, x * 1e-3)
        elif kind == "ties":
            x = torch.randint(-3, 4, (rows, cols), generator=gen).float()
        elif kind == "inf":
            x[torch.rand(rows, cols, generator=gen) < 0.05] = float("inf")
            x[torch.rand(rows, cols, generator=gen) < 0.05] = float("-inf")
        elif kind == "nan":
            x[torch.rand(rows, cols, generator=gen) < 0.03] = float("nan")
        elif kind == "negative":
            x = -x.abs() - 1.0
        elif kind == "wide":
            x = x * torch.exp2(torch.randint(-126, 127, (rows, cols), generator=gen).float())
        elif kind == "ascending":
            x = torch.arange(cols).float().expand(rows, cols).contiguous() - cols / 2
        starts = torch.randint(0, 64, (rows,), generator=gen).int()
        ends = (cols - torch.randint(0, 64, (rows,), generator=gen)).int()
        x, starts, ends = x.cuda(), starts.cuda(), ends.cuda()
        got = topk_per_row_cuda(x, starts, ends, k, float_pass=True)
        want = topk_per_row_cuda(x, starts, ends, k, float_pass=False)
        if not torch.equal(got, want):
            bad.append({"trial": trial, "kind": kind, "rows": rows, "cols": cols, "k": k})
    return {"trials": trials, "bad": bad}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ops", default="")
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument("--floor-only", action="store_true", help="only the harness floor, no variants")
    parser.add_argument("--grid", action="store_true", help="first check each candidate on the op's whole grid")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    if not args.no_floor:
        result["floor"] = harness_floor()
        for r in result["floor"]:
            print(f"floor {r['what']:42} {r['time_us']:8.1f} us {r.get('pct_hbm', 0):6.1%}", flush=True)
    ops = [] if args.floor_only else [o for o in args.ops.split(",") if o] or list(PLAN)
    start = time.time()
    rows = []
    for op in ops if args.grid else []:
        checked = grid_check(op, PLAN[op][0])
        result.setdefault("grid", []).extend(checked)
        for r in checked:
            verdict = "ok" if r["ok"] else "BAD " + r["detail"]
            print(f"grid {r['op']:8} {r['case']:28} {json.dumps(r['config']):40} {verdict}")
        print(f"grid {op}: {sum(r['ok'] for r in checked)} of {len(checked)} ok", flush=True)
    if args.grid and "topk" in ops:
        result["topk_pass_agreement"] = agree = topk_pass_agreement()
        print(
            f"topk float pass == key pass, bitwise: {agree['trials'] - len(agree['bad'])} of {agree['trials']}"
            f" trials; differing: {agree['bad'][:5]}",
            flush=True,
        )
    for op in ops:  # one op at a time, so that a crash leaves the others' rows printed
        part = sweep.run_sweep([op], plan=PLAN)
        rows += part
        for r in part:
            t = "-" if r["time_us"] is None else f"{r['time_us']:8.1f}"
            verdict = "ok" if r["ok"] else "BAD " + r["detail"]
            print(f"{r['op']:8} {r['case']:24} {json.dumps(r['config']):110} {t} us {verdict}", flush=True)
        (args.out / "probe.json").write_text(json.dumps({**result, "rows": rows}, indent=1))
    print(f"probe took {time.time() - start:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
