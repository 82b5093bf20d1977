"""How often the A/B verdict is wrong: false alarms and misses, by pair count, noise level and stalls.

Simulates A/B sessions of a throughput metric (higher is better) with a known true effect and
noise of 1 %, 5 % or 15 % per run (log-normal jitter), plus what a shared machine adds: a slow
linear drift across the session (0.5 % per run) and a 5 % chance per run of an outlier 4-8 % slow
(a background job). The stall model adds, on top, a 3 % chance per run that the run stalls
(a stopped or starved server: throughput at 5-50 % of its level, the 2.5 tok/s run among 290 tok/s
ones), on either side.

Each session is judged two ways, side by side on the same measurements:

- ours (``ds4sync.serving.abstats`` as shipped): randomised ABBA/BAAB blocks; a run far from the
  others of its side (median/MAD, :func:`~ds4sync.serving.abstats.outlying_pairs`) gets its pair re-run
  once (drawn again at the same steps); then Student's t on the mean log ratio;
- before: the verdict ds4sync had until now (the same t interval, no re-run);
- yuen: the robust alternative that was tried and rejected (re-run as ours, then the 20 % trimmed
  mean with Yuen's t interval; re-implemented here): shown for its false-alarm rate.

Both at the default verdict's per-row level (99 % family-wise over the three judged metrics:
``1 - 0.01 / 3`` per row) and at 99 % for one metric alone, threshold 1 %.

    python benchmarks/bench_ab_stats.py [--trials 2000] [--seed 1]

False alarm: effect 0 judged improvement or regression. Miss: a +2 % (+5 %) effect not judged
improvement. Pair counts below the minimum (3) are inconclusive by rule.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable

from ds4sync.serving.abstats import (
    MetricRule,
    compare_metric,
    family_confidence,
    judge,
    log_ratios,
    outlying_pairs,
    schedule,
    t_interval,
    t_quantile,
    to_pct,
)
from ds4sync.serving.results import MIN_PAIRS

RULE = MetricRule(direction="higher", threshold_pct=1.0)
BASE_TOK_S = 295.0
PAIRS = (3, 4, 5, 6, 8, 10, 15, 20)
NOISE = (1.0, 5.0, 15.0)
STALL_P = 0.03
DEFAULT_ROW_LEVEL = family_confidence(0.99, 3)


def run_value(rng: random.Random, step: int, side: str, effect_pct: float, noise_pct: float, stall_p: float) -> float:
    """One run's tok/s at ``step`` of the session."""
    level = BASE_TOK_S * (1 + 0.5 / 100 * step)
    if side == "B":
        level *= 1 + effect_pct / 100
    value = level * math.exp(rng.gauss(0, noise_pct / 100))
    if rng.random() < 0.05:
        value *= 1 - rng.uniform(0.04, 0.08)
    if rng.random() < stall_p:
        value *= rng.uniform(0.05, 0.5)
    return value


def session(
    rng: random.Random, order: list[str], draw: Callable[[int, str], float]
) -> tuple[list[float], list[float], list[tuple[int, int]]]:
    """Per-pair (baseline, candidate) values in ``order`` and each pair's (A step, B step)."""
    a_steps = [i for i, s in enumerate(order) if s == "A"]
    b_steps = [i for i, s in enumerate(order) if s == "B"]
    a = [draw(i, "A") for i in a_steps]
    b = [draw(i, "B") for i in b_steps]
    return a, b, list(zip(a_steps, b_steps, strict=True))


