"""Implementations under test, behind one canonical call per op.

Canonical calls (keyword arguments as built by :mod:`grid`):
- prefill: ``f(q, k, k_sf, weights, ks, ke, clean, out_dtype) -> [M, N]``
- decode:  ``f(q, kv_cache, weights, context_lens[B, next_n], block_table, max_context_len, out_dtype)``
- topk:    ``f(logits, starts, ends, k) -> int32 [rows, k]``
- routing: ``f(logits, bias, route_scale, topk, input_ids, tid2eid) -> (ids int32, weights fp32)``
- mhc_pre: ``f(x, fn, scale, base, iters, hc_eps, rms_eps) -> (y, post, comb)``
- mhc_post: ``f(x, residual, post, comb) -> [T, n, d]``

A candidate is ``module:function`` (or ``path/to/file.py:function``, or the name ``deepgemm``), optionally
``@adapter`` to map a
foreign signature: ``native`` (the canonical call), ``deepgemm`` (``fp8_mqa_logits(q, (k, sf), w, ks, ke,
clean_logits=False)``; ``fp8_paged_mqa_logits(q, kv, w, lens, table, schedule_meta, max_ctx, clean_logits=False)``
with ``get_paged_mqa_logits_metadata`` from the same module), ``vllm-triton`` (``fp8_mqa_logits_triton(q, (k, sf),
w, ks, ke)``; ``fp8_paged_mqa_logits_triton(q, kv, w, lens[B, next_n], table, max_model_len)``, the DS4 fork's
SM12x fallbacks, which read the lengths as one per row) and
``vllm-topk`` (``top_k_per_row_prefill(logits, starts, ends, out, rows, stride0, stride1, k)`` into a -1 buffer).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import decode, mhc, prefill, routing, topk


@dataclass(frozen=True)
class Impl:
    """A callable taking the canonical keyword dict, with what it promises.

    Attributes:
        clean: writes -inf outside the ranges (so masks are checked exactly).
        skip: case tags it cannot take (those cases are reported as skipped, with the reason).
        graph_safe: no host sync inside, so benchmarks time it as CUDA-graph replays (a capture that
            fails falls back to eager timing, and the row says which).
        backend: for a device, which kernel the call runs there (and why not another), when that
            depends on the machine; the report's implementation column shows it.
    """

    name: str
    call: Callable[[dict], object]
    clean: bool = True
    skip: frozenset = field(default_factory=frozenset)
    graph_safe: bool = False
    backend: Callable[[torch.device], str] | None = None

    def label(self, device: str) -> str:
        """The name, with the backend on ``device`` when it has one: ``name [backend]``."""
        return f"{self.name} [{self.backend(torch.device(device))}]" if self.backend else self.name


OURS = {
    "prefill": Impl("ds4kernels.prefill.mqa_logits", lambda a: prefill.mqa_logits(**a), graph_safe=True),
    "decode": Impl("ds4kernels.decode.paged_mqa_logits", lambda a: decode.paged_mqa_logits(**a), graph_safe=True),
    "topk": Impl(
        "ds4kernels.topk.topk_per_row", lambda a: topk.topk_per_row(**a), graph_safe=True, backend=topk.backend
    ),
    "routing": Impl("ds4kernels.routing.route", lambda a: routing.route(**a), graph_safe=True),
    "mhc_pre": Impl("ds4kernels.mhc.mhc_pre", lambda a: mhc.mhc_pre(**a), graph_safe=True),
    "mhc_post": Impl("ds4kernels.mhc.mhc_post", lambda a: mhc.mhc_post(**a), graph_safe=True),
}


def _triton_utils_shim() -> dict:
    """Stand-in ``vllm`` / ``vllm.triton_utils`` modules (``tl``, ``triton``, ``LOG2E``) for loading one
    of vLLM's Triton files from a checkout when vLLM itself is not importable here."""
    import math
    import types

    import triton
    import triton.language as tl

    pkg = types.ModuleType("vllm")
    pkg.__path__ = []
    utils = types.ModuleType("vllm.triton_utils")
    vars(utils).update(tl=tl, triton=triton, LOG2E=math.log2(math.e))
    vars(pkg)["triton_utils"] = utils
    return {"vllm": pkg, "vllm.triton_utils": utils}


