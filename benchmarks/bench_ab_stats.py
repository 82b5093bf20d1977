"""How often the A/B verdict is wrong: false alarms and misses for 2 % effects at 5 pairs.

Simulates interleaved A/B runs (A B, B A, ...) of a throughput metric with a known true
effect and realistic noise: 1 % run-to-run jitter (log-normal), a slow linear drift of the
machine across the session (0.5 % per run), and a 5 % chance per run of an outlier 4-8 %
slow (a background job, a thermal dip). Each trial is judged by ds4sync's verdict
(threshold 1 %, higher is better) with the expanded percentile bootstrap it ships and, side
by side, the same with a 20 %-trimmed mean of the paired deltas, and the plain percentile bootstrap.

    python benchmarks/bench_ab_stats.py [--trials 2000] [--pairs 5] [--seed 1]

False alarm: effect 0 judged improvement or regression. Miss: a +2 % (-2 %) effect not
judged improvement (regression). Wrong-way: a +2 % effect judged regression (or vice versa).
"""

from __future__ import annotations

import argparse
import math
import random
import time

from ds4sync.serving.abstats import MetricRule, compare_metric, interleaved_schedule

RULE = MetricRule(direction="higher", threshold_pct=1.0)
BASE_TOK_S = 295.0


def simulate(
    rng: random.Random, pairs: int, effect_pct: float, *, jitter_pct: float, drift_pct: float, outlier_p: float
) -> tuple[list[float], list[float]]:
    """One interleaved session: per-pair (baseline, candidate) tok/s with the given true effect."""
    a: list[float] = []
    b: list[float] = []
    for step, side in enumerate(interleaved_schedule(pairs)):
        level = BASE_TOK_S * (1 + drift_pct / 100 * step)
        if side == "B":
            level *= 1 + effect_pct / 100
        value = level * math.exp(rng.gauss(0, jitter_pct / 100))
        if rng.random() < outlier_p:
            value *= 1 - rng.uniform(0.04, 0.08)
        (a if side == "A" else b).append(value)
    return a, b


def rates(
    trials: int, pairs: int, effect_pct: float, method: str, seed: int, noise: dict, *, estimator: str = "mean"
) -> dict[str, float]:
    """Share of trials per verdict."""
    rng = random.Random(seed)
    counts = {"improvement": 0, "neutral": 0, "regression": 0, "inconclusive": 0}
    for i in range(trials):
        a, b = simulate(rng, pairs, effect_pct, **noise)
        row = compare_metric(
            "decode tok/s",
            a,
            b,
            RULE,
            seed=i,
            method=method,  # type: ignore[arg-type]
            estimator=estimator,
        )  # type: ignore[arg-type]
        counts[row.verdict] += 1
    return {k: v / trials for k, v in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jitter-pct", type=float, default=1.0)
    args = parser.parse_args()
    noise = {"jitter_pct": args.jitter_pct, "drift_pct": 0.5, "outlier_p": 0.05}
    print(f"{args.trials} simulated sessions per cell, {args.pairs} pairs, threshold 1 %, noise {noise}")
    print(f"{'method':<11} {'effect':>7} {'improve':>8} {'neutral':>8} {'regress':>8} {'inconcl':>8}  judged")
    for label, method, estimator in (
        ("expanded", "expanded", "mean"),
        ("exp+trim", "expanded", "trimmed"),
        ("percentile", "percentile", "mean"),
    ):
        start = time.perf_counter()
        for effect in (0.0, 2.0, -2.0):
            r = rates(args.trials, args.pairs, effect, method, args.seed, noise, estimator=estimator)
            if effect == 0:
                judged = f"false alarm {r['improvement'] + r['regression']:.1%}"
            elif effect > 0:
                judged = f"miss {1 - r['improvement']:.1%} (wrong way {r['regression']:.1%})"
            else:
                judged = f"miss {1 - r['regression']:.1%} (wrong way {r['improvement']:.1%})"
            print(
                f"{label:<11} {effect:>+6.1f}% {r['improvement']:>8.1%} {r['neutral']:>8.1%} "
                f"{r['regression']:>8.1%} {r['inconclusive']:>8.1%}  {judged}"
            )
        print(f"{label:<11} {time.perf_counter() - start:.1f} s for {3 * args.trials} verdicts")


if __name__ == "__main__":
    main()
