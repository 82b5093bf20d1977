"""The ``serving`` gate kind: the serving tier's probes as one gate of the gate runner.

Example (``gates/serving.yaml``)::

    tier: serving
    gates:
      - name: ds4-serving
        kind: serving
        run:
          config_file: serving.yaml        # a YAML with a `serving:` section, relative to the checkout
          probes: [health, exact, tool_call, reasoning, kv_capacity]

``run`` may also hold the section inline (``serving: {...}``); with neither, the runner's
``ctx.extra["serving_config"]`` is used, else the ``serving:`` section of ``ds4sync.yaml`` in
the checkout. A started server's process group goes to ``ctx.on_start`` (so the runner can stop it on
Ctrl-C) and into ``ctx.extra["child_registry"]`` when that is a ChildRegistry. Each
probe counts as one test: passed, failed or skipped; a server that does not start makes the
gate ``error``. Details carry the serving run whole (start-up and every probe with value, baseline and unit).
"""

from __future__ import annotations

import time
from pathlib import Path

from ds4sync.core.children import ChildRegistry
from ds4sync.core.errors import ConfigError
from ds4sync.core.model import FrozenModel
from ds4sync.gates.definition import Gate
from ds4sync.gates.kinds import GateContext
from ds4sync.models.config import CONFIG_NAME, load_config
from ds4sync.models.gates_details import ServingDetails
from ds4sync.models.gates_results import GateResult, GateStatus, TestCounts, TestFailure
from ds4sync.models.serving_settings import ServingConfig, read_serving_file
from ds4sync.serving.gate import run_serving_gate


class Spec(FrozenModel):
    """The ``run:`` section of a serving gate: where the serving config is, and which probes to run."""

    config_file: str | None = None
    serving: ServingConfig | None = None
    probes: tuple[str, ...] | None = None


def _serving_config(spec: Spec, ctx: GateContext) -> ServingConfig:
    if spec.serving is not None:
        return spec.serving
    if spec.config_file:
        path = Path(spec.config_file)
        path = path if path.is_absolute() else ctx.cwd / path
        return read_serving_file(path)
    found = ctx.extra.get("serving_config")
    if isinstance(found, ServingConfig):
        return found
    if (ctx.cwd / CONFIG_NAME).is_file():
        loaded = load_config(ctx.cwd / CONFIG_NAME).serving
        if loaded is not None:
            return loaded
    raise ConfigError(
        "serving gate has no serving config",
        where="run",
        fix="set run.config_file, run.serving, or the serving: section of ds4sync.yaml",
    )


def run_gate(gate: Gate, ctx: GateContext) -> GateResult:
    """Run the serving probes; passed when the server started and no probe failed."""
    spec: Spec = gate.spec  # type: ignore[assignment]
    start = time.monotonic()
    try:
        config = _serving_config(spec, ctx)
    except ConfigError as exc:
        return _result(gate, ctx, "error", exc.one_line())
    out_dir = ctx.log_dir / f"{gate.tier}-{gate.name}"
    registry = ctx.extra.get("child_registry")
    result = run_serving_gate(
        config,
        out_dir=out_dir,
        names=spec.probes,
        progress=ctx.on_line or (lambda _m: None),
        registry=registry if isinstance(registry, ChildRegistry) else None,
        on_start=ctx.on_start,
    )
    counts = result.counts()
    status: GateStatus = "failed" if counts["failed"] or counts["error"] else "passed"
    reason = "; ".join(f"{p.name}: {p.summary}" for p in result.probes if p.status in ("failed", "error"))
    if result.wedged:
        reason = f"{reason}; server unresponsive {result.wedged}"
    if status == "passed" and not counts["passed"]:  # no probe answered: nothing checked, never a green
        skipped = "; ".join(f"{p.name}: {p.reason}" for p in result.probes) or "no probe selected"
        status, reason = "not-run", f"no probe ran ({skipped}); nothing checked (see run.probes and the serving config)"
    if result.startup_error:
        status, reason = "error", result.startup_error.splitlines()[0]
    return _result(
        gate,
        ctx,
        status,
        reason or f"{counts['passed']} probes passed",
        command=tuple(config.server.argv() or ()),
        log_path=result.server_log,
        details=ServingDetails(serving=result),
        duration_s=time.monotonic() - start,
        counts=TestCounts(
            passed=counts["passed"], failed=counts["failed"], errors=counts["error"], skipped=counts["skipped"]
        ),
        failures=tuple(
            TestFailure(node_id=f"{gate.name}::{p.name}", message=p.summary)
            for p in result.probes
            if p.status in ("failed", "error")
        ),
    )


def _result(
    gate: Gate,
    ctx: GateContext,
    status: GateStatus,
    reason: str,
    *,
    command: tuple[str, ...] = (),
    log_path: str | None = None,
    details: ServingDetails | None = None,
    duration_s: float = 0.0,
    counts: TestCounts | None = None,
    failures: tuple[TestFailure, ...] = (),
) -> GateResult:
    """The serving gate's result: the server's argv and log stand for the command and its output."""
    return GateResult(
        name=gate.name,
        tier=gate.tier,
        kind="serving",
        required=gate.definition.required,
        cwd=str(ctx.cwd),
        status=status,
        reason=reason,
        command=command,
        log_path=log_path,
        details=details or ServingDetails(),
        duration_s=duration_s,
        counts=counts if counts is not None else TestCounts(),
        failures=failures,
    )
