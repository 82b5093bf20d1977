"""Run the kernel-check suite in whatever Python environment has torch and triton (e.g. the fork's venv).

    python kernels/run_suite.py [--op prefill ...] [--candidate module:function[@adapter]] [--bench]
                                [--device cuda|cpu] [--json-out FILE] [--markdown-out FILE]

Without CUDA the Triton kernels run under the interpreter (TRITON_INTERPRET=1) on the small grid.
Exit status: 0 numerics in tolerance, 1 a case failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", action="append", default=[])
    parser.add_argument("--candidate")
    parser.add_argument("--bench", action="store_true")
    parser.add_argument("--device")
    parser.add_argument("--scale", choices=("ci", "full"))
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--markdown-out", type=Path)
    args = parser.parse_args(argv)
    import torch

    if (args.device or ("cuda" if torch.cuda.is_available() else "cpu")) == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ds4kernels import report, suite

    try:
        rep = suite.run_suite(
            ops=args.op or None,
            candidate=args.candidate,
            bench=args.bench,
            device=args.device,
            scale=args.scale,
            repeats=args.repeats,
        )
    except (ValueError, ImportError, AttributeError) as exc:
        print(f"kernel suite: {exc}", file=sys.stderr)
        return 2
    rep["candidate"] = args.candidate
    text = json.dumps(rep, indent=1)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(text)
    md = report.markdown(rep)
    if args.markdown_out:
        args.markdown_out.write_text(md)
    print(md)
    failed = any(c["status"] in ("fail", "error") for op in rep["ops"] for c in op["cases"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
