"""A/B statistics: a randomised balanced schedule, paired log-ratio deltas, a t interval, outliers, verdicts.

Schedule: pairs come in blocks of two, each block ``A B B A`` or ``B A A B`` chosen by a seeded
coin (recorded), so a linear drift of the machine (warm-up, clocks, thermal state) cancels within
each block and neither side is always first.

Interval: each pair gives ``d = ln(candidate / baseline)``; the interval of the mean of ``d`` is
Student's t with ``n - 1`` degrees of freedom, reported in percent as ``100 * (exp(x) - 1)``.
Under "no difference", with randomised order, ``d`` is symmetric around 0, which is where the t
interval keeps its coverage even at 3 pairs (the percentile bootstrap does not: at 3 pairs its
"95 %" interval is about the min-max of the deltas), and a heavy tail makes it wider, never
falsely narrow: one stalled run does not decide a verdict, it blinds it. So, before judging, a
run far from the others of its side (:func:`outlying_pairs`: at least 4 runs, more than 5 robust
standard deviations, median/MAD of the log values, and at least 1.5 times off) gets its pair re-run
once by the caller (``ab``); the 20 % trimmed mean with Yuen's interval, the robust alternative, was
measured too liberal at 5 to 10 pairs (``benchmarks/bench_ab_stats.py``). When several metrics
are judged together the level is Bonferroni-adjusted (``1 - (1 - confidence) / m`` each), so the
whole verdict's false-alarm rate stays at most ``1 - confidence``. Fewer than ``min_pairs`` pairs:
inconclusive by rule. An inconclusive row says how many pairs its spread would need
(:func:`pairs_needed`).
``benchmarks/bench_ab_stats.py`` measures false alarms and misses, with and without stalls.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from ds4sync.core.model import FrozenModel
from ds4sync.models.serving_results import CONFIDENCE, MIN_PAIRS, Direction, MetricComparison, Side, Verdict

#: A run is an outlier of its side past this many robust standard deviations (1.4826 * MAD) ...
OUTLIER_MADS = 5.0
#: ... and at least this far in log units (ln 1.5: half as fast, or 1.5 times as fast), so a side of nearly equal
#: runs, or plain 15 % noise, flags nothing (measured: benchmarks/bench_ab_stats.py) ...
OUTLIER_FLOOR = math.log(1.5)
#: ... among at least this many runs of a side (the MAD of three values is one of their deviations).
OUTLIER_MIN_RUNS = 4
#: pairs_needed looks this far; beyond it a row says "more than".
MAX_PAIRS_NEEDED = 500

LOWER_IS_BETTER = ("_ms", "lost_requests", "preemptions", "waiting_max", "duration", "failed", "boot_s", "gap_s")


def metric_direction(key: str) -> Direction:
    """Which way is better for a bench or row key: latencies, losses and queues lower, throughputs higher."""
    return "lower" if any(part in key for part in LOWER_IS_BETTER) else "higher"


class MetricRule(FrozenModel):
    """How one metric is judged: which direction is better and the smallest change that matters.

    ``threshold_pct`` is in percent of the baseline (1.0 = 1 %).
    """

    direction: Direction = "higher"
    threshold_pct: float = Field(default=1.0, ge=0)


def schedule(pairs: int, *, seed: int) -> list[Side]:
    """The run order for ``pairs`` pairs: blocks ``A B B A`` or ``B A A B`` by a seeded coin per block
    (an odd last pair ``A B`` or ``B A`` likewise). Deterministic for a seed.

    Raises:
        ValueError: ``pairs`` < 1.
    """
    if pairs < 1:
        raise ValueError("at least one pair is needed")
    rng = random.Random(seed)
    order: list[Side] = []
    for _ in range(pairs // 2):
        order.extend(("A", "B", "B", "A") if rng.random() < 0.5 else ("B", "A", "A", "B"))
    if pairs % 2:
        order.extend(("A", "B") if rng.random() < 0.5 else ("B", "A"))
    return order


def log_ratios(baseline: Sequence[float], candidate: Sequence[float]) -> list[float]:
    """Per-pair ``ln(candidate_i / baseline_i)``.

    Raises:
        ValueError: different lengths, or a value <= 0 (ratios are undefined).
    """
    if len(baseline) != len(candidate):
        raise ValueError(f"unpaired samples: {len(baseline)} baseline vs {len(candidate)} candidate")
    if any(v <= 0 for v in (*baseline, *candidate)):
        raise ValueError("a value is <= 0; ratios are undefined")
    return [math.log(b / a) for a, b in zip(baseline, candidate, strict=True)]


@functools.lru_cache(maxsize=1024)
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile at probability ``p`` for ``df`` degrees of freedom (scipy)."""
    from scipy.stats import t

    if df < 1:
        raise ValueError("df must be >= 1")
    return float(t.ppf(p, df))


