"""How often the A/B verdict is wrong: false alarms and misses, by pair count and noise level.

Simulates A/B sessions of a throughput metric (higher is better) with a known true effect and
noise of 1 %, 5 % or 15 % per run (log-normal jitter), plus what a shared machine adds: a slow
linear drift across the session (0.5 % per run) and a 5 % chance per run of an outlier 4-8 % slow
(a background job). Each session is judged by ds4sync's verdict as shipped
(``ds4sync.serving.abstats.compare_metric``: randomised ABBA/BAAB blocks, paired t on log
ratios, threshold 1 %), at the default 99 % and at 95 %, and, as the baseline, by the verdict
ds4sync had before (fixed A B / B A order, expanded percentile bootstrap of relative deltas,
no minimum pair count; re-implemented here, as it is gone from the package).

    python benchmarks/bench_ab_stats.py [--trials 2000] [--seed 1]

False alarm: effect 0 judged improvement or regression. Miss: a +2 % (+5 %) effect not judged
improvement. Pair counts below the minimum (3) are inconclusive by rule, so they cannot
false-alarm; 2 pairs is shown for the baseline's sake.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time

from ds4sync.serving.abstats import MetricRule, compare_metric, judge, schedule
from ds4sync.serving.results import MIN_PAIRS

RULE = MetricRule(direction="higher", threshold_pct=1.0)
BASE_TOK_S = 295.0
PAIRS = (2, 3, 4, 5, 6, 8, 10, 15, 20)
NOISE = (1.0, 5.0, 15.0)
EFFECTS = (0.0, 2.0, 5.0)


def simulate(
    rng: random.Random, order: list[str], effect_pct: float, *, jitter_pct: float, drift_pct: float, outlier_p: float
) -> tuple[list[float], list[float]]:
    """One session in ``order``: per-pair (baseline, candidate) tok/s with the given true effect."""
    a: list[float] = []
    b: list[float] = []
    for step, side in enumerate(order):
        level = BASE_TOK_S * (1 + drift_pct / 100 * step)
        if side == "B":
            level *= 1 + effect_pct / 100
        value = level * math.exp(rng.gauss(0, jitter_pct / 100))
        if rng.random() < outlier_p:
            value *= 1 - rng.uniform(0.04, 0.08)
        (a if side == "A" else b).append(value)
    return a, b


def old_verdict(a: list[float], b: list[float], rng: random.Random, resamples: int = 400) -> str:
    """The verdict ds4sync had before: expanded percentile bootstrap of the mean relative delta."""
    from ds4sync.serving.abstats import t_quantile

    deltas = [100.0 * (y - x) / x for x, y in zip(a, b, strict=True)]
    n = len(deltas)
    mean = statistics.fmean(deltas)
    if n == 1:
        ci = (deltas[0], deltas[0])
    else:
        means = sorted(statistics.fmean(rng.choices(deltas, k=n)) for _ in range(resamples))
        z = math.sqrt(n / (n - 1)) * t_quantile(0.975, n - 1)
        tail = statistics.NormalDist().cdf(-z)
        lo, hi = means[int(tail * (resamples - 1))], means[math.ceil((1 - tail) * (resamples - 1))]
        ci = (lo, hi)
    return judge(ci, mean, RULE)


def cell(trials: int, pairs: int, noise_pct: float, effect_pct: float, seed: int) -> dict[str, float]:
    """Share of trials judged improvement or regression, for ours at 99 % and 95 % and the old verdict."""
    rng = random.Random(hash((seed, pairs, noise_pct, effect_pct)) & 0xFFFFFFFF)
    noise = {"jitter_pct": noise_pct, "drift_pct": 0.5, "outlier_p": 0.05}
    counts = {k: {"improvement": 0, "regression": 0} for k in ("ours99", "ours95", "old")}
    old_order = [s for i in range(pairs) for s in (("A", "B") if i % 2 == 0 else ("B", "A"))]
    for i in range(trials):
        order = schedule(pairs, seed=rng.getrandbits(32))
        a, b = simulate(rng, order, effect_pct, **noise)
        for key, conf in (("ours99", 0.99), ("ours95", 0.95)):
            verdict = compare_metric("tok/s", a, b, RULE, confidence=conf).verdict
            if verdict in counts[key]:
                counts[key][verdict] += 1
        oa, ob = simulate(rng, old_order, effect_pct, **noise)
        verdict = old_verdict(oa, ob, rng)
        if verdict in counts["old"]:
            counts["old"][verdict] += 1
        del i
    return {f"{k}_{v}": counts[k][v] / trials for k in counts for v in ("improvement", "regression")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"{args.trials} simulated sessions per cell; threshold 1 %; minimum pairs {MIN_PAIRS}; drift 0.5 %/run;")
    print("5 % outliers 4-8 % slow. FA = false alarm (no effect, judged improvement or regression);")
    print("miss = a true +2 % / +5 % effect not judged improvement. ours = paired t on log ratios, randomised")
    print("ABBA blocks (99 % is the default); old = the previous verdict (expanded bootstrap, fixed order).")
    print()
    header = (
        f"{'noise':>5} {'pairs':>5} | {'FA ours99':>9} {'FA ours95':>9} {'FA old':>7} | "
        f"{'miss2 99':>8} {'miss5 99':>8} | {'miss2 95':>8} {'miss5 95':>8} | {'miss2 old':>9} {'miss5 old':>9}"
    )
    print(header)
    print("-" * len(header))
    worst = {"ours99": 0.0, "ours95": 0.0}
    for noise in NOISE:
        for pairs in PAIRS:
            null = cell(args.trials, pairs, noise, 0.0, args.seed)
            two = cell(args.trials, pairs, noise, 2.0, args.seed)
            five = cell(args.trials, pairs, noise, 5.0, args.seed)
            fa = {k: null[f"{k}_improvement"] + null[f"{k}_regression"] for k in ("ours99", "ours95", "old")}
            if pairs >= MIN_PAIRS:
                worst = {k: max(v, fa[k]) for k, v in worst.items()}
            print(
                f"{noise:>4.0f}% {pairs:>5} | {fa['ours99']:>9.1%} {fa['ours95']:>9.1%} {fa['old']:>7.1%} | "
                f"{1 - two['ours99_improvement']:>8.1%} {1 - five['ours99_improvement']:>8.1%} | "
                f"{1 - two['ours95_improvement']:>8.1%} {1 - five['ours95_improvement']:>8.1%} | "
                f"{1 - two['old_improvement']:>9.1%} {1 - five['old_improvement']:>9.1%}"
            )
        print()
    print(
        f"worst false-alarm rate of ours at >= {MIN_PAIRS} pairs: {worst['ours99']:.1%} at 99 % (the default), "
        f"{worst['ours95']:.1%} at 95 % (its nominal 5 % plus the simulation's sampling error)"
    )
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
