"""A/B statistics: schedule, paired deltas, intervals and verdicts on constructed samples."""

from __future__ import annotations

import pytest

from ds4sync.serving.abstats import (
    MetricRule,
    bootstrap_mean_ci,
    compare_metric,
    interleaved_schedule,
    judge,
    overall_verdict,
    paired_deltas_pct,
    rules_for,
    t_quantile_975,
)

HIGHER = MetricRule(direction="higher", threshold_pct=1.0)
LOWER = MetricRule(direction="lower", threshold_pct=1.0)


def test_schedule_reverses_every_other_pair() -> None:
    assert interleaved_schedule(3) == ["A", "B", "B", "A", "A", "B"]
    with pytest.raises(ValueError):
        interleaved_schedule(0)


def test_paired_deltas_are_percent_of_baseline() -> None:
    assert paired_deltas_pct([100.0, 200.0], [102.0, 190.0]) == pytest.approx([2.0, -5.0])
    with pytest.raises(ValueError, match="unpaired"):
        paired_deltas_pct([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="0"):
        paired_deltas_pct([0.0], [1.0])


def test_t_quantile_matches_table_and_tends_to_normal() -> None:
    assert t_quantile_975(4) == pytest.approx(2.776)
    assert t_quantile_975(200) == pytest.approx(1.972, abs=0.002)


def test_expanded_interval_is_wider_than_percentile_for_few_pairs() -> None:
    values = [1.8, 2.4, 1.1, 2.9, 2.0]
    lo_p, hi_p = bootstrap_mean_ci(values, method="percentile")
    lo_e, hi_e = bootstrap_mean_ci(values, method="expanded")
    assert lo_e < lo_p < hi_p < hi_e
    assert bootstrap_mean_ci(values, seed=3) == bootstrap_mean_ci(values, seed=3)


@pytest.mark.parametrize(
    ("base", "cand", "rule", "verdict"),
    [
        ([300, 301, 299, 300, 302], [309, 310, 308, 309, 311], HIGHER, "improvement"),
        ([300, 301, 299, 300, 302], [291, 292, 290, 291, 293], HIGHER, "regression"),
        ([300, 301, 299, 300, 302], [300.3, 301.2, 298.9, 300.1, 302.2], HIGHER, "neutral"),
        ([300, 301, 299, 300, 302], [310, 290, 305, 296, 312], HIGHER, "inconclusive"),
        ([10.0, 10.1, 9.9, 10.0, 10.0], [9.5, 9.6, 9.4, 9.5, 9.5], LOWER, "improvement"),
        ([10.0, 10.1, 9.9, 10.0, 10.0], [10.6, 10.7, 10.5, 10.6, 10.6], LOWER, "regression"),
    ],
)
def test_verdicts(base: list[float], cand: list[float], rule: MetricRule, verdict: str) -> None:
    row = compare_metric("m", base, cand, rule)
    assert row.verdict == verdict
    assert row.ci_low_pct <= row.mean_delta_pct <= row.ci_high_pct


def test_significant_change_below_threshold_is_not_an_improvement() -> None:
    assert judge((0.2, 0.8), 0.5, HIGHER) == "neutral"
    assert judge((0.2, 1.5), 0.8, HIGHER) == "inconclusive"


def test_json_row_and_line() -> None:
    row = compare_metric("decode tok/s", [298.9] * 5, [292.7] * 5, HIGHER, unit="tok/s")
    d = pytest.approx(-2.0743, abs=1e-3)
    assert row.brief() == {
        "metric": "decode tok/s",
        "baseline_median": 298.9,
        "candidate_median": 292.7,
        "delta_pct": d,
        "ci_low_pct": d,
        "ci_high_pct": d,
        "verdict": "regression",
    }
    assert row.line().startswith("decode tok/s: 292.7 tok/s vs 298.9 tok/s median (-2.07%;")


def test_overall_verdict_and_default_directions() -> None:
    rows = [compare_metric("a", [1, 1, 1], [1, 1, 1], HIGHER), compare_metric("b", [1, 1, 1], [2, 2, 2], HIGHER)]
    assert overall_verdict(rows) == "improvement"
    assert overall_verdict([*rows, compare_metric("c", [2, 2, 2], [1, 1, 1], HIGHER)]) == "regression"
    rules = rules_for(["c1.median_tpot_ms", "c1.output_throughput"], {})
    assert rules["c1.median_tpot_ms"].direction == "lower"
    assert rules["c1.output_throughput"].direction == "higher"


def test_trimmed_estimator_drops_the_extremes() -> None:
    from ds4sync.serving.abstats import trimmed_mean

    assert trimmed_mean([1.0, 2.0, 3.0, 4.0, 100.0]) == 3.0
    assert trimmed_mean([1.0, 3.0]) == 2.0
    row = compare_metric("m", [300.0] * 5, [306.0, 306.0, 306.0, 306.0, 270.0], HIGHER, estimator="trimmed")
    plain = compare_metric("m", [300.0] * 5, [306.0, 306.0, 306.0, 306.0, 270.0], HIGHER)
    assert row.mean_delta_pct == pytest.approx(2.0) and plain.mean_delta_pct == pytest.approx(-0.4)
