"""A Triton op of ds4kernels against an earlier version of itself, in one run on one GPU: on every benchmark
case of the op, the earlier module (with the tuned configs of its own revision) and ours (with ours) are
checked against each other and timed as the suite times ours (CUDA-graph replay after do_bench's L2 flush,
median), side by side with the ratio.

Usage: python benchmarks/kernels_ab.py --op decode --baseline OLD.py --baseline-tuned OLD.json --out FILE.json
  OLD.py: an earlier ``kernels/ds4kernels/<op>.py`` (``git show REV:kernels/ds4kernels/decode.py``), imported as
      a module of the ds4kernels package (its relative imports resolve to today's common helpers).
  OLD.json: the tuned-config file of the same revision (``git show REV:kernels/ds4kernels/tuned/NVIDIA_H200.json``).
Ops: decode (``paged_mqa_logits``), prefill (``mqa_logits``). Needs torch with CUDA and triton. Exit 1 when a
case's outputs disagree.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))

import torch
import triton
from ds4kernels import decode, prefill, sweep
from ds4kernels.bench import _time_us, case_cost
from ds4kernels.check import CHECKS
from ds4kernels.grid import _gen

#: op -> (our module, entry point, tuned-bucket function, its arguments from a case's inputs)
OPS = {
    "decode": (
        decode,
        "paged_mqa_logits",
        "decode_key",
        lambda a: (a["q"].shape[0], a["q"].shape[1], a["max_context_len"]),
    ),
    "prefill": (prefill, "mqa_logits", "prefill_key", lambda a: (a["q"].dtype,)),
}


def load_baseline(op: str, path: Path):
    """``path`` imported as ``ds4kernels._baseline_<op>`` (so that ``from .common import ...`` works)."""
    spec = importlib.util.spec_from_file_location(f"ds4kernels._baseline_{op}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not a Python module; pass an earlier kernels/ds4kernels/{op}.py")
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "ds4kernels"
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--op", choices=sorted(OPS), required=True)
    parser.add_argument("--baseline", type=Path, required=True, help="an earlier kernels/ds4kernels/<op>.py")
    parser.add_argument("--baseline-tuned", type=Path, required=True, help="the tuned-config file of that revision")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    ours_mod, entry, key_fn, key_args = OPS[args.op]
    old_mod = load_baseline(args.op, args.baseline)
    old_tuned = json.loads(args.baseline_tuned.read_text()).get(args.op, {})
    ours, old = getattr(ours_mod, entry), getattr(old_mod, entry)
    rows, n_bad = [], 0
    for case in sweep.CASES[args.op]("full"):
        if not case.bench:
            continue
        a = case.build("cuda", _gen("cuda", 1))
        key = getattr(old_mod, key_fn)(*key_args(a))
        if key not in old_tuned:
            raise SystemExit(f"{args.baseline_tuned}: no {args.op} config for bucket {key!r}; pass its revision's file")
        old_cfg = dict(old_tuned[key])
        want = sweep._in_range(args.op, old(**a, config=dict(old_cfg)), a)
        verdict = CHECKS[args.op](ours(**a), want, a, False)
        n_bad += not verdict["ok"]
        t_old = _time_us(lambda a=a, c=old_cfg: old(**a, config=dict(c)), False, True)[0]
        t_new = _time_us(lambda a=a: ours(**a), False, True)[0]
        roof_us = case_cost(args.op, a).roof_seconds() * 1e6
        row = {
            "case": case.name,
            "bucket": key,
            "baseline_config": old_cfg,
            "baseline_us": t_old,
            "ours_us": t_new,
            "baseline_over_ours": t_old / t_new,
            "baseline_pct_roof": roof_us / t_old,
            "ours_pct_roof": roof_us / t_new,
            "agree": verdict["ok"],
            "detail": verdict["detail"],
        }
        rows.append(row)
        print(
            f"{case.name:28} baseline {t_old:8.1f} us ({row['baseline_pct_roof']:.1%})  ours {t_new:8.1f} us"
            f" ({row['ours_pct_roof']:.1%})  ratio {row['baseline_over_ours']:4.2f}x"
            f"  {'agree' if verdict['ok'] else 'DISAGREE ' + verdict['detail']}",
            flush=True,
        )
        del a, want
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "op": args.op,
        "baseline": str(args.baseline),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
