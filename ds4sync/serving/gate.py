"""The serving gate: start (or attach to) the server, run the probes in order, guard, stop.

After any failed probe the guard runs (process alive, /health 200, a 1-token completion);
when it fails the server counts as wedged and every later probe is skipped with that reason
instead of hanging on it. The server log is kept beside the run's other logs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ds4sync.serving import bench, evalsuite, kvcache, longctx, probes
from ds4sync.serving.config import ServingConfig
from ds4sync.serving.results import ProbeResult, ServingResult
from ds4sync.serving.server import ServerHandle, ServerStartError, guard, start_server, stop_server, wait_ready

Progress = Callable[[str], None]


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
            return kvcache.probe_kv_capacity(client, handle.log_path, config.kv)
        if name == "recall":
            return longctx.probe_recall(client, config.recall)
        if name == "eval":
            return evalsuite.probe_eval(client, config.eval)
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
) -> tuple[list[ProbeResult], str | None]:
    """Run ``names`` in order with the guard after each failure; returns the results and the wedge reason."""
    results: list[ProbeResult] = []
    wedged: str | None = None
    for name in names:
        if wedged:
            results.append(probes.skipped(name, f"skipped: server unresponsive ({wedged})"))
            continue
        progress(f"probe {name}")
        result = run_probe(name, config, handle, out_dir=out_dir)
        results.append(result)
        if result.status == "failed":
            check = guard(handle)
            if not check.ok:
                wedged = f"after {name}: {check.reason}"
                progress(f"server unresponsive {wedged}; later probes skipped")
    return results, wedged


def run_serving_gate(
    config: ServingConfig, *, out_dir: Path, names: Sequence[str] | None = None, progress: Progress = lambda _m: None
) -> ServingResult:
    """The whole serving tier: returns a :class:`ServingResult`; never raises for a failing server.

    ``out_dir`` receives ``server.log`` and ``bench/``. ``names`` narrows ``config.probes``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = [n for n in config.probes if names is None or n in names]
    log_path = out_dir / "server.log"
    handle = ServerHandle(config=config.server)
    started = config.server.command is not None
    try:
        if started:
            progress(f"starting server: {' '.join(config.server.argv())}")
            handle = start_server(config.server, log_path=log_path)
        progress(f"waiting for {config.server.url}")
        wait_ready(handle)
        progress(f"ready after {handle.ready_s:.1f} s")
        results, wedged = run_probes(config, handle, wanted, out_dir=out_dir, progress=progress)
    except ServerStartError as exc:
        reason = f"server did not start ({exc.kind})"
        return ServingResult(
            status="failed",
            base_url=config.server.url,
            started=started,
            server_log=str(log_path) if started else None,
            startup_error=exc.one_line(),
            probes=tuple(probes.skipped(n, reason) for n in wanted),
        )
    finally:
        stop_server(handle)
    failed = any(r.status == "failed" for r in results)
    return ServingResult(
        status="failed" if failed else "passed",
        base_url=config.server.url,
        started=started,
        cold_boot_s=handle.ready_s,
        server_log=str(log_path) if started else None,
        wedged=wedged,
        probes=tuple(results),
    )


def cold_boot_line(result: ServingResult) -> str:
    """``cold boot 24.3 s`` or why there was none."""
    if result.startup_error:
        return f"server did not start: {result.startup_error.splitlines()[0]}"
    if result.cold_boot_s is None:
        return "attached to a running server"
    return f"cold boot {result.cold_boot_s:.1f} s" if result.started else f"ready check {result.cold_boot_s:.1f} s"
