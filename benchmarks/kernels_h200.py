"""Run the kernel-check suite with benchmarks on a GPU and write JSON + markdown results.

Usage: python benchmarks/kernels_h200.py --out DIR [--sweep] [--ops prefill,decode,topk,routing]
Needs torch with CUDA and triton; no ds4sync install (the kernel tier is loaded by path).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))

from ds4kernels import common, report, suite, sweep


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sweep", action="store_true", help="also time the launch-config sweep")
    parser.add_argument("--no-suite", action="store_true")
    parser.add_argument("--ops", default="")
    parser.add_argument("--sweep-ops", default="", help="ops to sweep (default: --ops)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ops = [o for o in args.ops.split(",") if o] or None
    if args.sweep:
        start = time.time()
        rows = sweep.run_sweep([o for o in args.sweep_ops.split(",") if o] or ops)
        (args.out / "sweep.json").write_text(json.dumps(rows, indent=1))
        for r in rows:
            t = "-" if r["time_us"] is None else f"{r['time_us']:9.1f}"
            roof = "-" if r["pct_roof"] is None else f"{r['pct_roof']:.1%}"
            print(
                f"sweep {r['op']:8} {r['case']:28} {json.dumps(r['config']):70} {t} us {roof:>7} "
                f"{'ok' if r['ok'] else 'BAD ' + r['detail']}",
                flush=True,
            )
        print(f"sweep took {time.time() - start:.0f}s", flush=True)
        best = sweep.best_configs(rows)
        path = common.tuned_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file():  # ops not swept this time keep their tuned configs
            best = {**json.loads(path.read_text()), **best}
        path.write_text(json.dumps(best, indent=1, sort_keys=True) + "\n")
        (args.out / path.name).write_text(path.read_text())
        print(f"tuned configs -> {path.name}: {json.dumps(best)}", flush=True)
    if not args.no_suite:
        start = time.time()
        rep = suite.run_suite(ops, bench=True)
        rep["seconds"] = time.time() - start
        (args.out / "kernels_h200.json").write_text(json.dumps(rep, indent=1))
        md = report.markdown(rep)
        (args.out / "kernels_h200.md").write_text(md)
        print(md, flush=True)
        print(f"suite took {rep['seconds']:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
