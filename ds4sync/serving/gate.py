"""The serving gate: start (or attach to) the server, run the probes in order, guard, stop.

While a probe runs, a watch polls the server every second (:class:`~ds4sync.serving.server.Watch`:
the process group's states, then ``/health``), so a stopped (SIGSTOP, state ``T``), zombie or
exited server is named within seconds whatever the request timeouts: that probe is an ``error``
naming the wedge, and the rest are skipped. After any failed probe the guard runs too (process
alive and not stopped, /health 200, a 1-token completion). All probes share one overall deadline
(``serving.deadline_s``) besides their per-request timeouts: past it, the probe in progress
fails and the rest are skipped. Ctrl-C stops the server (within the grace it prints) and raises
:class:`GateInterrupted` with the probes measured so far. The server log is kept beside the run's
other logs.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ds4sync.core.children import ChildRegistry
from ds4sync.core.errors import ToolMissingError
from ds4sync.core.model import updated
from ds4sync.models.serving_results import ProbeResult, ServingResult, StartupOutcome
from ds4sync.models.serving_settings import ServingConfig
from ds4sync.serving import bench, evalsuite, kvcache, longctx, probes
from ds4sync.serving.client import Deadline
from ds4sync.serving.server import (
    ServerHandle,
    ServerStartError,
    Watch,
    attach,
    guard,
    outcome,
    start_server,
    stop_server,
    wait_ready,
)

Progress = Callable[[str], None]
WATCH_EVERY_S = 1.0


class GateInterrupted(KeyboardInterrupt):
    """Ctrl-C during the serving gate, raised after the server was stopped; ``results`` holds the probes
    that finished before it."""

    def __init__(self, results: Sequence[ProbeResult]) -> None:
        super().__init__(f"interrupted after {len(results)} probe(s)")
        self.results = list(results)


def watched(
    name: str, run: Callable[[], ProbeResult], handle: ServerHandle, *, every_s: float = WATCH_EVERY_S
) -> tuple[ProbeResult, threading.Thread | None]:
    """Run one probe in a worker thread while :class:`Watch` polls the server every ``every_s`` seconds.

    Returns the probe's result, or, when the watch names a wedge first, an ``error`` result naming it
    (``details.wedged``) and the worker left behind (it ends once the server is stopped).
    """
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["result"] = run()
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc

    start = time.monotonic()
    worker = threading.Thread(target=work, name=f"probe-{name}", daemon=True)
    worker.start()
    watch = Watch(handle)
    while worker.is_alive():
        worker.join(every_s)
        sign = watch.check() if worker.is_alive() else None
        if sign is not None:
            waited = time.monotonic() - start
            summary = f"error: server wedged during {name}, named after {waited:.1f} s: {sign}"
            result = ProbeResult(
                name=name,
                status="error",
                summary=summary,
                duration_s=waited,
                details={
                    "wedged": sign,
                    "reason": summary,
                    "error": {"kind": "wedged", "status": None, "message": sign},
                },
            )
            return result, worker
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"], None  # type: ignore[return-value]


def _dead(handle: ServerHandle) -> str | None:
    if handle.proc is not None and handle.proc.poll() is not None:
        return f"process exited with code {handle.proc.returncode}"
    return None


def _wedge_check(handle: ServerHandle) -> Callable[[], str | None]:
    def check() -> str | None:
        result = guard(handle)
        if result.ok:
            return None
        return result.reason if result.reason.startswith("wedged") else f"wedged: {result.reason}"

    return check


def run_probe(name: str, config: ServingConfig, handle: ServerHandle, *, out_dir: Path) -> ProbeResult:
    """Run one named probe against a ready server (a probe with nothing configured is skipped)."""
    with handle.client() as client:
        if name == "health":
            return probes.probe_health(client)
        if name == "exact":
            cases = tuple(config.exact) + (evalsuite.load_cases(config.exact_file) if config.exact_file else ())
            return probes.probe_exact(client, cases) if cases else probes.skipped(name, "no exact cases configured")
        if name == "tool_call":
            return (
                probes.probe_tool_call(client, config.tool_call)
                if config.tool_call
                else probes.skipped(name, "no tool_call case configured")
            )
        if name == "reasoning":
            return (
                probes.probe_reasoning(client, config.reasoning)
                if config.reasoning
                else probes.skipped(name, "no reasoning case configured")
            )
        if name == "kv_capacity":
            log = handle.log_text() if handle.started else None
            return kvcache.probe_kv_capacity(client, log, config.kv, dead=_dead(handle))
        if name == "recall":
            return longctx.probe_recall(client, config.recall)
        if name == "eval":
            return evalsuite.probe_eval(client, config.eval, wedged=_wedge_check(handle))
        if name == "throughput":
            return bench.probe_throughput(client, config.bench, out_dir=out_dir / "bench")
    raise ValueError(f"unknown probe {name!r}")


def run_probes(
    config: ServingConfig,
    handle: ServerHandle,
    names: Sequence[str],
    *,
    out_dir: Path,
    progress: Progress = lambda _m: None,
    results: list[ProbeResult] | None = None,
    left_behind: list[threading.Thread] | None = None,
) -> tuple[list[ProbeResult], str | None]:
    """Run ``names`` in order, each :func:`watched`, with the guard after each failure; returns the results
    and the wedge reason.

    Probes after a wedge, or after the handle's deadline passed, are skipped with the reason. ``results``
    (when given) is filled as probes finish, so a caller keeps them through an interrupt; workers of wedged
    probes go to ``left_behind``.
    """
    results = [] if results is None else results
    wedged: str | None = None
    for name in names:
        if wedged:
            results.append(probes.skipped(name, f"skipped: server unresponsive ({wedged})"))
            continue
        if handle.deadline is not None and handle.deadline.expired:
            results.append(
                probes.skipped(name, f"skipped: the overall deadline of {handle.deadline.limit_s:g} s passed")
            )
            continue
        progress(f"probe {name}")
        result, worker = watched(name, functools.partial(run_probe, name, config, handle, out_dir=out_dir), handle)
        if worker is not None and left_behind is not None:
            left_behind.append(worker)
        results.append(result)
        progress(f"probe {name}: {result.status}: {result.summary[:200]}")
        if result.status in ("failed", "error"):
            found = result.details.get("wedged")
            check = guard(handle) if not found else None
            if found or (check is not None and not check.ok):
                wedged = f"after {name}: {found or (check.reason if check else '')}"
                progress(f"server unresponsive {wedged}; later probes skipped")
    return results, wedged


def run_serving_gate(
    config: ServingConfig,
    *,
    out_dir: Path,
    names: Sequence[str] | None = None,
    progress: Progress = lambda _m: None,
    registry: ChildRegistry | None = None,
    on_start: Callable[[int], None] | None = None,
) -> ServingResult:
    """The whole serving tier: returns a :class:`ServingResult`; never raises for a failing server.

    ``out_dir`` receives ``server.log`` and ``bench/``. ``names`` narrows ``config.probes``. A started
    server is registered in ``registry`` and its process group id given to ``on_start``.

    Raises:
        GateInterrupted: Ctrl-C, after the server was stopped; it holds the probes that finished.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = [n for n in config.probes if names is None or n in names]
    log_path = out_dir / "server.log"
    started = config.server.command is not None
    handle = attach(config.server)
    results: list[ProbeResult] = []
    left_behind: list[threading.Thread] = []
    base = {"base_url": config.server.url, "started": started, "server_log": str(log_path) if started else None}
    try:
        if started:
            progress(f"starting server: {' '.join(config.server.argv())}")
            handle = start_server(config.server, log_path=log_path, registry=registry)
            if on_start is not None and handle.proc is not None:
                on_start(handle.proc.pid)
        progress(f"waiting for {config.server.url}")
        wait_ready(handle, progress=progress)
        progress(f"ready after {handle.ready_s:.1f} s")
        handle.deadline = Deadline(config.deadline_s)
        results, wedged = run_probes(
            config, handle, wanted, out_dir=out_dir, progress=progress, results=results, left_behind=left_behind
        )
        ready = outcome(handle, kind="ready")
    except KeyboardInterrupt:
        grace = 3 * config.server.stop_grace_s if handle.started else 0
        progress(f"interrupted after {len(results)} probe(s); stopping the server (at most {grace:g} s)")
        raise GateInterrupted(results) from None
    except (ServerStartError, ToolMissingError) as exc:
        return _not_started(exc, handle, config, wanted, started=started, base=base)
    finally:
        code = stop_server(handle)
        for worker in left_behind:
            worker.join(10.0)  # its requests fail once the server is gone
    return _probed(config, handle, results, wedged=wedged, startup=updated(ready, stop_exit_code=code), base=base)