def load_callable(spec: str) -> Callable:
    """Resolve ``module:function`` or ``file.py:function``. Raises ValueError with a one-line reason.

    A file that imports ``vllm.triton_utils`` (vLLM's Triton kernels, read from a fork checkout) loads
    without vLLM installed: a stand-in for that one module is visible only while the file executes."""
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise ValueError(f"candidate {spec!r} must look like module:function or path/file.py:function")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise ValueError(f"candidate file {target} does not exist")
        mod_spec = importlib.util.spec_from_file_location(f"ds4cand_{path.stem}", path)
        if mod_spec is None or mod_spec.loader is None:
            raise ValueError(f"candidate file {target} cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(mod_spec)
        shim = {}
        if "vllm.triton_utils" in path.read_text(errors="replace") and importlib.util.find_spec("vllm") is None:
            shim = _triton_utils_shim()
        sys.modules.update(shim)
        try:
            mod_spec.loader.exec_module(module)
        finally:
            for name in shim:
                sys.modules.pop(name, None)
    else:
        module = importlib.import_module(target)
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"{target} has no callable {attr!r}")
    return fn


def _deepgemm(op: str, fn: Callable, spec: str) -> Impl:
    if op == "prefill":
        return Impl(
            spec,
            lambda a: fn(a["q"], (a["k"], a["k_sf"]), a["weights"], a["ks"], a["ke"], clean_logits=False),
            clean=False,
            skip=frozenset({"bf16-in", "bf16-out"}),
            graph_safe=True,
        )
    if op == "decode":
        module = importlib.import_module(fn.__module__)
        meta_fn = module.get_paged_mqa_logits_metadata

        def call(a):
            sms = torch.cuda.get_device_properties(a["q"].device).multi_processor_count
            meta = meta_fn(a["context_lens"], 64, sms)
            return fn(
                a["q"],
                a["kv_cache"],
                a["weights"],
                a["context_lens"],
                a["block_table"],
                meta,
                a["max_context_len"],
                clean_logits=False,
            )

        return Impl(spec, call, clean=False, graph_safe=True)
    raise ValueError(f"adapter deepgemm has no mapping for op {op}")


def _vllm_triton(op: str, fn: Callable, spec: str) -> Impl:
    if op == "prefill":
        return Impl(
            spec,
            lambda a: fn(a["q"], (a["k"], a["k_sf"]), a["weights"], a["ks"], a["ke"]),
            clean=False,
            skip=frozenset({"bf16-in", "bf16-out"}),
            graph_safe=True,
        )
    if op == "decode":  # context_lens [B, next_n]: the fork's kernels read it as (B, -1), one length per row
        return Impl(
            spec,
            lambda a: fn(
                a["q"],
                a["kv_cache"],
                a["weights"],
                a["context_lens"],
                a["block_table"],
                a["max_context_len"],
            ),
            clean=False,
            graph_safe=True,
        )
    raise ValueError(f"adapter vllm-triton has no mapping for op {op}")


def _vllm_topk(op: str, fn: Callable, spec: str) -> Impl:
    if op != "topk":
        raise ValueError("adapter vllm-topk maps the topk op only")

    def call(a):
        x = a["logits"]
        out = torch.full((x.shape[0], a["k"]), -1, dtype=torch.int32, device=x.device)
        fn(x, a["starts"], a["ends"], out, x.shape[0], x.stride(0), x.stride(1), a["k"])
        return out

    return Impl(spec, call)


ADAPTERS = {"deepgemm": _deepgemm, "vllm-triton": _vllm_triton, "vllm-topk": _vllm_topk}


# Named candidates: one word for a peer library, mapped to its function for each op it implements.
NAMED = {
    "deepgemm": {"prefill": "deep_gemm:fp8_mqa_logits@deepgemm", "decode": "deep_gemm:fp8_paged_mqa_logits@deepgemm"},
}


def candidate(op: str, spec: str) -> Impl:
    """Build the Impl for ``--candidate module:function[@adapter]`` (or a name in :data:`NAMED`, e.g.
    ``deepgemm``: the installed ``deep_gemm`` package's function for ``op``) on ``op``.

    Raises:
        ValueError: unknown name/adapter, or a named peer without that op (one line, with what it has).
    """
    if spec in NAMED:
        if op not in NAMED[spec]:
            raise ValueError(f"candidate {spec} has no {op} kernel; it has {', '.join(NAMED[spec])}")
        spec = NAMED[spec][op]
    target, _, adapter = spec.partition("@")
    fn = load_callable(target)
    if not adapter or adapter == "native":
        return Impl(spec, lambda a: fn(**a))
    if adapter not in ADAPTERS:
        raise ValueError(f"unknown adapter {adapter!r}; known: native, {', '.join(ADAPTERS)}")
    return ADAPTERS[adapter](op, fn, spec)
