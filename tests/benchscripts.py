"""A benchmark script (``benchmarks/<name>.py``) loaded as a module, for tests of its pure functions.

Skips the calling test module when torch or triton is missing. Without a GPU, triton's interpreter is switched on
first (triton reads the flag on its first import).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str) -> ModuleType:
    """A fresh module of ``benchmarks/<name>.py`` (its ``main`` is not run)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    pytest.importorskip("triton")
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
