"""Server lifecycle: start from a command (own process group) or attach, wait, guard, stop.

The startup wait tells "still loading" (process alive, /health not yet 200) from "died"
(process exited) and, for an attached server, "unreachable" (nothing answers at the URL); each
error carries the tail of the server log. Started servers are registered in a
:class:`~ds4sync.core.children.ChildRegistry` when one is given, so a killed ds4sync leaves no
server behind, and are stopped with the one stop routine
(:func:`ds4sync.core.proc.stop_process_group`: the whole group, engine core and workers too).
After a failed probe the guard checks the process, ``/health`` *and* a 1-token completion,
because a live ``/health`` can mask a wedged engine.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ds4sync.core.children import ChildRegistry
from ds4sync.core.errors import Ds4syncError, ExitCode
from ds4sync.core.files import tail_lines
from ds4sync.core.proc import group_members, group_states, process_state, spawn, stop_process_group
from ds4sync.models.serving_results import StartupKind, StartupOutcome
from ds4sync.models.serving_settings import ServerConfig
from ds4sync.serving.client import Deadline, OpenAIClient, RequestFailed

LOG_TAIL_LINES = 25
#: vLLM's own line when an engine worker process ends (``vllm/v1/executor/multiproc_executor.py``).
_WORKER_DIED = re.compile(r"Worker proc (\S+) died unexpectedly \(exit code: (-?\d+|None)\)")
PROGRESS_EVERY_S = 30.0
Progress = Callable[[str], None]


class ServerStartError(Ds4syncError):
    """The server did not become ready: ``kind`` is ``died``, ``still-loading``, ``unreachable`` or ``port-busy``.

    ``outcome`` is the start-up outcome as recorded (exit code, seconds waited, log tail).
    """

    exit_code = ExitCode.FAILED

    def __init__(
        self,
        kind: str,
        what: str,
        *,
        where: str | None = None,
        fix: str | None = None,
        log_tail: str = "",
        outcome: StartupOutcome | None = None,
    ) -> None:
        super().__init__(what, where=where, fix=fix)
        self.kind = kind
        self.log_tail = log_tail
        self.outcome = outcome


@dataclass
class ServerHandle:
    """A server ds4sync started (``proc`` set) or attached to (``proc`` None).

    ``ready_s`` is the cold-boot time in seconds (start until /health 200 and the model listed);
    ``log_offset`` the log's size in bytes when this server started (earlier servers' lines
    in the same log are never read as this one's).
    """

    config: ServerConfig
    log_path: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    ready_s: float | None = None
    log_offset: int = 0
    registry: ChildRegistry | None = None
    deadline: Deadline | None = None

    @property
    def url(self) -> str:
        """The base URL (from the config, the one source of host and port)."""
        return self.config.url

    @property
    def started(self) -> bool:
        """Whether ds4sync started this server (False: attached)."""
        return self.proc is not None

    def alive(self) -> bool:
        """Whether the started process still runs (always True when attached)."""
        return self.proc is None or self.proc.poll() is None

    def stopped_by_signal(self) -> bool:
        """Whether a started server's processes are stopped (SIGSTOP, state ``T``): alive, answering nothing."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        return any(process_state(pid) in ("T", "t") for pid in group_members(self.proc.pid))

    def client(self, *, timeout_s: float | None = None, deadline: bool = True) -> OpenAIClient:
        """A client for this server; its requests are cut to the handle's overall deadline unless ``deadline`` is
        False (the guard, which must answer even after it)."""
        return OpenAIClient(
            self.url,
            self.config.model,
            timeout_s=timeout_s or self.config.request_timeout_s,
            deadline=self.deadline if deadline else None,
        )

    def log_text(self) -> str:
        """This server's part of its log ('' when attached or absent)."""
        if self.log_path is None or not self.log_path.is_file():
            return ""
        with self.log_path.open("rb") as handle:
            handle.seek(self.log_offset)
            return handle.read().decode("utf-8", "replace")


@dataclass(frozen=True)
class GuardResult:
    """Whether the server still answers: process, /health status and a 1-token completion."""

    ok: bool
    reason: str


def log_tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file, joined ('' when there is none)."""
    return "\n".join(tail_lines(path, lines))


def start_server(config: ServerConfig, *, log_path: Path, registry: ChildRegistry | None = None) -> ServerHandle:
    """Start the configured command in its own process group, output to ``log_path``; don't wait.

    The group is registered in ``registry`` (when given) until :func:`stop_server` ends it.

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
            outcome=StartupOutcome(started=False, url=config.url, kind="port-busy"),
        )
    log_path.parent.mkdir(parents=True, exist_ok=True)
    offset = log_path.stat().st_size if log_path.is_file() else 0
    proc = spawn(config.argv(), cwd=config.cwd or Path.cwd(), log_path=log_path, env_overrides=config.env)
    if registry is not None:
        registry.register(proc.pid, config.argv(), label=f"server {config.url}")
    return ServerHandle(config=config, log_path=log_path, proc=proc, log_offset=offset, registry=registry)


