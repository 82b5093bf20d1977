"""The kernel-check suite: every grid case of every op, against the torch reference, optionally timed.

``run_suite`` returns a plain JSON-able dict (the ds4sync side validates it into typed results).
"""

from __future__ import annotations

import time
import warnings
from datetime import UTC, datetime
from typing import Any

import torch

from . import adapters
from .check import CHECKS, REFERENCES, deterministic
from .grid import ALL_CASES

OPS = ("prefill", "decode", "topk", "routing", "mhc_pre", "mhc_post")  # the default set
OPT_IN_OPS: tuple[str, ...] = ()  # ops that run only when named (none now: mHC beats torch at every shape)


def environment(device: str) -> dict:
    """GPU name, driver, torch/triton versions, date (UTC) and whether the interpreter is on."""
    import triton

    from .common import interpreting

    env = {
        "device": device,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "interpreter": interpreting(),
        "gpu": None,
        "driver": None,
        "sm_count": None,
    }
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        env.update(gpu=props.name, sm_count=props.multi_processor_count)
        try:
            import pynvml

            pynvml.nvmlInit()
            env["driver"] = str(pynvml.nvmlSystemGetDriverVersion())
        except Exception:  # the driver version is informative only
            env["driver"] = None
    return env


def run_case(case, impl, device: str, repeats: int, seed: int) -> tuple[dict, dict]:
    """One grid case of ``impl`` against the op's reference and check, plus bitwise determinism over
    ``repeats`` calls: (the case's result row, its arguments). Raises whatever the implementation raises."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    args = case.build(device, g)
    ref = REFERENCES[case.op](args)
    result = {
        "name": case.name,
        "status": "pass",
        "metric": None,
        "tolerance": None,
        "detail": "",
        "deterministic": None,
        "seconds": 0.0,
    }
    start = time.perf_counter()
    out = impl.call(args)
    verdict = CHECKS[case.op](out, ref, args, impl.clean)
    keep = None
    if case.op in ("prefill", "decode") and not (impl.clean and args.get("clean", True)):
        keep = torch.isfinite(ref)
    det = deterministic(impl.call, args, out, repeats, keep) if repeats else None
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    result.update(
        metric=verdict.get("metric"),
        tolerance=verdict.get("tolerance"),
        detail=verdict["detail"],
        deterministic=det,
        seconds=time.perf_counter() - start,
    )
    if not verdict["ok"] or det is False:
        result["status"] = "fail"
        if det is False:
            result["detail"] = "; ".join(filter(None, [result["detail"], f"not bitwise deterministic over {repeats}"]))
    return result, args


def _has_work(op: str, args: dict) -> bool:
    first = {
        "prefill": "q",
        "decode": "q",
        "topk": "logits",
        "routing": "logits",
        "mhc_pre": "x",
        "mhc_post": "residual",
    }[op]
    return args[first].shape[0] > 0


def run_suite(
    ops=None,
    candidate: str | None = None,
    bench: bool = False,
    device: str | None = None,
    scale: str | None = None,
    repeats: int | None = None,
    seed: int = 0,
) -> dict:
    """Run the grid (and with ``bench`` the benchmarks) for ``ops`` on ``device``.

    Args:
        ops: op names (default: all six: prefill, decode, topk, routing, mhc_pre, mhc_post).
        candidate: ``module:function[@adapter]`` checked instead of our kernels (needs exactly one op).
        device: "cuda" / "cpu" (default: cuda when available; cpu needs TRITON_INTERPRET=1).
        scale: "full" (GPU grid + benchmark shapes) or "ci" (small, interpreter); default by device.
        repeats: determinism repeats (default 20 on a GPU, 2 under the interpreter).
    Raises:
        ValueError: unknown op, bad candidate, or benchmarks asked for without a GPU.
    """
    from .common import interpreting

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu" and not interpreting():
        raise ValueError("on the CPU the Triton kernels need TRITON_INTERPRET=1 (set it before importing triton)")
    if bench and not device.startswith("cuda"):
        raise ValueError("benchmarks need a CUDA device")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device} asked for, but torch sees no CUDA device")
    scale = scale or ("full" if device.startswith("cuda") else "ci")
    repeats = (20 if device.startswith("cuda") else 2) if repeats is None else repeats
    ops = tuple(ops or OPS)
    unknown = [o for o in ops if o not in ALL_CASES]
    if unknown:
        raise ValueError(f"unknown op(s) {unknown}; known: {', '.join(OPS + OPT_IN_OPS)}")
    if candidate and len(ops) != 1:
        raise ValueError("--candidate checks one op: pass --op")
    report: dict[str, Any] = {
        "environment": environment(device),
        "scale": scale,
        "repeats": repeats,
        "ops": [],
        "bench": [],
    }
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # the references are plain fp32
    try:
        with warnings.catch_warnings():
            if interpreting():  # numpy warns about inf/NaN arithmetic the edge cases do on purpose
                warnings.simplefilter("ignore", RuntimeWarning)
            for op in ops:
                report["ops"].append(_run_op(op, candidate, bench, device, scale, repeats, seed, report["bench"]))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return report


def _run_op(op, candidate, bench, device, scale, repeats, seed, bench_rows) -> dict:
    """All grid cases of one op (the candidate or our kernel), benchmarked when asked."""
    impl = adapters.candidate(op, candidate) if candidate else adapters.OURS[op]
    cases = []
    for i, case in enumerate(ALL_CASES[op](scale)):
        if case.tags & impl.skip:
            cases.append(
                {
                    "name": case.name,
                    "status": "skip",
                    "metric": None,
                    "tolerance": None,
                    "detail": f"{impl.label(device)} does not take {sorted(case.tags & impl.skip)}",
                    "deterministic": None,
                    "seconds": 0.0,
                }
            )
            continue
        try:
            result, args = run_case(case, impl, device, repeats, seed + i)
        except Exception as exc:  # a crash in the implementation is a failed case, not a crashed suite
            cases.append(
                {
                    "name": case.name,
                    "status": "error",
                    "metric": None,
                    "tolerance": None,
                    "detail": f"{type(exc).__name__}: {exc}"[:500],
                    "deterministic": None,
                    "seconds": 0.0,
                }
            )
            continue
        cases.append(result)
        if bench and result["status"] == "pass" and _has_work(op, args):
            from .bench import bench_case

            bench_rows.append(
                bench_case(op, case.name, impl.call, REFERENCES[op], args, case.target, graph_safe=impl.graph_safe)
            )
        del args
    return {"op": op, "impl": impl.label(device), "cases": cases}
