"""Live A/B verdicts between real vLLM CPU servers: same vs same must never be a verdict, slowed must regress.

Starts three vLLM CPU servers on a tiny random Llama (written by tests/serving/make_tiny_llama.py):
two identical ones (A, A') and a slowed one (S: ``--max-num-seqs 1``), then runs ``--runs`` A/B
comparisons of A vs A' (both attached, the default confidence and pair rules of ``ds4sync ab``) and
``--slowed-runs`` of A vs S, and prints each verdict with the throughput row's mean change and interval.

    DS4SYNC_SERVING_PYTHON=.venv-serving/bin/python python benchmarks/bench_ab_live.py [--runs 10] [--pairs 3]

The three servers stay up for the whole session, so both sides of every A/B are equally warm; each
measured run still sends its own ``--num-warmups`` requests first.

Baseline vs ours: the same sessions are judged again, from the very same measurements, by the
verdict ds4sync had before (expanded percentile bootstrap of relative deltas, no minimum pairs),
re-implemented in benchmarks/bench_ab_stats.py.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from ds4sync.core.proc import run
from ds4sync.models.serving_settings import BenchConfig, BenchRow, ServerConfig
from ds4sync.serving.ab import run_ab
from ds4sync.serving.server import start_server, stop_server, wait_ready

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ab_stats import old_verdict

ROOT = Path(__file__).resolve().parents[1]
ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "OMP_NUM_THREADS": "2",
    "VLLM_SERVER_DEV_MODE": "1",
    # vLLM's CPU "auto" binding pins each server's OpenMP threads to the same cores (core 0 on a small
    # machine): two servers would share one core; let the OS spread them.
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
}


def _port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server(python: Path, model: Path, *extra: str) -> ServerConfig:
    """A vLLM CPU server config on a free port."""
    command = (
        *(str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model)),
        *("--served-model-name", "tiny", "--host", "{host}", "--port", "{port}", "--max-model-len", "2048"),
        *("--dtype", "float32", "--enforce-eager"),  # float32: see tests/serving/servinghelp.py; no torch.compile
        *extra,
    )
    return ServerConfig(command=command, port=_port(), model="tiny", env=ENV, startup_timeout_s=1800, stop_grace_s=20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--slowed-runs", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=8, help="prompts per measured run (concurrency 4)")
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument(
        "--warmup-runs", type=int, default=0, help="unmeasured runs per side and A/B (the servers stay up: 0 is fair)"
    )
    args = parser.parse_args()
    python = Path(os.environ.get("DS4SYNC_SERVING_PYTHON", ROOT / ".venv-serving" / "bin" / "python"))
    work = Path(tempfile.mkdtemp(prefix="bench-ab-live-"))
    model = work / "tiny"
    made = run([str(python), str(ROOT / "tests/serving/make_tiny_llama.py"), str(model)], cwd=work, timeout_s=600)
    assert made, made.output[-2000:]
    bench = BenchConfig(
        command=(str(python.parent / "vllm"), "bench", "serve"),
        tokenizer=str(model),
        metrics_interval_s=0.5,
        num_warmups=2,
        rows=(BenchRow(name="c4", input_len=16, output_len=args.output_len, num_prompts=args.prompts, concurrency=4),),
    )
    configs = {"A": server(python, model, "--max-num-seqs", "8")}
    if args.runs:
        configs["A'"] = server(python, model, "--max-num-seqs", "8")
    if args.slowed_runs:
        configs["S"] = server(python, model, "--max-num-seqs", "1")
    handles = {}
    start = time.monotonic()
    try:
        for name, config in configs.items():  # all three boot at once
            handles[name] = start_server(config, log_path=work / f"server-{name}.log")
        for name, handle in handles.items():
            wait_ready(handle, progress=lambda m: print(f"  . {m}", file=sys.stderr))
            print(f"server {name} ready after {handle.ready_s:.0f} s ({handle.url})", file=sys.stderr)
        plan = [("A", "A'")] * args.runs + [("A", "S")] * args.slowed_runs
        rng = random.Random(7)
        print(f"\n{'#':>2} {'baseline':<8} {'candidate':<9} {'verdict':<12} {'old verdict':<12} throughput mean [CI]")
        counts: dict[str, dict[str, int]] = {}
        for i, (a, b) in enumerate(plan):
            result = run_ab(
                [handles[a].url],
                [handles[b].url],
                pairs=args.pairs,
                out_dir=work / f"run{i:02d}",
                bench_config=bench,
                model="tiny",
                seed=1000 + i,
                warmup_runs=args.warmup_runs,
            )
            tok = next(r for r in result.rows if r.metric.endswith("output_throughput"))
            old = old_verdict(list(tok.baseline), list(tok.candidate), rng)
            key = "same" if b == "A'" else "slowed"
            counts.setdefault(key, {}).setdefault(result.verdict, 0)
            counts[key][result.verdict] += 1
            print(
                f"{i:>2} {a:<8} {b:<9} {result.verdict:<12} {old:<12} {tok.mean_delta_pct:+.1f}% "
                f"[{tok.ci_low_pct:+.1f}, {tok.ci_high_pct:+.1f}] at {100 * tok.confidence:.2f}% "
                f"({result.pairs} pairs; order {' '.join(result.order)})",
                flush=True,
            )
        print()
        for key, found in counts.items():
            print(f"{key}: " + ", ".join(f"{v} {k}" for k, v in sorted(found.items())))
    finally:
        for handle in handles.values():
            stop_server(handle)
    print(f"{time.monotonic() - start:.0f} s; logs and results under {work}")


if __name__ == "__main__":
    main()