def attach(config: ServerConfig) -> ServerHandle:
    """A handle on an already running server at ``config.base_url`` (nothing is started or stopped)."""
    return ServerHandle(config=config)


def outcome(
    handle: ServerHandle, *, kind: StartupKind, message: str = "", waited_s: float | None = None
) -> StartupOutcome:
    """The start-up outcome of ``handle`` as recorded: kind, boot time, exit code, process state, log tail."""
    code = handle.proc.poll() if handle.proc is not None else None
    tail = log_tail(handle.log_path) if handle.started else ""
    return StartupOutcome(
        started=handle.started,
        url=handle.url,
        kind=kind,
        ready_s=handle.ready_s,
        waited_s=waited_s,
        exit_code=code,
        pid=handle.proc.pid if handle.proc is not None else None,
        process_state=process_state(handle.proc.pid) if handle.proc is not None and code is None else None,
        message=message,
        log_path=str(handle.log_path) if handle.log_path else None,
        log_tail=tuple(tail.splitlines()),
    )


def wait_ready(handle: ServerHandle, *, timeout_s: float | None = None, progress: Progress | None = None) -> float:
    """Poll until /health is 200 and the model is listed; returns the seconds waited.

    A started server may take ``startup_timeout_s``; an attached one ``attach_timeout_s`` (it
    should already run). ``progress`` gets a line every 30 s while loading.

    Raises:
        ServerStartError: ``died`` (the process exited; exit code and log tail), ``still-loading``
            (alive at the deadline; process state and log tail) or ``unreachable`` (attached, and
            nothing answered at the URL).
    """
    config = handle.config
    limit = timeout_s or (config.startup_timeout_s if handle.started else config.attach_timeout_s)
    start = time.monotonic()
    next_note = start + PROGRESS_EVERY_S
    last = "no answer yet"
    with handle.client(timeout_s=min(10.0, config.request_timeout_s), deadline=False) as client:
        while True:
            if not handle.alive():
                assert handle.proc is not None
                waited = time.monotonic() - start
                raise _not_ready(
                    handle,
                    "died",
                    f"server exited with code {handle.proc.returncode} after {waited:.1f} s while loading",
                    waited_s=waited,
                    fix="read the server log's last lines (shown) and fix the command or the build",
                )
            last = _readiness(client, config.model) or "ready"
            now = time.monotonic()
            if last == "ready":
                handle.ready_s = now - start
                return handle.ready_s
            if now - start >= limit:
                break
            if progress is not None and now >= next_note:
                next_note = now + PROGRESS_EVERY_S
                state = process_state(handle.proc.pid) if handle.proc else None
                line = (log_tail(handle.log_path, 1) or "(log empty)") if handle.started else last
                where = f"process {handle.proc.pid} state {state}" if handle.proc else "attached"
                progress(f"still waiting for {handle.url} after {now - start:.0f} s ({where}): {line[-160:]}")
            time.sleep(config.poll_interval_s)
    waited = time.monotonic() - start
    if not handle.started:
        raise _not_ready(
            handle,
            "unreachable",
            f"no server answers at {handle.url} after {limit:g} s (last check: {last})",
            waited_s=waited,
            fix="start the server first, or give serving.server.command so that ds4sync starts it",
        )
    assert handle.proc is not None
    state = process_state(handle.proc.pid)
    raise _not_ready(
        handle,
        "still-loading",
        f"server still loading after {limit:g} s (process alive, state {state or '?'}; last check: {last})",
        waited_s=waited,
        fix="raise serving.server.startup_timeout_s if loading is just slow",
    )


def _not_ready(handle: ServerHandle, kind: StartupKind, what: str, *, waited_s: float, fix: str) -> ServerStartError:
    """The error of a start that ended as ``kind`` after ``waited_s`` seconds, with its outcome and the server
    log's last lines; ``where`` is the log of a server ds4sync started, else the URL it attached to."""
    done = outcome(handle, kind=kind, message=what, waited_s=waited_s)
    where = str(handle.log_path) if handle.started else handle.url
    return ServerStartError(kind, what, where=where, fix=fix, log_tail="\n".join(done.log_tail), outcome=done)


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
    """End a started server's whole process group (SIGINT, SIGTERM, SIGKILL, ``stop_grace_s`` apart).

    Returns the leader's exit code; attached servers are left alone (returns None).
    """
    if handle.proc is None:
        return None
    code = stop_process_group(handle.proc.pid, grace_s=handle.config.stop_grace_s, proc=handle.proc)
    if handle.registry is not None:
        handle.registry.forget(handle.proc.pid)
    return code


