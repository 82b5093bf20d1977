"""Server lifecycle: start from a command (own process group) or attach, wait, guard, stop.

The startup wait tells "still loading" (process alive, /health not yet 200) from "died"
(process exited), and both errors carry the tail of the server log. After a failed probe
the guard checks ``/health`` *and* a 1-token completion, because a live ``/health`` can
mask a wedged engine (the fork's harness learned this the hard way).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ds4sync.core.errors import Ds4syncError, ExitCode
from ds4sync.core.files import tail_lines
from ds4sync.core.proc import kill_group, process_state, spawn
from ds4sync.serving.client import OpenAIClient, RequestFailed
from ds4sync.serving.config import ServerConfig

LOG_TAIL_LINES = 25


class ServerStartError(Ds4syncError):
    """The server did not become ready: ``kind`` is ``died``, ``still-loading`` or ``port-busy``."""

    exit_code = ExitCode.FAILED

    def __init__(
        self, kind: str, what: str, *, where: str | None = None, fix: str | None = None, log_tail: str = ""
    ) -> None:
        super().__init__(what, where=where, fix=fix)
        self.kind = kind
        self.log_tail = log_tail


@dataclass
class ServerHandle:
    """A server ds4sync started (``proc`` set) or attached to (``proc`` None).

    ``ready_s`` is the cold-boot time in seconds (start until /health 200 and the model listed).
    """

    config: ServerConfig
    log_path: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    ready_s: float | None = None

    @property
    def url(self) -> str:
        """The base URL (from the config, the one source of host and port)."""
        return self.config.url

    def alive(self) -> bool:
        """Whether the started process still runs (always True when attached)."""
        return self.proc is None or self.proc.poll() is None

    def client(self, *, timeout_s: float | None = None) -> OpenAIClient:
        """A client for this server."""
        return OpenAIClient(self.url, self.config.model, timeout_s=timeout_s or self.config.request_timeout_s)


@dataclass(frozen=True)
class GuardResult:
    """Whether the server still answers: /health status and a 1-token completion."""

    ok: bool
    reason: str


def log_tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file, joined ('' when there is none)."""
    return "\n".join(tail_lines(path, lines))


def start_server(config: ServerConfig, *, log_path: Path) -> ServerHandle:
    """Start the configured command in its own process group, output to ``log_path``; don't wait.

    Raises:
        ServerStartError: something already answers on the configured host and port (kind ``port-busy``).
        ToolMissingError: the command's program does not exist.
    """
    if config.command is None:
        raise ValueError("start_server needs a command; use attach for base_url")
    with OpenAIClient(config.url, config.model, timeout_s=2.0) as probe, contextlib.suppress(RequestFailed):
        probe.get("/health")
        raise ServerStartError(
            "port-busy",
            f"something already answers on {config.url}",
            where=config.url,
            fix="stop it, or set serving.server.port to a free port",
        )
    log_path.parent.mkdir(parents=True, exist_ok=True)
    proc = spawn(config.argv(), cwd=config.cwd or Path.cwd(), log_path=log_path, env_overrides=config.env)
    return ServerHandle(config=config, log_path=log_path, proc=proc)


def wait_ready(handle: ServerHandle, *, timeout_s: float | None = None) -> float:
    """Poll until /health is 200 and the model is listed; returns the seconds waited.

    Raises:
        ServerStartError: ``died`` (the process exited; exit code and log tail) or
            ``still-loading`` (alive at the deadline; process state and log tail).
    """
    config = handle.config
    limit = timeout_s or config.startup_timeout_s
    start = time.monotonic()
    last = "no answer yet"
    with handle.client(timeout_s=min(10.0, config.request_timeout_s)) as client:
        while True:
            if not handle.alive():
                assert handle.proc is not None
                tail = log_tail(handle.log_path)
                raise ServerStartError(
                    "died",
                    f"server exited with code {handle.proc.returncode} after "
                    f"{time.monotonic() - start:.1f} s while loading; log tail:\n{tail}",
                    where=str(handle.log_path),
                    fix="read the server log; fix the command or the build",
                    log_tail=tail,
                )
            last = _readiness(client, config.model) or "ready"
            if last == "ready":
                handle.ready_s = time.monotonic() - start
                return handle.ready_s
            if time.monotonic() - start >= limit:
                break
            time.sleep(config.poll_interval_s)
    state = process_state(handle.proc.pid) if handle.proc else None
    tail = log_tail(handle.log_path)
    raise ServerStartError(
        "still-loading",
        f"server still loading after {limit:g} s (process alive, state {state or '?'}; "
        f"last check: {last}); log tail:\n{tail}",
        where=str(handle.log_path) if handle.log_path else handle.url,
        fix="raise serving.server.startup_timeout_s if loading is just slow",
        log_tail=tail,
    )


def _readiness(client: OpenAIClient, model: str) -> str | None:
    """None when ready, else what is missing."""
    try:
        status = client.health()
        if status != 200:
            return f"/health answered {status}"
        models = client.models()
    except RequestFailed as exc:
        return str(exc)
    return None if model in models else f"model {model!r} not in /v1/models {models}"


def stop_server(handle: ServerHandle) -> int | None:
    """SIGTERM the server's process group, SIGKILL after ``stop_grace_s``; returns its exit code.

    Attached servers are left alone (returns None).
    """
    if handle.proc is None:
        return None
    if handle.proc.poll() is None:
        kill_group(handle.proc, grace_s=handle.config.stop_grace_s)
    return handle.proc.poll()


@contextlib.contextmanager
def serve(config: ServerConfig, *, log_path: Path, timeout_s: float | None = None) -> Iterator[ServerHandle]:
    """Start (or attach to) the server, wait until ready, yield it, and stop what was started.

    Raises:
        ServerStartError: see :func:`start_server` and :func:`wait_ready` (the process is stopped first).
    """
    handle = start_server(config, log_path=log_path) if config.command else ServerHandle(config=config)
    try:
        wait_ready(handle, timeout_s=timeout_s)
        yield handle
    finally:
        stop_server(handle)


def guard(handle: ServerHandle) -> GuardResult:
    """Is the server still serving? Process alive, /health 200 and a 1-token completion, within ``guard_timeout_s``."""
    if not handle.alive():
        code = handle.proc.returncode if handle.proc else None
        return GuardResult(False, f"server process exited with code {code}")
    limit = handle.config.guard_timeout_s
    with handle.client(timeout_s=limit) as client:
        try:
            status = client.health()
            if status != 200:
                return GuardResult(False, f"/health answered {status}")
            client.complete("ping", max_tokens=1, timeout_s=limit)
        except RequestFailed as exc:
            return GuardResult(False, f"guard failed ({exc.kind}): {exc}")
    return GuardResult(True, "/health 200 and a 1-token completion answered")
