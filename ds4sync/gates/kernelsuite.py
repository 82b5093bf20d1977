"""The kernel tier: run the DeepSeek op checks (and benchmarks) from the profile's ``kernels/`` folder.

The ops, references, Triton kernels and grids live in ``<profile>/kernels/ds4kernels`` and need the
``kernel`` extra (torch, triton); they are imported only here, inside :func:`run_kernel_suite`, never
at CLI start-up. Without a GPU the Triton kernels run under the Triton interpreter (TRITON_INTERPRET=1,
set here before the first import) on the small "ci" grid.
"""

from __future__ import annotations

import importlib
import math
import os
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from ds4sync.core.errors import Ds4syncError, ToolMissingError
from ds4sync.core.model import FrozenModel
from ds4sync.core.names import KERNEL_OPS


class KernelSuiteError(Ds4syncError):
    """The kernel suite was asked for something it cannot do (unknown op, bad candidate, no GPU for --bench)."""


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


def kernels_dir(profile: Path | None = None) -> Path:
    """``<profile>/kernels`` (default: the shipped profile)."""
    from ds4sync.config import shipped_profile

    folder = Path(profile or shipped_profile()) / "kernels"
    if not (folder / "ds4kernels" / "__init__.py").is_file():
        raise KernelSuiteError(
            "no kernel tier found",
            where=str(folder),
            fix="pass --profile pointing at a profile with kernels/ds4kernels/",
        )
    return folder


def load_kernel_tier(profile: Path | None = None, device: str | None = None) -> Any:
    """Import ``ds4kernels.suite`` from the profile. Without CUDA, turns the Triton interpreter on first.

    Raises:
        ToolMissingError: torch or triton is not installed (the ``kernel`` extra).
    """
    folder = str(kernels_dir(profile))
    try:
        import torch
    except ImportError as exc:
        raise ToolMissingError(
            "torch is not installed", fix="pip install torch==2.13.0 && pip install -e '.[kernel]'"
        ) from exc
    if (device or ("cuda" if torch.cuda.is_available() else "cpu")) == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        return importlib.import_module("ds4kernels.suite")
    except ImportError as exc:
        raise ToolMissingError(
            f"the kernel tier cannot be imported: {exc}", fix="pip install -e '.[kernel]' (torch==2.13.0 first)"
        ) from exc


def run_kernel_suite(
    ops: tuple[str, ...] | list[str] | None = None,
    candidate: str | None = None,
    bench: bool = False,
    device: str | None = None,
    *,
    profile: Path | None = None,
    scale: str | None = None,
    repeats: int | None = None,
) -> KernelSuiteResult:
    """Check ``ops`` (default all six) against the torch references, optionally benchmarking them.

    Args:
        ops: subset of prefill, decode, topk, routing, mhc_pre, mhc_post (default: all).
        candidate: ``module:function[@adapter]``, ``file.py:function[@adapter]`` or ``deepgemm`` (the
            installed ``deep_gemm`` package), checked instead of our kernels (one op). Adapters: native,
            deepgemm, vllm-triton, vllm-topk.
        bench: also time each case (GPU only) against the reference, with roofline placement.
        device: "cuda" or "cpu" (default: cuda when available; cpu runs the interpreter on the ci grid).
        scale, repeats: grid scale ("ci" or "full") and determinism repeats (defaults by device).
    Raises:
        KernelSuiteError: unknown op, bad candidate, --bench without a GPU.
        ToolMissingError: the kernel extra is not installed.
    """
    unknown = [o for o in ops or () if o not in KERNEL_OPS]
    if unknown:
        raise KernelSuiteError(f"unknown op(s) {', '.join(unknown)}", fix=f"choose from {', '.join(KERNEL_OPS)}")
    suite = load_kernel_tier(profile, device)
    try:
        raw = suite.run_suite(
            ops=ops or None, candidate=candidate, bench=bench, device=device, scale=scale, repeats=repeats
        )
    except (ValueError, ImportError, AttributeError) as exc:
        raise KernelSuiteError(str(exc), where=candidate or "kernel suite") from exc
    raw["candidate"] = candidate
    return KernelSuiteResult.model_validate(raw)
