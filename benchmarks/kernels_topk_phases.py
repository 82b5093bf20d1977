"""Where one block's time goes in the CUDA top-k: per-phase clocks of every block, for each benchmark shape.

Builds ``topk_cuda.cu`` (or ``--source``) with ``-DDS4_TOPK_PHASES``: thread 0 of each block stamps clock64 and
%globaltimer after a block barrier at each phase boundary (start, bracket done, pass over the row done, select
rounds done, end). Prints, per shape, each phase's median and 90th-percentile duration over blocks in µs (SM
cycles over the SM clock the two counters give), and the kernel's time as the suite measures it for the phased
build and for the shipped one side by side (the barriers the stamps add cost a little).

Usage: python benchmarks/kernels_topk_phases.py --out FILE.json [--source OTHER.cu]
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
from ds4kernels.grid import _gen
from ds4kernels.topk_cuda import SOURCE, topk_per_row_cuda

PHASES = ("bracket", "pass over the row", "select rounds", "write")


def phase_table(clocks: torch.Tensor, rows: int) -> dict:
    """Per-phase durations over the first ``rows`` blocks.

    Args:
        clocks: int64 [>= rows, 5, 2], (clock64, globaltimer ns) at the five boundaries (the extension's
            ``phase_clocks()``).
    Returns:
        {"sm_mhz": the SM clock, "phases": {name: {"median_us", "p90_us"}}, "block_us": median whole block,
        "span_us": first start to last end (globaltimer)}.
    """
    c = clocks[:rows, :, 0].double()
    ns = clocks[:rows, :, 1].double()
    whole_cycles = c[:, 4] - c[:, 0]
    whole_ns = ns[:, 4] - ns[:, 0]
    mhz = float((whole_cycles / whole_ns.clamp(min=1)).median()) * 1e3
    per = (c[:, 1:] - c[:, :-1]) / mhz  # µs
    phases = {
        name: {"median_us": float(per[:, i].median()), "p90_us": float(per[:, i].quantile(0.9))}
        for i, name in enumerate(PHASES)
    }
    return {
        "sm_mhz": mhz,
        "phases": phases,
        "block_us": float((whole_cycles / mhz).median()),
        "span_us": float((ns[:, 4].max() - ns[:, 0].min()) / 1e3),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--source", type=Path, default=SOURCE, help="a topk_cuda.cu to build with the phase stamps")
    args = parser.parse_args()
    from torch.utils.cpp_extension import load

    phased = load(
        name="ds4kernels_topk_cuda_phases",
        sources=[str(args.source)],
        extra_cuda_cflags=["-O3", "-DDS4_TOPK_PHASES"],
    )
    rows_out = []
    for case in sweep.CASES["topk"]("full"):
        if not case.bench:
            continue
        a = case.build("cuda", _gen("cuda", 1))
        call = (a["logits"], a["starts"], a["ends"], a["k"], True)
        want = topk_per_row_cuda(*call[:4])
        got = phased.topk_per_row(*call)
        if not torch.equal(want.sort(1).values, got.sort(1).values):  # sets: another source's bracket may differ
            print(f"{case.name}: the phased build picks other indices than the shipped kernel", flush=True)
            return 1
        for _ in range(3):
            phased.topk_per_row(*call)
        torch.cuda.synchronize()
        table = phase_table(phased.phase_clocks(), a["logits"].shape[0])
        t_phased = _time_us(lambda call=call: phased.topk_per_row(*call), False, True)[0]
        t_shipped = _time_us(lambda call=call: topk_per_row_cuda(*call[:4]), False, True)[0]
        row = {"case": case.name, "phased_us": t_phased, "shipped_us": t_shipped, **table}
        rows_out.append(row)
        parts = "  ".join(f"{n} {v['median_us']:.2f}/{v['p90_us']:.2f}" for n, v in table["phases"].items())
        print(
            f"{case.name:28} shipped {t_shipped:7.1f} us  phased {t_phased:7.1f} us  block {table['block_us']:6.2f} us"
            f"  span {table['span_us']:6.2f} us  @{table['sm_mhz']:.0f} MHz  (median/p90 us) {parts}",
            flush=True,
        )
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows_out}
    args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
