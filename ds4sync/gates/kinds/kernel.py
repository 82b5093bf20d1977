"""The ``kernel`` gate kind: the DeepSeek kernel-check suite of the profile's ``kernels/`` folder.

Example (``gates/kernel.yaml``)::

    - name: deepseek-ops
      kind: kernel
      run: {ops: [prefill, decode, topk, routing], bench: false}
      devices: 1

The suite runs as a child of the target environment's interpreter (``{python}``, which has torch
and triton), through ``<profile>/kernels/run_suite.py``; its JSON becomes a
:class:`ds4sync.gates.kernelsuite.KernelSuiteResult`, stored whole in ``GateResult.details.kernel``
(per-op cases and the bench table). ``bench`` comes from the spec, or from the runner's
``ctx.extra["bench"]`` (``ds4sync gate --tier kernel --bench``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ds4sync.core.model import FrozenModel
from ds4sync.core.names import KERNEL_OPS
from ds4sync.gates.definition import Gate
from ds4sync.gates.envrules import classify_startup
from ds4sync.gates.kinds import GateContext, GateRun
from ds4sync.models.gates_results import GateResult, GateStatus, TestCounts, TestFailure
from ds4sync.models.kernel_results import KernelSuiteResult

TAIL_CHARS = 2000


class Spec(FrozenModel):
    """The ``run:`` section of a kernel gate.

    ``ops``: subset of prefill, decode, topk, routing (empty = all); ``candidate``:
    ``module:function[@adapter]`` checked instead of our kernels; ``bench``: also benchmark;
    ``require_targets``: with ``bench``, a missed target or a slower-than-reference case fails the gate;
    ``device``: cuda or cpu (default: cuda when the child sees one).
    """

    ops: tuple[str, ...] = ()
    candidate: str | None = None
    bench: bool = False
    require_targets: bool = False
    device: str | None = None

    def model_post_init(self, _context: Any) -> None:
        unknown = [o for o in self.ops if o not in KERNEL_OPS]
        if unknown:
            raise ValueError(f"unknown op(s) {', '.join(unknown)}; known: {', '.join(KERNEL_OPS)}")


def suite_argv(spec: Spec, python: str, script: Path, json_out: Path, bench: bool) -> list[str]:
    """The child's argv."""
    argv = [python, str(script), "--json-out", str(json_out)]
    for op in spec.ops:
        argv += ["--op", op]
    if spec.candidate:
        argv += ["--candidate", spec.candidate]
    if spec.device:
        argv += ["--device", spec.device]
    if bench:
        argv.append("--bench")
    return argv


def run_gate(gate: Gate, ctx: GateContext) -> GateResult:
    """Run the suite; passed when every case is within tolerance and deterministic (and, with
    ``require_targets``, every benchmark meets its target)."""
    spec: Spec = gate.spec  # type: ignore[assignment]
    script = gate.source.resolve().parent.parent / "kernels" / "run_suite.py"
    bench = spec.bench or bool(ctx.extra.get("bench", False))
    log = ctx.log_path(gate)
    json_out = ctx.log_path(gate, "json")
    argv = suite_argv(spec, ctx.python, script, json_out, bench)
    run = ctx.start(gate, "kernel", argv, log_path=log)
    if not script.is_file():
        return run.result("error", f"no kernel tier at {script.parent}")
    res = ctx.run_child(run, argv, log_path=log)
    if isinstance(res, GateResult):
        return res
    try:
        result = KernelSuiteResult.model_validate_json(json_out.read_text())
    except (OSError, ValidationError) as exc:
        rule = classify_startup(gate.rules, log_text=res.output)
        status: GateStatus = "incomplete" if rule else "error"
        reason = f"exit {res.returncode}, no suite result ({type(exc).__name__})"
        failure = TestFailure(
            node_id=gate.name,
            kind="error",
            message=res.output[-TAIL_CHARS:],
            env_category=rule.category if rule else None,
            env_rule=rule.name if rule else None,
        )
        return run.result(status, reason, failures=(failure,))
    return to_gate_result(result, spec, run)


def to_gate_result(result: KernelSuiteResult, spec: Spec, run: GateRun) -> GateResult:
    """Counts, failures (``op::case``), status and details from a suite result."""
    cases = [(op.op, c) for op in result.ops for c in op.cases]
    failures = [
        TestFailure(
            node_id=f"{op}::{c.name}",
            kind="failure" if c.status == "fail" else "error",
            message=c.detail,
            duration_s=c.seconds,
        )
        for op, c in cases
        if c.status in ("fail", "error")
    ]
    bench_misses = [f"bench::{r.op}::{r.case}" for r in result.bench if r.flags] if spec.require_targets else []
    failures += [
        TestFailure(node_id=name, message="; ".join(r.flags))
        for name, r in zip(bench_misses, [r for r in result.bench if r.flags], strict=False)
    ]
    counts = TestCounts(
        passed=sum(c.status == "pass" for _, c in cases),
        failed=sum(c.status == "fail" for _, c in cases) + len(bench_misses),
        errors=sum(c.status == "error" for _, c in cases),
        skipped=sum(c.status == "skip" for _, c in cases),
    )
    env = result.environment
    where = f"{env.gpu or env.device}, torch {env.torch}, triton {env.triton}"
    status: GateStatus = "failed" if failures else "passed"
    reason = f"{counts.summary()} ({where})"
    if status == "passed" and not (counts.passed or counts.failed or counts.errors):  # no case checked: no green
        ops = ", ".join(spec.ops) or "all ops"
        reason = f"the suite checked no case ({reason}) for {ops}; nothing checked (see run.ops and run.device)"
        status = "not-run"
    return run.result(
        status,
        reason,
        counts=counts,
        failures=failures,
        details={"kernel": result},
    )
