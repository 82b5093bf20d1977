"""Shared pieces of the kernel tier: numerics metrics, FP8 helpers, H200 limits, cost records.

Sources: DeepGEMM ``deep_gemm/testing/numeric.py`` (``calc_diff``), the H200 datasheet and the
measured limits in the kernel-spec page (H200: 4.8 TB/s HBM3e, 1979 TFLOPS dense FP8, 989 dense BF16).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


def tma_descriptor(t: torch.Tensor, block: list[int]):
    """A host-side TMA descriptor over ``t`` as it is (its shape and strides), loaded ``block`` at a time;
    elements past ``t``'s bounds read as zero. None where TMA cannot address ``t``: its base or a stride
    other than the last not a multiple of 16 bytes, a last stride other than 1, an empty dimension, a
    block side over 256, or a triton without host-side descriptors."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:
        return None
    size = t.element_size()
    if t.data_ptr() % 16 or t.stride(-1) != 1 or any((st * size) % 16 for st in t.stride()[:-1]):
        return None
    if 0 in t.shape or max(block) > 256:
        return None
    return TensorDescriptor(t, list(t.shape), list(t.stride()), list(block))


# H200 SXM limits (dense, no sparsity). Measured achievable figures are reported beside the spec ones.
H200 = {
    "hbm_bytes_per_s": 4.8e12,
    "hbm_achievable_bytes_per_s": 4.37e12,
    "fp8_flops": 1979e12,
    "bf16_flops": 989e12,
    "tf32_flops": 495e12,
    "fp8_achievable_flops": 1.462e15,
    "bf16_achievable_flops": 0.798e15,
    "l2_bytes": 62_914_560,
}


def interpreting() -> bool:
    """Whether Triton kernels run under the interpreter (TRITON_INTERPRET=1, CPU tensors)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """DeepGEMM's similarity error ``1 - 2Σxy / Σ(x²+y²)`` in float64; 0 for two all-zero inputs.

    Args:
        x, y: tensors of the same shape (any float dtype); -inf entries must be masked by the caller.
    """
    x, y = x.double(), y.double()
    denom = (x * x + y * y).sum()
    if denom.item() == 0.0:
        return 0.0
    return float(1.0 - 2.0 * (x * y).sum() / denom)


def quant_fp8_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row FP8 e4m3 quantisation with a power-of-two (ue8m0) scale, as vLLM stores indexer keys.

    Args:
        x: [N, D] float tensor.
    Returns:
        (x_fp8 [N, D] e4m3, scale [N] fp32) with ``x ≈ x_fp8.float() * scale[:, None]``; scale > 0.
    """
    amax = x.float().abs().amax(dim=-1).clamp(min=1e-4)
    scale = torch.pow(2.0, torch.ceil(torch.log2(amax / FP8_MAX)))
    return (x.float() / scale[:, None]).to(FP8), scale.float().contiguous()


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN payloads included), for the determinism check."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return torch.equal(a.contiguous().view(width), b.contiguous().view(width))
    return torch.equal(a, b)


@dataclass(frozen=True)
class Cost:
    """Compulsory traffic and work of one op call, and which peak bounds it.

    Attributes:
        bytes: minimum bytes through HBM (each input read once, each output written once).
        flops: tensor-core FLOPs (0 for bandwidth-only ops).
        peak: "fp8", "bf16" or None (bandwidth roofline only).
    """

    bytes: float
    flops: float
    peak: str | None

    def roof_seconds(self) -> float:
        """``max(bytes / HBM, flops / peak)``: the roofline floor on an H200."""
        t_mem = self.bytes / H200["hbm_bytes_per_s"]
        t_math = self.flops / H200[f"{self.peak}_flops"] if self.peak else 0.0
        return max(t_mem, t_math)


TUNED_DIR = Path(__file__).resolve().parent / "tuned"
_TUNED_CACHE: dict[tuple[str, float], dict] = {}


def tuned_path() -> Path | None:
    """The tuned-config file for the current GPU (``tuned/<GPU name>.json``; env DS4KERNELS_TUNED overrides)."""
    if os.environ.get("DS4KERNELS_TUNED"):
        return Path(os.environ["DS4KERNELS_TUNED"])
    if interpreting() or not torch.cuda.is_available():
        return None
    return TUNED_DIR / (re.sub(r"[^A-Za-z0-9]+", "_", torch.cuda.get_device_name()).strip("_") + ".json")


def tuned(op: str, key: str) -> dict | None:
    """The launch config the sweep picked for ``op`` / ``key`` on this GPU, or None (use the defaults)."""
    path = tuned_path()
    if path is None or not path.is_file():
        return None
    stamp = (str(path), path.stat().st_mtime)
    if stamp not in _TUNED_CACHE:
        _TUNED_CACHE[stamp] = json.loads(path.read_text())
    found = _TUNED_CACHE[stamp].get(op, {}).get(key)
    return dict(found) if found else None
