"""The H200 benchmark's mixing-stage rows launch our split-K mix kernel with arguments that bind to the kernel's
current signature (``inspect.signature`` of the ``@triton.jit`` function), for every launch config the stage can
get: the interpreter's, both built-in GPU defaults and each tuned file's. No GPU: nothing is launched."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from tests import benchscripts

#: Keyword arguments a Triton launch takes that are not parameters of the kernel.
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})
TUNED = sorted((Path(__file__).resolve().parents[1] / "kernels" / "ds4kernels" / "tuned").glob("*.json"))


@pytest.fixture(scope="module")
def bench():
    return benchscripts.load("kernels_h200")


def _configs() -> list[tuple[str, dict]]:
    out = [
        ("interpreter", {"SPLIT": 0, "BLOCK_T": 16, "BLOCK_K": 32, "BT2": 8, "BLOCK_D": 32, "num_warps": 4}),
        ("gpu small", {"SPLIT": 0, "BLOCK_T": 16, "BLOCK_K": 128, "BT2": 8, "BLOCK_D": 256, "num_warps": 4}),
        ("gpu large", {"SPLIT": 1, "BLOCK_T": 64, "BLOCK_K": 64, "BT2": 8, "BLOCK_D": 256, "num_warps": 4}),
    ]
    for path in TUNED:
        for key, cfg in json.loads(path.read_text()).get("mhc_pre", {}).items():
            out.append((f"{path.stem} {key}", cfg))
    return out


def _bind(kernel, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    params = {k: v for k, v in kwargs.items() if k not in LAUNCH_OPTIONS}
    return inspect.signature(kernel.fn).bind(*args, **params)


@pytest.mark.parametrize(("name", "cfg"), _configs(), ids=[name for name, _ in _configs()])
def test_stage_row_launch_binds_to_the_mix_kernel(bench, name: str, cfg: dict) -> None:
    import torch
    from ds4kernels import mhc

    t, k, splits = 37, 4 * 256, 2
    x, fn = torch.zeros(t, k, dtype=torch.bfloat16), torch.zeros(24, k)
    mix, sq = torch.zeros(splits, t, 32), torch.zeros(splits, t)
    k_split = k // splits
    grid, args, kwargs = bench.ours_stage_launch(x, fn, mix, sq, k_split, cfg)
    bound = _bind(mhc._hc_mix_kernel, args, kwargs)
    assert grid == ((t + cfg["BLOCK_T"] - 1) // cfg["BLOCK_T"], splits)
    assert bound.arguments["T"] == t and bound.arguments["K"] == k and bound.arguments["K_SPLIT"] == k_split
    assert bound.arguments["MIX"] == 24 and bound.arguments["MIXP"] == 32
    assert bound.arguments["BLOCK_K"] == cfg["BLOCK_K"] and bound.arguments["LOAD"] in ("ptr", "tma")
    assert bound.arguments["PRECISION"] == cfg.get("PRECISION", "tf32x3")
    assert not {"BT2", "BLOCK_D", "SPLIT"} & set(kwargs), "finish-stage keys are not the mix kernel's"


def test_the_old_stage_row_call_does_not_bind(bench) -> None:
    """The call the rows made before the kernel took its TMA descriptors: the check above would have caught it."""
    from ds4kernels import mhc

    old_args = ("x", "fn", "mix", "sq", 137, 16384, 1024)
    old_kwargs = {"MIXP": 32, "MIX": 24, "BLOCK_T": 16, "BLOCK_K": 128, "PRECISION": "tf32x3", "num_warps": 4}
    with pytest.raises(TypeError, match="x_desc"):
        _bind(mhc._hc_mix_kernel, old_args, old_kwargs)