@contextlib.contextmanager
def serve(
    config: ServerConfig,
    *,
    log_path: Path,
    timeout_s: float | None = None,
    registry: ChildRegistry | None = None,
    progress: Progress | None = None,
) -> Iterator[ServerHandle]:
    """Start (or attach to) the server, wait until ready, yield it, and stop what was started.

    Raises:
        ServerStartError: see :func:`start_server` and :func:`wait_ready` (the process is stopped first).
    """
    handle = start_server(config, log_path=log_path, registry=registry) if config.command else attach(config)
    try:
        wait_ready(handle, timeout_s=timeout_s, progress=progress)
        yield handle
    finally:
        stop_server(handle)


def guard(handle: ServerHandle) -> GuardResult:
    """Is the server still serving? Process alive and not stopped, /health 200 and a 1-token completion,
    each within ``guard_timeout_s``."""
    if not handle.alive():
        code = handle.proc.returncode if handle.proc else None
        return GuardResult(False, f"server process exited with code {code}")
    if handle.stopped_by_signal():  # in the words the watch uses, whichever of the two sees it first
        sign = process_sign(handle) or "server processes stopped (state T, e.g. SIGSTOP)"
        return GuardResult(False, f"wedged: {sign}")
    limit = handle.config.guard_timeout_s
    with handle.client(timeout_s=limit, deadline=False) as client:
        try:
            status = client.health()
            if status != 200:
                return GuardResult(False, f"/health answered {status}")
            client.complete("ping", max_tokens=1, timeout_s=limit)
        except RequestFailed as exc:
            word = "wedged: " if exc.kind == "timeout" else ""
            died = worker_death(handle.log_text())
            return GuardResult(False, f"{word}guard failed ({exc.kind}): {exc}" + (f"; {died}" if died else ""))
    return GuardResult(True, "/health 200 and a 1-token completion answered")


def worker_death(log_text: str) -> str | None:
    """How an engine worker ended, from vLLM's own log line, or None when the log names no such end.

    A negative exit code is the signal that ended it: ``-4`` is SIGILL, an instruction this CPU does not have
    (a build for another CPU), ``-9`` SIGKILL (often the kernel's OOM killer), ``-11`` SIGSEGV.
    """
    found = _WORKER_DIED.findall(log_text)
    if not found:
        return None
    worker, code = found[-1]
    if code == "None" or int(code) >= 0:
        return f"engine worker {worker} died (exit code {code})"
    try:
        name = signal.Signals(-int(code)).name
    except ValueError:
        name = f"signal {-int(code)}"
    why = {"SIGILL": ": an instruction this CPU lacks", "SIGKILL": ": killed, often by the OOM killer"}.get(name, "")
    return f"engine worker {worker} died of {name}{why}"


def process_sign(handle: ServerHandle) -> str | None:
    """What the started server's process group says at a glance (no request): it exited, a member is
    stopped (state ``T``, e.g. SIGSTOP) or a zombie (state ``Z``); None when nothing is wrong or attached."""
    if handle.proc is None:
        return None
    if handle.proc.poll() is not None:
        return f"server process exited with code {handle.proc.returncode}"
    states = group_states(handle.proc.pid)
    stopped = sorted(pid for pid, state in states.items() if state in ("T", "t"))
    if stopped:
        return f"server processes stopped (state T, e.g. SIGSTOP): pid {', '.join(map(str, stopped))}"
    zombies = sorted(pid for pid, state in states.items() if state == "Z")
    if zombies:
        return f"server process(es) {', '.join(map(str, zombies))} are zombies (state Z: exited, never reaped)"
    return None


class Watch:
    """Signs that a server stopped serving, polled (:meth:`check`) while a probe runs, whatever its
    request timeouts: the process group's states (:func:`process_sign`; an exit at once, a stopped or
    zombie member when two polls in a row see it) and ``/health`` (not 200 for ``guard_timeout_s``)."""

    def __init__(self, handle: ServerHandle, *, health_timeout_s: float = 5.0) -> None:
        self.handle = handle
        self.health_timeout_s = min(health_timeout_s, handle.config.guard_timeout_s)
        self._pending: str | None = None
        self._failing_since: float | None = None

    def check(self) -> str | None:
        """The wedge, named (``server processes stopped (state T ...)``), or None while it still serves."""
        sign = process_sign(self.handle)
        if sign is not None:
            if sign.startswith("server process exited") or sign == self._pending:
                return sign
            self._pending = sign
            return None
        self._pending = None
        with self.handle.client(timeout_s=self.health_timeout_s, deadline=False) as client:
            try:
                ok = client.health() == 200
            except RequestFailed:
                ok = False
        now = time.monotonic()
        if ok:
            self._failing_since = None
            return None
        self._failing_since = self._failing_since or now
        if now - self._failing_since >= self.handle.config.guard_timeout_s:
            return f"/health has not answered 200 for {now - self._failing_since:.0f} s"
        return None
