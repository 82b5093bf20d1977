"""A/B statistics: interleaved schedules, paired deltas, bootstrap intervals and verdicts.

Measurements come in pairs taken in reverse-interleaved order (A B, B A, A B, ...), so a
linear drift of the machine (warm-up, clocks, thermal state) cancels over each two pairs.
Each pair gives one relative delta ``(candidate - baseline) / baseline`` in percent; the
interval is a bootstrap over pairs of the mean delta.

With few pairs the plain percentile bootstrap is too narrow (its 95 % interval covers the
truth far less than 95 % of the time at n = 5), so the interval is Hesterberg's *expanded*
percentile bootstrap: the tail probability is widened by ``sqrt(n / (n - 1)) * t_{n-1}``
(T. Hesterberg, "What Teachers Should Know About the Bootstrap", The American
Statistician 69(4), 2015, section 5.1). ``benchmarks/bench_ab_stats.py`` measures what
that buys in false alarms and misses.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field

from ds4sync.core.model import FrozenModel

Verdict = Literal["improvement", "neutral", "regression", "inconclusive"]
Direction = Literal["higher", "lower"]
Side = Literal["A", "B"]
IntervalMethod = Literal["expanded", "percentile"]
Estimator = Literal["mean", "trimmed"]

# Two-sided 97.5 % quantiles of Student's t for 1..30 degrees of freedom.
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


class MetricRule(FrozenModel):
    """How one metric is judged: which direction is better and the smallest change that matters.

    ``threshold_pct`` is in percent of the baseline (1.0 = 1 %).
    """

    direction: Direction = "higher"
    threshold_pct: float = Field(default=1.0, ge=0)


class MetricComparison(FrozenModel):
    """The A/B verdict of one metric; the JSON shape of ``ds4sync ab --json`` rows.

    Percentages are of the baseline; the interval is of the mean paired delta.
    """

    metric: str
    unit: str = ""
    direction: Direction = "higher"
    threshold_pct: float = 1.0
    pairs: int
    baseline_median: float
    candidate_median: float
    delta_pct: float = Field(description="candidate median vs baseline median, percent")
    mean_delta_pct: float = Field(description="mean of the per-pair relative deltas, percent")
    ci_low_pct: float
    ci_high_pct: float
    verdict: Verdict
    baseline: tuple[float, ...] = ()
    candidate: tuple[float, ...] = ()

    def brief(self) -> dict[str, object]:
        """The documented JSON contract of one row."""
        return {
            k: getattr(self, k)
            for k in (
                "metric",
                "baseline_median",
                "candidate_median",
                "delta_pct",
                "ci_low_pct",
                "ci_high_pct",
                "verdict",
            )
        }

    def line(self) -> str:
        """One report line, e.g. ``decode tok/s: 292.7 vs 298.9 median (-2.1 %, mean -2.0 %, 95 % CI ...)``."""
        unit = f" {self.unit}" if self.unit else ""
        return (
            f"{self.metric}: {_num(self.candidate_median)}{unit} vs {_num(self.baseline_median)}{unit} median "
            f"({self.delta_pct:+.2f}%; mean {self.mean_delta_pct:+.2f}%, 95% CI "
            f"[{self.ci_low_pct:+.2f}%, {self.ci_high_pct:+.2f}%], {self.pairs} pairs): {self.verdict}"
        )


def interleaved_schedule(pairs: int) -> list[Side]:
    """The run order for ``pairs`` pairs: A B, B A, A B, ... (reverse every other pair).

    Raises:
        ValueError: ``pairs`` < 1.
    """
    if pairs < 1:
        raise ValueError("at least one pair is needed")
    order: list[Side] = []
    for i in range(pairs):
        order.extend(("A", "B") if i % 2 == 0 else ("B", "A"))
    return order


def paired_deltas_pct(baseline: Sequence[float], candidate: Sequence[float]) -> list[float]:
    """Per-pair relative deltas in percent: ``100 * (b_i - a_i) / a_i``.

    Raises:
        ValueError: different lengths, or a baseline value of 0.
    """
    if len(baseline) != len(candidate):
        raise ValueError(f"unpaired samples: {len(baseline)} baseline vs {len(candidate)} candidate")
    if any(a == 0 for a in baseline):
        raise ValueError("a baseline value is 0; relative deltas are undefined")
    return [100.0 * (b - a) / a for a, b in zip(baseline, candidate, strict=True)]


def t_quantile_975(df: int) -> float:
    """Student's t 97.5 % quantile for ``df`` degrees of freedom (table to 30, Cornish-Fisher beyond)."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def trimmed_mean(values: Sequence[float], *, trim: float = 0.2) -> float:
    """Mean after dropping ``trim`` of the values from each end (at least one each from 5 values on)."""
    ordered = sorted(values)
    cut = max(1, int(trim * len(ordered))) if len(ordered) >= 5 else 0
    return statistics.fmean(ordered[cut : len(ordered) - cut])


