"""The top-k phase report (benchmarks/kernels_topk_phases.py) turns each block's (clock64, globaltimer) stamps into
per-phase µs at the SM clock the two counters imply, over exactly the rows asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests import benchscripts

if TYPE_CHECKING:
    import torch
else:
    torch = pytest.importorskip("torch")


def _module():
    return benchscripts.load("kernels_topk_phases")


def _clocks(rows: int, mhz: float, phase_us: list[float], starts_ns: list[float], pad: int = 0) -> torch.Tensor:
    """Stamps for ``rows`` blocks whose phases last ``phase_us`` at ``mhz``, block r starting at starts_ns[r],
    then ``pad`` rows of garbage (the device array is larger than any launch)."""
    out = torch.full((rows + pad, 5, 2), 10**15, dtype=torch.int64)
    bounds = [0.0]
    for us in phase_us:
        bounds.append(bounds[-1] + us)
    for r in range(rows):
        for i, t_us in enumerate(bounds):
            out[r, i, 0] = round(1_000_000 + r * 7 + t_us * mhz)  # cycles; any per-SM offset
            out[r, i, 1] = round(starts_ns[r] + t_us * 1e3)
    return out


@pytest.mark.parametrize(("rows", "mhz"), [(1, 1980.0), (4, 1755.0), (9, 1410.0)])
def test_phase_durations_come_out_in_microseconds_at_the_implied_clock(rows: int, mhz: float) -> None:
    mod = _module()
    phase_us = [2.5, 9.0, 3.75, 1.5]
    starts = [100.0 + 400.0 * r for r in range(rows)]
    table = mod.phase_table(_clocks(rows, mhz, phase_us, starts, pad=3), rows)
    assert table["sm_mhz"] == pytest.approx(mhz, rel=1e-3)
    assert list(table["phases"]) == list(mod.PHASES)
    for name, us in zip(mod.PHASES, phase_us, strict=True):
        assert table["phases"][name]["median_us"] == pytest.approx(us, rel=1e-3)
        assert table["phases"][name]["p90_us"] == pytest.approx(us, rel=1e-3)
    assert table["block_us"] == pytest.approx(sum(phase_us), rel=1e-3)
    # first start to last end: the blocks' skew plus one block
    assert table["span_us"] == pytest.approx((starts[-1] - starts[0]) / 1e3 + sum(phase_us), rel=1e-3)


def test_a_slow_block_moves_the_p90_not_the_median() -> None:
    mod = _module()
    fast = _clocks(9, 1980.0, [2.0, 8.0, 3.0, 1.0], [0.0] * 9)
    slow = _clocks(1, 1980.0, [2.0, 28.0, 3.0, 1.0], [0.0])
    clocks = torch.cat([fast, slow])
    table = mod.phase_table(clocks, 10)
    row_pass = table["phases"]["pass over the row"]
    assert row_pass["median_us"] == pytest.approx(8.0, rel=1e-3)
    assert row_pass["p90_us"] > 9.0
    assert table["phases"]["select rounds"]["p90_us"] == pytest.approx(3.0, rel=1e-3)
