"""The live backport test's shape (holds, pairs) and the run-to-run noise it was chosen against.

``test_live_ab.py`` evaluates an upstream commit that raises a per-request hold from ``BASE_HOLD_S`` to
``HOLD_S`` between two real vLLM CPU servers, over ``PAIRS`` pairs, and asserts that time to first token is a
regression (its 99 % family-wise interval above 0) and that output throughput falls by more than 20 % on
average. :func:`miss_rates` draws runs from the noise recorded on a 2-core machine at load average 13 (each of
the 16 requests' own time to first token and the whole batch's generation time, plus a stall of 1.6 s in one
run of 8 on either side, the worst recorded) and judges them with ds4sync's own statistics, so the chance that
the live assertions miss is a computed number, checked by a fast test (``test_abstats.py``).
"""

from __future__ import annotations

import random

from ds4sync.models.serving_abstats import MetricRule, compare_metric, family_confidence
from ds4sync.models.serving_results import CONFIDENCE

BASE_HOLD_S = 1.0
HOLD_S = 10.0
PAIRS = 4
#: the three judged metrics (throughput, TPOT, TTFT) share the 99 % family-wise level
JUDGED = 3

#: the server's own median time to first token per run, seconds (the hold excluded), at load average 13
RECORDED_TTFT_S = (0.615, 0.928, 0.510, 0.739, 0.951, 0.219, 0.813, 0.680, 0.533, 1.157)
#: the generation time of one run's 16 requests x 32 tokens, seconds (the hold excluded), same runs
RECORDED_GEN_S = (3.14, 8.97, 5.12, 10.60, 11.07, 4.65, 6.18, 6.47, 6.52, 9.91)
STALL_S = 1.6
STALL_P = 1 / 8
TOKENS = 16 * 32


def miss_rates(trials: int, *, seed: int = 1, pairs: int = PAIRS) -> tuple[float, float]:
    """The fractions of ``trials`` simulated evaluations in which TTFT is not a regression with its interval
    above 0, and in which throughput does not fall by more than 20 % on average: two floats in [0, 1]."""
    rng = random.Random(seed)
    confidence = family_confidence(CONFIDENCE, JUDGED)
    ttft_missed = tok_missed = 0
    for _ in range(trials):
        ttft: dict[str, list[float]] = {"A": [], "B": []}
        tok: dict[str, list[float]] = {"A": [], "B": []}
        for side, hold in (("A", BASE_HOLD_S), ("B", HOLD_S)):
            for _pair in range(pairs):
                first = rng.choice(RECORDED_TTFT_S)
                if rng.random() < STALL_P:
                    first = max(first, STALL_S)
                ttft[side].append(1000 * (hold + first))
                tok[side].append(TOKENS / (hold + rng.choice(RECORDED_GEN_S)))
        row = compare_metric("ttft", ttft["A"], ttft["B"], MetricRule(direction="lower"), confidence=confidence)
        ttft_missed += not (row.verdict == "regression" and row.ci_low_pct > 0)
        row = compare_metric("tok", tok["A"], tok["B"], MetricRule(direction="higher"), confidence=confidence)
        tok_missed += not row.mean_delta_pct < -20
    return ttft_missed / trials, tok_missed / trials
