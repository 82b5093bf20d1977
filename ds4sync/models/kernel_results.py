"""What the kernel tier's suite reports (``kernels/run_suite.py --json-out``): per-op cases, benchmark rows
and the environment, validated from its JSON; stored whole in a kernel gate's ``details.kernel``."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator

from ds4sync.core.model import FrozenModel


class KernelCaseResult(FrozenModel):
    """One grid case: pass/fail/error/skip, the numeric metric (calc_diff) against its tolerance."""

    name: str
    status: Literal["pass", "fail", "error", "skip"]
    metric: float | None = None
    tolerance: float | None = None
    detail: str = ""
    deterministic: bool | None = None
    seconds: float = 0.0

    @field_validator("metric")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        return v if v is None or math.isfinite(v) else None


class KernelOpResult(FrozenModel):
    """All cases of one op for one implementation."""

    op: str
    impl: str
    cases: tuple[KernelCaseResult, ...]

    def count(self, status: str) -> int:
        """How many cases ended with ``status``."""
        return sum(c.status == status for c in self.cases)

    @property
    def ok(self) -> bool:
        """No failed and no errored case (skips are allowed)."""
        return self.count("fail") == 0 and self.count("error") == 0


class KernelBenchRow(FrozenModel):
    """One benchmark: µs (median, L2 flushed), reference µs in the same run, roofline placement on the H200."""

    op: str
    case: str
    time_us: float
    ref_time_us: float
    speedup: float
    bytes: float
    flops: float
    gb_per_s: float
    tflop_per_s: float
    roof_us: float
    pct_roof: float
    pct_hbm: float
    pct_hbm_achievable: float
    pct_peak: float | None = None
    peak: str | None = None
    target: dict[str, float] = Field(default_factory=dict)
    timing: str = "eager"
    ref_timing: str = "eager"
    target_met: bool | None = None
    flags: tuple[str, ...] = ()


class KernelEnvironment(FrozenModel):
    """Where the suite ran: device, GPU name, driver, torch/triton versions, date (UTC)."""

    device: str
    torch: str
    triton: str
    date: str
    interpreter: bool
    gpu: str | None = None
    driver: str | None = None
    sm_count: int | None = None


class KernelSuiteResult(FrozenModel):
    """Result of :func:`run_kernel_suite`; ``model_dump(mode="json")`` is the run-record form."""

    environment: KernelEnvironment
    scale: str
    repeats: int
    ops: tuple[KernelOpResult, ...]
    bench: tuple[KernelBenchRow, ...] = ()
    candidate: str | None = None

    @property
    def ok(self) -> bool:
        """Every op's numerics within tolerance and deterministic."""
        return all(op.ok for op in self.ops)

    @property
    def bench_ok(self) -> bool:
        """No benchmark flag: every target met, no op slower than its reference, nothing above roofline."""
        return not any(row.flags for row in self.bench)

    def markdown(self) -> str:
        """The results as a markdown report (environment, per-op counts, failures, bench table)."""
        from importlib import import_module

        return import_module("ds4kernels.report").markdown(self.model_dump(mode="json"))
