"""The kernel tier: run the DeepSeek op checks (and benchmarks) from the profile's ``kernels/`` folder.

The ops, references, Triton kernels and grids live in ``<profile>/kernels/ds4kernels`` and need the
``kernel`` extra (torch, triton); they are imported only here, inside :func:`run_kernel_suite`, never
at CLI start-up. Without a GPU the Triton kernels run under the Triton interpreter (TRITON_INTERPRET=1,
set here before the first import) on the small "ci" grid.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

from ds4sync.core.errors import Ds4syncError, ToolMissingError
from ds4sync.core.names import KERNEL_OPS
from ds4sync.models.kernel_results import (
    KernelSuiteResult,
)


class KernelSuiteError(Ds4syncError):
    """The kernel suite was asked for something it cannot do (unknown op, bad candidate, no GPU for --bench)."""


def kernels_dir(profile: Path | None = None) -> Path:
    """``<profile>/kernels`` (default: the shipped profile)."""
    from ds4sync.models.config import shipped_profile

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
