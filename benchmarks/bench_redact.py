"""Cost of the one redaction per output line: the hand-written rules alone (baseline) against the full rule
set (hand rules plus detect-secrets' plugins, PEM blocks and entropy rules, ds4sync.core.secretrules).

Lines are shaped like a vLLM build log and a pytest run (no secret in them: the common case is the cost that
matters, every child line goes through it). Prints µs per line for both and the ratio.

    PYTHONPATH=. python benchmarks/bench_redact.py [--lines N]
"""

from __future__ import annotations

import argparse
import time

from ds4sync.core import redact

LINES = (
    "[123/456] Building CUDA object CMakeFiles/_C.dir/csrc/attention/paged_attention_v1.cu.o",
    "-- Building scaled_mm_c3x_sm120 for archs: 12.0a",
    "INFO 06-15 12:00:00 [model_runner.py:123] Loading weights took 12.3 GB and 45.6 seconds",
    "tests/kernels/test_moe.py::test_fused_moe[dtype0-64-128-8-2] PASSED                  [ 12%]",
    "E   AssertionError: assert torch.allclose(out, ref, atol=1e-2)",
    "---------------Inter-token Latency----------------",
    '  File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", line 1736, in _call_impl',
    "max_num_batched_tokens=8192 max_model_len=4096 tokenizer=deepseek-ai/DeepSeek-V4-Flash",
)


def _baseline(text: str) -> str:
    """The hand-written rules only (what redaction was before the detector's rule set)."""
    for value in redact.secret_values():
        text = text.replace(value, redact.SECRET)
    for pattern, replacement in redact._SECRETS:
        text = pattern.sub(replacement, text)
    return redact._TOKEN_USERINFO_RE.sub(rf"\1{redact.SECRET}@", text)


def _per_line_us(fn, lines: list[str]) -> float:
    start = time.perf_counter()
    for line in lines:
        fn(line)
    return (time.perf_counter() - start) / len(lines) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=20_000)
    args = parser.parse_args()
    lines = [LINES[i % len(LINES)] for i in range(args.lines)]
    redact.redact_secrets(lines[0])  # load the detector's plugins once, outside the timing
    rounds = [(_per_line_us(_baseline, lines), _per_line_us(redact.redact_secrets, lines)) for _ in range(3)]
    base = min(r[0] for r in rounds)
    ours = min(r[1] for r in rounds)
    print(f"lines: {args.lines} (best of 3 rounds, interleaved)")
    print(f"baseline (hand rules):        {base:8.1f} µs/line")
    print(f"ours (plus detector + shapes): {ours:8.1f} µs/line")
    print(f"ratio ours/baseline: {ours / base:.2f}x")


if __name__ == "__main__":
    main()