def estimate(values: Sequence[float], estimator: Estimator) -> float:
    """The location estimate of paired deltas: plain or 20 %-trimmed mean."""
    return statistics.fmean(values) if estimator == "mean" else trimmed_mean(values)


def bootstrap_mean_ci(
    values: Sequence[float],
    *,
    resamples: int = 4000,
    seed: int = 0,
    method: IntervalMethod = "expanded",
    estimator: Estimator = "mean",
) -> tuple[float, float]:
    """A two-sided 95 % bootstrap interval of the mean (or trimmed mean) of ``values``.

    ``expanded`` widens the percentile levels for small n (Hesterberg 2015); ``percentile``
    is the plain percentile bootstrap. Deterministic for a given ``seed``.

    Raises:
        ValueError: no values.
    """
    n = len(values)
    if n == 0:
        raise ValueError("no values")
    if n == 1:
        return (values[0], values[0])
    rng = random.Random(seed)
    means = sorted(estimate(rng.choices(values, k=n), estimator) for _ in range(resamples))
    tail = 0.025
    if method == "expanded":
        z = math.sqrt(n / (n - 1)) * t_quantile_975(n - 1)
        tail = statistics.NormalDist().cdf(-z)
    return (_quantile(means, tail), _quantile(means, 1.0 - tail))


def judge(ci: tuple[float, float], mean_delta_pct: float, rule: MetricRule) -> Verdict:
    """The verdict from the interval and mean of the paired deltas, in the metric's direction.

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
    seed: int = 0,
    method: IntervalMethod = "expanded",
    estimator: Estimator = "mean",
) -> MetricComparison:
    """Compare paired samples of one metric and decide its verdict.

    Raises:
        ValueError: unpaired or empty samples, or a zero baseline value.
    """
    deltas = paired_deltas_pct(baseline, candidate)
    if not deltas:
        raise ValueError(f"{metric}: no pairs")
    ci = bootstrap_mean_ci(deltas, seed=seed, method=method, estimator=estimator)
    mean_delta = estimate(deltas, estimator)
    med_a, med_b = statistics.median(baseline), statistics.median(candidate)
    return MetricComparison(
        metric=metric,
        unit=unit,
        direction=rule.direction,
        threshold_pct=rule.threshold_pct,
        pairs=len(deltas),
        baseline_median=med_a,
        candidate_median=med_b,
        delta_pct=100.0 * (med_b - med_a) / med_a,
        mean_delta_pct=mean_delta,
        ci_low_pct=ci[0],
        ci_high_pct=ci[1],
        verdict=judge(ci, mean_delta, rule),
        baseline=tuple(baseline),
        candidate=tuple(candidate),
    )


def overall_verdict(rows: Sequence[MetricComparison]) -> Verdict:
    """One verdict for a set of metrics: any regression wins, then inconclusive, then improvement."""
    verdicts = {row.verdict for row in rows}
    for verdict in ("regression", "inconclusive", "improvement"):
        if verdict in verdicts:
            return verdict
    return "neutral"


def rules_for(metrics: Sequence[str], rules: Mapping[str, MetricRule]) -> dict[str, MetricRule]:
    """The rule of each metric: configured, else a default guessed from the name (latencies: lower)."""
    out = {}
    for name in metrics:
        if name in rules:
            out[name] = rules[name]
        else:
            lower = any(key in name for key in ("ttft", "tpot", "itl", "latency", "_ms", "_s_", "duration"))
            out[name] = MetricRule(direction="lower" if lower else "higher")
    return out


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _num(value: float) -> str:
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