def t_interval(values: Sequence[float], *, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The two-sided ``confidence`` t interval of the mean of ``values`` (n >= 2).

    Raises:
        ValueError: fewer than two values.
    """
    n = len(values)
    if n < 2:
        raise ValueError("a t interval needs at least two values")
    mean = statistics.fmean(values)
    half = t_quantile(0.5 + confidence / 2, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return mean - half, mean + half


def outlying_runs(values: Sequence[float]) -> dict[int, float]:
    """The runs of one side far from the others (see the module doc): ``{index: distance}``, the distance
    from the side's median in log units; none below :data:`OUTLIER_MIN_RUNS` runs or with a value <= 0."""
    if len(values) < OUTLIER_MIN_RUNS or any(v <= 0 for v in values):
        return {}
    logs = [math.log(v) for v in values]
    mid = statistics.median(logs)
    scale = 1.4826 * statistics.median(abs(x - mid) for x in logs)
    limit = max(OUTLIER_MADS * scale, OUTLIER_FLOOR)
    return {i: abs(x - mid) for i, x in enumerate(logs) if abs(x - mid) > limit}


def outlying_pairs(baseline: Mapping[str, Sequence[float]], candidate: Mapping[str, Sequence[float]]) -> dict[int, str]:
    """Pairs holding an outlying run of either side in any metric given, the farthest first:
    ``{pair index: why}``, e.g. ``{2: "baseline d.output_throughput 2.5 vs median 290 of its side"}``."""
    found: dict[int, tuple[float, str]] = {}
    for word, side in (("baseline", baseline), ("candidate", candidate)):
        for metric, values in side.items():
            mid = statistics.median(values) if values else 0.0
            for i, distance in outlying_runs(values).items():
                if distance > found.get(i, (0.0, ""))[0]:
                    found[i] = (distance, f"{word} {metric} {values[i]:.4g} vs median {mid:.4g} of its side")
    return {i: why for i, (_d, why) in sorted(found.items(), key=lambda item: -item[1][0])}


def pairs_needed(deltas: Sequence[float], rule: MetricRule, *, confidence: float = CONFIDENCE) -> int | None:
    """How many pairs the spread of ``deltas`` (log ratios) would need for the t interval to decide
    (any verdict but inconclusive), mean and spread held; None past :data:`MAX_PAIRS_NEEDED` or
    below two deltas."""
    if len(deltas) < 2:
        return None
    center, spread = statistics.fmean(deltas), statistics.stdev(deltas)

    def decides(m: int) -> bool:
        half = t_quantile(0.5 + confidence / 2, m - 1) * spread / math.sqrt(m)
        return judge((to_pct(center - half), to_pct(center + half)), to_pct(center), rule) != "inconclusive"

    # the half-width shrinks as m grows, and a decided interval stays decided: bisect
    low, high = len(deltas), MAX_PAIRS_NEEDED
    if not decides(high):
        return None
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if decides(mid) else (mid + 1, high)
    return low


def to_pct(log_ratio: float) -> float:
    """A log ratio as a percent change: ``100 * (exp(x) - 1)``."""
    return 100.0 * math.expm1(log_ratio)


def judge(ci: tuple[float, float], mean_delta_pct: float, rule: MetricRule) -> Verdict:
    """The verdict from the interval and mean change (percent), in the metric's direction.

    improvement / regression: the interval excludes 0 on that side and the mean change is at
    least the threshold; neutral: the whole interval lies within ± threshold; else inconclusive.
    """
    sign = 1.0 if rule.direction == "higher" else -1.0
    low, high = sorted((sign * ci[0], sign * ci[1]))
    gain = sign * mean_delta_pct
    t = rule.threshold_pct
    if low > 0 and gain >= t:
        return "improvement"
    if high < 0 and gain <= -t:
        return "regression"
    if -t <= low and high <= t:
        return "neutral"
    return "inconclusive"


def compare_metric(
    metric: str,
    baseline: Sequence[float],
    candidate: Sequence[float],
    rule: MetricRule,
    *,
    unit: str = "",
    confidence: float = CONFIDENCE,
    min_pairs: int = MIN_PAIRS,
) -> MetricComparison:
    """Compare paired samples of one metric and decide its verdict (see the module doc).

    Raises:
        ValueError: unpaired or empty samples.
    """
    if len(baseline) != len(candidate):
        raise ValueError(f"{metric}: unpaired samples: {len(baseline)} baseline vs {len(candidate)} candidate")
    if not baseline:
        raise ValueError(f"{metric}: no pairs")
    common = _common_fields(metric, baseline, candidate, rule, unit=unit, confidence=confidence)
    try:
        deltas = log_ratios(baseline, candidate)
    except ValueError as exc:
        nan = float("nan")
        return MetricComparison(
            mean_delta_pct=nan, ci_low_pct=nan, ci_high_pct=nan, verdict="inconclusive", reason=str(exc), **common
        )
    if len(deltas) < max(2, min_pairs):
        return _too_few_pairs(deltas, rule, common, confidence=confidence, min_pairs=min_pairs)
    mean = to_pct(statistics.fmean(deltas))
    low, high = t_interval(deltas, confidence=confidence)
    ci = (to_pct(low), to_pct(high))
    verdict = judge(ci, mean, rule)
    more = pairs_needed(deltas, rule, confidence=confidence) if verdict == "inconclusive" else None
    return MetricComparison(
        mean_delta_pct=mean,
        ci_low_pct=ci[0],
        ci_high_pct=ci[1],
        verdict=verdict,
        reason=_reason(verdict, rule, more=more),
        pairs_needed=more,
        **common,
    )


def _common_fields(
    metric: str,
    baseline: Sequence[float],
    candidate: Sequence[float],
    rule: MetricRule,
    *,
    unit: str,
    confidence: float,
) -> dict[str, Any]:
    """The fields of a :class:`MetricComparison` whatever its verdict: the metric, its rule, the samples and
    their medians."""
    med_a, med_b = statistics.median(baseline), statistics.median(candidate)
    return {
        "metric": metric,
        "unit": unit,
        "direction": rule.direction,
        "threshold_pct": rule.threshold_pct,
        "pairs": len(baseline),
        "baseline_median": med_a,
        "candidate_median": med_b,
        "delta_pct": 100.0 * (med_b - med_a) / med_a if med_a else 0.0,
        "confidence": confidence,
        "baseline": tuple(baseline),
        "candidate": tuple(candidate),
    }


def _too_few_pairs(
    deltas: Sequence[float], rule: MetricRule, common: Mapping[str, Any], *, confidence: float, min_pairs: int
) -> MetricComparison:
    """Inconclusive by rule: fewer pairs than a verdict needs; the interval unbounded, the pairs that would do."""
    needed = max(2, min_pairs)
    return MetricComparison(
        mean_delta_pct=to_pct(statistics.fmean(deltas)),
        ci_low_pct=float("-inf"),
        ci_high_pct=float("inf"),
        verdict="inconclusive",
        reason=f"{len(deltas)} pair(s); at least {needed} are needed for a verdict",
        pairs_needed=max(needed, (pairs_needed(deltas, rule, confidence=confidence) if len(deltas) > 1 else None) or 0),
        **common,
    )


def _reason(verdict: Verdict, rule: MetricRule, *, more: int | None) -> str:
    """Why the interval and the mean give ``verdict``; an inconclusive one says about how many pairs would decide."""
    return {
        "improvement": f"interval above 0 and mean at least {rule.threshold_pct:g}% better",
        "regression": f"interval below 0 and mean at least {rule.threshold_pct:g}% worse",
        "neutral": f"interval within ±{rule.threshold_pct:g}%",
        "inconclusive": f"interval spans 0 or ±{rule.threshold_pct:g}%; "
        + (
            f"about {more} pairs at this spread would decide"
            if more
            else f"more than {MAX_PAIRS_NEEDED} pairs at this spread, or less noise, needed"
        ),
    }[verdict]


def family_confidence(confidence: float, metrics: int) -> float:
    """The per-metric level that keeps ``confidence`` for ``metrics`` judged together (Bonferroni)."""
    return 1.0 - (1.0 - confidence) / max(1, metrics)


def overall_verdict(rows: Sequence[MetricComparison]) -> Verdict:
    """One verdict for a set of metrics: any regression wins, then inconclusive, then improvement."""
    verdicts = {row.verdict for row in rows}
    for verdict in ("regression", "inconclusive", "improvement"):
        if verdict in verdicts:
            return verdict
    return "neutral"


def rules_for(metrics: Sequence[str], rules: Mapping[str, MetricRule]) -> dict[str, MetricRule]:
    """The rule of each metric: configured, else a default from the name (latencies, losses: lower)."""
    return {name: rules.get(name) or MetricRule(direction=metric_direction(name)) for name in metrics}
