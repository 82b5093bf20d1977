"""How often the A/B verdict is wrong: false alarms and misses, by pair count, noise level and stalls.

Simulates A/B sessions of the three metrics the default verdict judges, per run: throughput (tok/s,
higher is better), median TPOT (its inverse, with a little noise of its own) and median TTFT (its own
noise), with a known true effect on throughput and TPOT. Noise of 1 %, 5 % or 15 % per run (log-normal
jitter), plus what a shared machine adds: a slow linear drift across the session (0.5 % per run) and a
5 % chance per run of an outlier 4-8 % slow (a background job). The stall model adds, on top, a 3 %
chance per run that the run stalls (a stopped or starved server: throughput at 5-50 % of its level,
TPOT and TTFT as much slower; the 2.5 tok/s run among 290 tok/s ones), on either side.

Each session is judged three ways, side by side on the same measurements:

- ours (``ds4sync.models.serving_abstats`` as shipped): randomised ABBA/BAAB blocks; a run far from the
  others of its side (median/MAD, :func:`~ds4sync.models.serving_abstats.outlying_pairs`, on the three
  metrics) gets its pair re-run once (drawn again at the same steps); then Student's t on the mean
  log ratio, the three rows at 99 % family-wise (Bonferroni) and one overall verdict;
- before: the verdict ds4sync had until now (the same t interval and levels, no re-run);
- yuen: the robust alternative that was tried and rejected (re-run as ours, then the 20 % trimmed
  mean with Yuen's t interval; re-implemented here).

    python benchmarks/bench_ab_stats.py [--trials 1000] [--seed 1] [--jobs N]

False alarm (FA): no effect, the overall verdict improvement or regression (the number a CI sees),
and the throughput row alone. Miss: a +2 % (+5 %) throughput effect whose throughput row is not
judged improvement. Pair counts below the minimum (3) are inconclusive by rule.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from ds4sync.models.serving_abstats import (
    MetricRule,
    family_confidence,
    judge,
    log_ratios,
    outlying_pairs,
    overall_verdict,
    schedule,
    t_interval,
    t_quantile,
    to_pct,
)
from ds4sync.models.serving_results import MIN_PAIRS, MetricComparison

RULES = {
    "tok_s": MetricRule(direction="higher", threshold_pct=1.0),
    "tpot_ms": MetricRule(direction="lower", threshold_pct=1.0),
    "ttft_ms": MetricRule(direction="lower", threshold_pct=1.0),
}
BASE_TOK_S = 295.0
PAIRS = (3, 4, 5, 6, 8, 10, 15, 20)
NOISE = (1.0, 5.0, 15.0)
STALL_P = 0.03
ROW_LEVEL = family_confidence(0.99, len(RULES))
Run = dict[str, float]


def run_value(rng: random.Random, step: int, side: str, effect_pct: float, noise_pct: float, stall_p: float) -> Run:
    """One run's three metrics at ``step`` of the session."""
    level = BASE_TOK_S * (1 + 0.5 / 100 * step)
    if side == "B":
        level *= 1 + effect_pct / 100
    slow = 1.0
    if rng.random() < 0.05:
        slow *= 1 - rng.uniform(0.04, 0.08)
    if rng.random() < stall_p:
        slow *= rng.uniform(0.05, 0.5)
    tok_s = level * slow * math.exp(rng.gauss(0, noise_pct / 100))
    tpot = 1000.0 / tok_s * math.exp(rng.gauss(0, noise_pct / 300))
    ttft = 20.0 / slow * (1 + 0.5 / 100 * step) * math.exp(rng.gauss(0, noise_pct / 100))
    return {"tok_s": tok_s, "tpot_ms": tpot, "ttft_ms": ttft}


def session(order: list[str], draw: Callable[[int, str], Run]) -> tuple[list[Run], list[Run], list[tuple[int, int]]]:
    """Per-pair (baseline, candidate) runs in ``order`` and each pair's (A step, B step)."""
    a_steps = [i for i, s in enumerate(order) if s == "A"]
    b_steps = [i for i, s in enumerate(order) if s == "B"]
    return [draw(i, "A") for i in a_steps], [draw(i, "B") for i in b_steps], list(zip(a_steps, b_steps, strict=True))


def _side(runs: list[Run]) -> dict[str, list[float]]:
    return {m: [r[m] for r in runs] for m in RULES}