def rerun(a: list[float], b: list[float], steps: list[tuple[int, int]], draw) -> tuple[list[float], list[float]]:
    """Outlying pairs drawn again once, at their steps (at most a third of the pairs, at least one), as ``ab`` does."""
    a, b = list(a), list(b)
    for pair in list(outlying_pairs({"m": a}, {"m": b}))[: max(1, len(a) // 3)]:
        a[pair], b[pair] = draw(steps[pair][0], "A"), draw(steps[pair][1], "B")
    return a, b


def ours(a: list[float], b: list[float], level: float) -> str:
    """The shipped verdict (after :func:`rerun`)."""
    return compare_metric("tok/s", a, b, RULE, confidence=level).verdict


def yuen(a: list[float], b: list[float], level: float, trim: float = 0.2) -> str:
    """The rejected alternative: 20 % trimmed mean of the log ratios, Yuen's t interval (after :func:`rerun`)."""
    d = sorted(log_ratios(a, b))
    n, g = len(d), int(trim * len(d))
    h = n - 2 * g
    kept = d[g : n - g]
    wins = [d[g]] * g + kept + [d[n - g - 1]] * g
    mean_w = sum(wins) / n
    var_w = sum((x - mean_w) ** 2 for x in wins) / (n - 1)
    center = sum(kept) / h
    half = t_quantile(0.5 + level / 2, h - 1) * math.sqrt((n - 1) * var_w / (h * (h - 1)))
    return judge((to_pct(center - half), to_pct(center + half)), to_pct(center), RULE)


def before(a: list[float], b: list[float], level: float) -> str:
    """The previous verdict: Student's t interval of the mean log ratio, no re-run."""
    deltas = log_ratios(a, b)
    low, high = t_interval(deltas, confidence=level)
    return judge((to_pct(low), to_pct(high)), to_pct(sum(deltas) / len(deltas)), RULE)


def cell(trials: int, pairs: int, noise: float, effect: float, stall_p: float, seed: int) -> dict[str, float]:
    """Share of trials judged improvement / regression, per verdict and level."""
    rng = random.Random(hash((seed, pairs, noise, effect, stall_p)) & 0xFFFFFFFF)
    keys = [f"{who}@{lv}" for who in ("ours", "before", "yuen") for lv in ("row", "99")]
    counts = {k: {"improvement": 0, "regression": 0} for k in keys}
    levels = {"row": DEFAULT_ROW_LEVEL, "99": 0.99}

    def draw(step: int, side: str) -> float:
        return run_value(rng, step, side, effect, noise, stall_p)

    for _ in range(trials):
        order = schedule(pairs, seed=rng.getrandbits(32))
        a, b, steps = session(rng, order, draw)
        ra, rb = rerun(a, b, steps, draw)
        for lv, level in levels.items():
            verdicts = (("ours", ours(ra, rb, level)), ("before", before(a, b, level)), ("yuen", yuen(ra, rb, level)))
            for who, verdict in verdicts:
                if verdict in counts[f"{who}@{lv}"]:
                    counts[f"{who}@{lv}"][verdict] += 1
    return {f"{k}_{v}": counts[k][v] / trials for k in keys for v in ("improvement", "regression")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"{args.trials} simulated sessions per cell; threshold 1 %; minimum pairs {MIN_PAIRS}; drift 0.5 %/run;")
    print(f"5 % outliers 4-8 % slow; stalls: {STALL_P:.0%} of runs at 5-50 % of their level (on either side).")
    print("FA = false alarm (no effect, judged improvement or regression); miss2/miss5 = a true +2 % / +5 % effect")
    print("not judged improvement. ours = re-run of an outlying pair, then t on the mean log ratio; before = the t")
    print("without the re-run; yuen = re-run, then the 20 % trimmed mean with Yuen's t (tried, rejected).")
    print(f"row = the default verdict's per-row level ({DEFAULT_ROW_LEVEL:.4f}: 99 % family-wise over 3 metrics);")
    print("99 = one metric alone at 99 %. ratio = before's miss5 / ours' miss5 (> 1: ours misses less).")
    print()
    header = (
        f"{'stalls':>6} {'noise':>5} {'pairs':>5} | {'FA ours':>7} {'FA bef':>7} {'FA yuen':>7} | "
        f"{'FA99 ours':>9} {'FA99 bef':>8} {'FA99 yuen':>9} | "
        f"{'miss2 ours':>10} {'miss2 bef':>9} | {'miss5 ours':>10} {'miss5 bef':>9} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    worst = {f"{who}@{lv}": 0.0 for who in ("ours", "before", "yuen") for lv in ("row", "99")}
    for stall_p in (0.0, STALL_P):
        for noise in NOISE:
            for pairs in PAIRS:
                null = cell(args.trials, pairs, noise, 0.0, stall_p, args.seed)
                two = cell(args.trials, pairs, noise, 2.0, stall_p, args.seed)
                five = cell(args.trials, pairs, noise, 5.0, stall_p, args.seed)
                fa = {k: null[f"{k}_improvement"] + null[f"{k}_regression"] for k in worst}
                worst = {k: max(v, fa[k]) for k, v in worst.items()}
                m5o, m5b = 1 - five["ours@row_improvement"], 1 - five["before@row_improvement"]
                ratio = f"{m5b / m5o:>6.2f}" if m5o > 0 else f"{'-':>6}"
                print(
                    f"{stall_p:>6.0%} {noise:>4.0f}% {pairs:>5} | {fa['ours@row']:>7.1%} {fa['before@row']:>7.1%} "
                    f"{fa['yuen@row']:>7.1%} | {fa['ours@99']:>9.1%} {fa['before@99']:>8.1%} {fa['yuen@99']:>9.1%} | "
                    f"{1 - two['ours@row_improvement']:>10.1%} {1 - two['before@row_improvement']:>9.1%} | "
                    f"{m5o:>10.1%} {m5b:>9.1%} {ratio}",
                    flush=True,
                )
            print()
    for lv, words in (("row", "per row at the default level"), ("99", "one metric alone at 99 %")):
        print(
            f"worst false-alarm rate, {words}: ours {worst[f'ours@{lv}']:.2%}, before {worst[f'before@{lv}']:.2%}, "
            f"yuen {worst[f'yuen@{lv}']:.2%}"
        )
    print(
        f"the default verdict (3 metrics, Bonferroni) false-alarms at most 3 x the per-row rate: "
        f"{3 * worst['ours@row']:.2%} (ours), at most 1 % by construction"
    )
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
