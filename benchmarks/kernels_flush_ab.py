"""What the timing harness's L2 flush costs the kernel timed after it: each benchmark shape (and a bare read of its
bytes) timed after a dirty flush and after a clean one, side by side in one run, with the ratio.

The suite times with ``triton.testing.do_bench``, which zeroes a 256 MB buffer before every repetition. That
leaves the L2 (60 MB on an H200) full of dirty lines, so the timed kernel's first reads (up to the L2's size) also write
those lines back to HBM. A clean flush reads the same buffer instead (its lines stay clean: evicting them writes
nothing). Both flushes here run in one loop (CUDA-graph replay, events around the replay only, median of the
repetitions); the suite's own number (do_bench) is printed beside them.

Usage: python benchmarks/kernels_flush_ab.py --out FILE.json [--reps N]
Needs torch with CUDA and triton.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from ds4kernels import sweep
from ds4kernels.bench import _graphed, _time_us, case_cost
from ds4kernels.common import H200
from ds4kernels.grid import _gen
from kernels_h200_probe import bare_read

CASES = {  # op (our entry point and grid: ds4kernels.sweep): the benchmark cases timed
    "topk": ("bench-R256-C32768-K2048", "bench-R4096-C32768-K2048"),
    "decode": ("bench-B32-n1-ctx8192", "bench-B64-n2-ctx32768"),
    "routing": ("bench-T8192-E256-top6",),
    "mhc_pre": ("bench-T137-d4096", "bench-T8192-d4096"),
}


@functools.cache
def _flush_buffer() -> torch.Tensor:
    """The 256 MB that either flush writes or reads (do_bench's size), allocated once."""
    return torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")


def time_after_flush(fn, flush: str, reps: int) -> float:
    """Median µs of one graph replay of ``fn`` after each flush of a 256 MB buffer.

    Args:
        flush: "dirty" (zero the buffer, as do_bench does) or "clean" (read it).
    """
    replay = _graphed(fn)
    cache = _flush_buffer()
    do_flush = cache.zero_ if flush == "dirty" else cache.sum
    times = []
    for i in range(reps + 5):
        do_flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        replay()
        end.record()
        end.synchronize()
        if i >= 5:  # warm-up
            times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def _row(what: str, fn, nbytes: float, reps: int) -> dict:
    dirty = time_after_flush(fn, "dirty", reps)
    clean = time_after_flush(fn, "clean", reps)
    suite = _time_us(fn, False, True)[0]
    row = {
        "what": what,
        "bytes": nbytes,
        "suite_us": suite,
        "dirty_us": dirty,
        "clean_us": clean,
        "dirty_over_clean": dirty / clean,
        "pct_hbm_dirty": nbytes / (dirty * 1e-6) / H200["hbm_bytes_per_s"],
        "pct_hbm_clean": nbytes / (clean * 1e-6) / H200["hbm_bytes_per_s"],
    }
    print(
        f"{what:34} suite {suite:8.1f} us  dirty flush {dirty:8.1f}  clean flush {clean:8.1f}"
        f"  ratio {dirty / clean:4.2f}x  % HBM {row['pct_hbm_dirty']:6.1%} -> {row['pct_hbm_clean']:6.1%}",
        flush=True,
    )
    return row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reps", type=int, default=100)
    args = parser.parse_args()
    rows = []
    for op, names in CASES.items():
        fn = sweep.TARGETS[op][0]
        cases = {c.name: c for c in sweep.CASES[op]("full")}
        for name in names:
            a = cases[name].build("cuda", _gen("cuda", 1))
            nbytes = case_cost(op, a).bytes
            rows.append(_row(f"{op} {name}", lambda fn=fn, a=a: fn(**a), nbytes, args.reps))
            rows.append(_row(f"  bare read of its {nbytes / 1e6:.1f} MB", bare_read(nbytes), nbytes, args.reps))
            del a
    result = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "l2_bytes": torch.cuda.get_device_properties(0).L2_cache_size,
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