def rerun(a: list[Run], b: list[Run], steps: list[tuple[int, int]], draw) -> tuple[list[Run], list[Run]]:
    """Outlying pairs drawn again once, at their steps (at most a third of the pairs, at least one), as ``ab`` does."""
    a, b = list(a), list(b)
    for pair in list(outlying_pairs(_side(a), _side(b)))[: max(1, len(a) // 3)]:
        a[pair], b[pair] = draw(steps[pair][0], "A"), draw(steps[pair][1], "B")
    return a, b


def t_row(d: list[float], rule: MetricRule, level: float) -> str:
    """Student's t on the mean log ratio, as ``compare_metric`` judges it."""
    low, high = t_interval(d, confidence=level)
    return judge((to_pct(low), to_pct(high)), to_pct(sum(d) / len(d)), rule)


def yuen_row(d: list[float], rule: MetricRule, level: float, trim: float = 0.2) -> str:
    """The rejected alternative: 20 % trimmed mean of the log ratios, Yuen's t interval."""
    d = sorted(d)
    n, g = len(d), int(trim * len(d))
    h = n - 2 * g
    kept = d[g : n - g]
    wins = [d[g]] * g + kept + [d[n - g - 1]] * g
    mean_w = sum(wins) / n
    var_w = sum((x - mean_w) ** 2 for x in wins) / (n - 1)
    center = sum(kept) / h
    half = t_quantile(0.5 + level / 2, h - 1) * math.sqrt((n - 1) * var_w / (h * (h - 1)))
    return judge((to_pct(center - half), to_pct(center + half)), to_pct(center), rule)


def verdicts(a: list[Run], b: list[Run], row: Callable[[list[float], MetricRule, float], str]) -> tuple[str, str]:
    """(overall verdict, throughput row verdict) of the three rows at the default levels."""
    rows = {m: row(log_ratios(_side(a)[m], _side(b)[m]), rule, ROW_LEVEL) for m, rule in RULES.items()}
    shaped = [MetricComparison.model_construct(verdict=v) for v in rows.values()]
    return overall_verdict(shaped), rows["tok_s"]


def cell(trials: int, pairs: int, noise: float, effect: float, stall_p: float, seed: int) -> dict[str, float]:
    """Share of trials: ``<who>_fa`` (overall verdict decided), ``<who>_row_fa``, ``<who>_up`` (throughput
    row judged improvement)."""
    rng = random.Random(hash((seed, pairs, noise, effect, stall_p)) & 0xFFFFFFFF)
    counts = {f"{who}_{k}": 0 for who in ("ours", "before", "yuen") for k in ("fa", "row_fa", "up")}

    def draw(step: int, side: str) -> Run:
        return run_value(rng, step, side, effect, noise, stall_p)

    for _ in range(trials):
        order = schedule(pairs, seed=rng.getrandbits(32))
        a, b, steps = session(order, draw)
        ra, rb = rerun(a, b, steps, draw)
        judged = {
            "ours": verdicts(ra, rb, t_row),
            "before": verdicts(a, b, t_row),
            "yuen": verdicts(ra, rb, yuen_row),
        }
        for who, (overall, tok) in judged.items():
            counts[f"{who}_fa"] += overall in ("improvement", "regression")
            counts[f"{who}_row_fa"] += tok in ("improvement", "regression")
            counts[f"{who}_up"] += tok == "improvement"
    return {k: v / trials for k, v in counts.items()}


def line(trials: int, seed: int, stall_p: float, noise: float, pairs: int) -> dict[str, dict[str, float]]:
    """The three cells of one table line: no effect, +2 %, +5 %."""
    return {
        name: cell(trials, pairs, noise, effect, stall_p, seed)
        for name, effect in (("null", 0.0), ("two", 2.0), ("five", 5.0))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, help="processes computing table lines at once")
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"{args.trials} simulated sessions per cell; threshold 1 %; minimum pairs {MIN_PAIRS}; drift 0.5 %/run;")
    print(f"5 % outliers 4-8 % slow; stalls: {STALL_P:.0%} of runs at 5-50 % of their level (on either side).")
    print("Three metrics per run (tok/s, TPOT, TTFT), each row at 1 - 0.01/3, one overall verdict (99 % family-wise).")
    print("FA = false alarm of the overall verdict (no effect, judged improvement or regression); FA tok = of the")
    print("throughput row alone; miss2/miss5 = a true +2 % / +5 % throughput effect whose row is not judged")
    print("improvement. ours = re-run of an outlying pair, then t on the mean log ratio; bef = the t without the")
    print("re-run (the verdict until now); yuen = re-run, then the 20 % trimmed mean with Yuen's t (tried, rejected).")
    print("ratio = bef's miss5 / ours' miss5 (> 1: ours misses less).")
    print()
    header = (
        f"{'stalls':>6} {'noise':>5} {'pairs':>5} | {'FA ours':>7} {'FA bef':>7} {'FA yuen':>7} | "
        f"{'FA tok ours':>11} {'FA tok bef':>10} | {'miss2 ours':>10} {'miss2 bef':>9} | "
        f"{'miss5 ours':>10} {'miss5 bef':>9} {'miss5 yuen':>10} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    worst = {k: 0.0 for k in ("ours_fa", "before_fa", "yuen_fa", "ours_row_fa", "before_row_fa")}
    keys = [(stall_p, noise, pairs) for stall_p in (STALL_P, 0.0) for noise in NOISE for pairs in PAIRS]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(line, args.trials, args.seed, *key) for key in keys]
        for (stall_p, noise, pairs), future in zip(keys, futures, strict=True):
            got = future.result()
            null, two, five = got["null"], got["two"], got["five"]
            worst = {k: max(v, null[k]) for k, v in worst.items()}
            m5 = {who: 1 - five[f"{who}_up"] for who in ("ours", "before", "yuen")}
            ratio = f"{m5['before'] / m5['ours']:>6.2f}" if m5["ours"] > 0 else f"{'-':>6}"
            print(
                f"{stall_p:>6.0%} {noise:>4.0f}% {pairs:>5} | {null['ours_fa']:>7.1%} {null['before_fa']:>7.1%} "
                f"{null['yuen_fa']:>7.1%} | {null['ours_row_fa']:>11.1%} {null['before_row_fa']:>10.1%} | "
                f"{1 - two['ours_up']:>10.1%} {1 - two['before_up']:>9.1%} | "
                f"{m5['ours']:>10.1%} {m5['before']:>9.1%} {m5['yuen']:>10.1%} {ratio}",
                flush=True,
            )
            if pairs == PAIRS[-1]:
                print()
    print(
        f"worst false-alarm rate of the overall verdict: ours {worst['ours_fa']:.2%}, before {worst['before_fa']:.2%}, "
        f"yuen {worst['yuen_fa']:.2%}; of the throughput row: ours {worst['ours_row_fa']:.2%}, "
        f"before {worst['before_row_fa']:.2%}"
    )
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
