"""The CUDA top-k against an earlier version of itself, in one run on one GPU: the same output, bitwise, on the
whole top-k grid (ours with its float pass on and off), then each benchmark shape timed as the suite times ours
(CUDA-graph replay after do_bench's L2 flush, median), baseline and ours side by side with the ratio.

Usage: python benchmarks/kernels_topk_ab.py --baseline OLD.cu --out FILE.json [--same-set]
  OLD.cu: an earlier ``kernels/ds4kernels/topk_cuda.cu`` (e.g. ``git show REV:kernels/ds4kernels/topk_cuda.cu``)
  whose ``topk_per_row`` takes (logits, starts, ends, k) positionally, or also float_pass (given True) where that
  revision's binding has no default for it.
  --same-set: compare each row's indices as a set (sorted) instead of bitwise, for a version whose bracket differs:
  the order within a row follows the bracket (keys above it first), the set does not.
Needs torch with CUDA, nvcc and triton.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))

import torch
from ds4kernels import sweep
from ds4kernels.bench import _time_us
from ds4kernels.common import H200
from ds4kernels.grid import _gen
from ds4kernels.topk import topk_cost
from ds4kernels.topk_cuda import topk_per_row_cuda


def _baseline_call(old):
    """``old.topk_per_row`` as a call of (logits, starts, ends, k), whichever of the two signatures it has."""
    one = torch.zeros(1, 8, device="cuda"), torch.zeros(1, dtype=torch.int32, device="cuda")
    try:
        old.topk_per_row(one[0], one[1], one[1] + 8, 2)
    except TypeError:  # float_pass without a default
        return lambda *call: old.topk_per_row(*call, True)
    return old.topk_per_row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", type=Path, required=True, help="an earlier topk_cuda.cu")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--same-set", action="store_true", help="compare rows as sets, not bitwise")
    args = parser.parse_args()
    same = (lambda a, b: torch.equal(a.sort(1).values, b.sort(1).values)) if args.same_set else torch.equal
    from torch.utils.cpp_extension import load

    old = load(name="ds4kernels_topk_cuda_baseline", sources=[str(args.baseline)], extra_cuda_cflags=["-O3"])
    old_call = _baseline_call(old)
    cases = sweep.CASES["topk"]("full")
    equal = []
    for case in cases:
        a = case.build("cuda", _gen("cuda", 1))
        want = old_call(a["logits"], a["starts"], a["ends"], a["k"])
        for float_pass in (False, True):
            got = topk_per_row_cuda(a["logits"], a["starts"], a["ends"], a["k"], float_pass=float_pass)
            equal.append({"case": case.name, "float_pass": float_pass, "equal": bool(same(want, got))})
    n_bad = sum(not e["equal"] for e in equal)
    how = "as sets" if args.same_set else "bitwise"
    print(f"baseline == ours, {how}: {len(equal) - n_bad} of {len(equal)}", flush=True)
    rows = []
    for case in cases:
        if not case.bench and not case.name.startswith("K2048-R8-"):
            continue
        a = case.build("cuda", _gen("cuda", 1))
        call = (a["logits"], a["starts"], a["ends"], a["k"])
        t_old = _time_us(lambda call=call: old_call(*call), False, True)[0]
        t_key = _time_us(lambda call=call: topk_per_row_cuda(*call, float_pass=False), False, True)[0]
        t_new = _time_us(lambda call=call: topk_per_row_cuda(*call), False, True)[0]
        nbytes = topk_cost(a["starts"], a["ends"], a["k"]).bytes
        row = {
            "case": case.name,
            "baseline_us": t_old,
            "ours_key_pass_us": t_key,
            "ours_us": t_new,
            "baseline_over_ours": t_old / t_new,
            "ours_pct_hbm": nbytes / (t_new * 1e-6) / H200["hbm_bytes_per_s"],
        }
        rows.append(row)
        print(
            f"{case.name:28} baseline {t_old:8.1f} us  ours (key pass) {t_key:8.1f}  ours {t_new:8.1f}"
            f"  ratio {t_old / t_new:4.2f}x  {row['ours_pct_hbm']:.1%} of HBM",
            flush=True,
        )
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "compare": how,
        "equal": equal,
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=1))
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