def _not_started(
    exc: ServerStartError | ToolMissingError,
    handle: ServerHandle,
    config: ServingConfig,
    wanted: Sequence[str],
    *,
    started: bool,
    base: dict[str, Any],
) -> ServingResult:
    """Failed: the server did not start (or its program is missing); its server stopped, every probe skipped."""
    kind = exc.kind if isinstance(exc, ServerStartError) else "tool-missing"
    found = exc.outcome if isinstance(exc, ServerStartError) else None
    startup = found or StartupOutcome(started=started, url=config.server.url, kind=kind, message=exc.one_line())
    code = stop_server(handle)
    reason = f"server did not start ({kind})"
    return ServingResult(
        status="failed",
        startup_error=exc.one_line(),
        startup=updated(startup, stop_exit_code=code),
        probes=tuple(probes.skipped(n, reason) for n in wanted),
        **base,
    )


def _probed(
    config: ServingConfig,
    handle: ServerHandle,
    results: Sequence[ProbeResult],
    *,
    wedged: str | None,
    startup: StartupOutcome,
    base: dict[str, Any],
) -> ServingResult:
    """The tier's result once the probes ran: failed on any failed probe, else passed when one passed, else
    not-run (nothing checked is never a green)."""
    failed = any(r.status in ("failed", "error") for r in results)
    checked = any(r.status == "passed" for r in results)  # no probe ran: nothing checked, never a green
    deadline = handle.deadline
    return ServingResult(
        status="failed" if failed else "passed" if checked else "not-run",
        cold_boot_s=handle.ready_s,
        wedged=wedged,
        deadline_s=config.deadline_s,
        deadline_passed=bool(deadline and deadline.expired),
        startup=startup,
        probes=tuple(results),
        **base,
    )


def cold_boot_line(result: ServingResult) -> str:
    """``cold boot 24.3 s`` or why there was none."""
    if result.startup_error:
        return f"server did not start: {result.startup_error.splitlines()[0]}"
    if result.cold_boot_s is None:
        return "attached to a running server"
    return f"cold boot {result.cold_boot_s:.1f} s" if result.started else f"ready check {result.cold_boot_s:.1f} s"
