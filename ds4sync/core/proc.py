"""The one subprocess runner: timeouts, process groups, logs, clean interruption.

Every child runs in its own session (process group) so that a timeout or Ctrl-C stops
the whole tree it spawned (compilers, pytest workers, servers), never just the parent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ds4sync.core.errors import Ds4syncError, StateError, ToolMissingError
from ds4sync.core.redact import is_secret_name, redact_secrets

KILL_GRACE_S = 5.0
_log = logging.getLogger("ds4sync.proc")

if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # Started in the background with SIGINT ignored: children would inherit that and never get
    # the SIGINT that lets them stop cleanly (pytest writes its JUnit XML on it).
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: Set in every child's environment while a registry is active (``<run id>:<ds4sync pid>``), and
#: inherited by its own children: finds a child that a kill caught before it was registered.
CHILD_MARK = "DS4SYNC_CHILD_OF"
# Registries (ds4sync.core.children.ChildRegistry) that children started now are recorded in;
# pushed and popped by ds4sync.core.children.registered_children.
ACTIVE_REGISTRIES: list[Any] = []


@dataclass(frozen=True)
class ProcResult:
    """The outcome of one child process.

    ``returncode`` is None when the process was killed for its timeout; ``output`` is
    the combined stdout/stderr (also in ``log_path`` when one was given). A Ctrl-C is never a result: it is
    re-raised once the child's group was stopped.
    """

    argv: tuple[str, ...]
    cwd: str
    returncode: int | None
    output: str
    duration_s: float
    timed_out: bool = False
    log_path: str | None = None
    env_overrides: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        """One line naming argv, exit status, cwd and log, for error messages."""
        status = "timed out" if self.timed_out else f"exit {self.returncode}"
        where = f" (log: {self.log_path})" if self.log_path else ""
        return f"`{' '.join(self.argv)}` in {self.cwd}: {status}{where}"


#: Inherited ``GIT_*`` variables kept (pre-commit's ``no_git_env`` is the model): how to reach
#: remotes and authenticate, explicit config files, identity. Everything else that names a
#: repository, an index, a work tree, an object dir or a config injection is dropped.
GIT_ENV_ALLOW = frozenset(
    {
        "GIT_EXEC_PATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_SSL_CAINFO",
        "GIT_SSL_NO_VERIFY",
        "GIT_ASKPASS",
        "GIT_TERMINAL_PROMPT",
        "GIT_HTTP_PROXY_AUTHMETHOD",
        "GIT_ALLOW_PROTOCOL",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_COUNT",
        "GIT_CEILING_DIRECTORIES",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
    }
)
_GIT_ENV_ALLOW_PREFIXES = ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")


def without_git_env(source: Mapping[str, str]) -> dict[str, str]:
    """``source`` minus every ``GIT_*`` variable outside :data:`GIT_ENV_ALLOW`: the environment git and every
    child ds4sync starts (gates, builds, servers) share, whatever repository a git alias or hook that ran
    ds4sync pointed ``GIT_DIR``/``GIT_INDEX_FILE``/``GIT_WORK_TREE`` at."""
    return {
        key: value
        for key, value in source.items()
        if not key.startswith("GIT_") or key in GIT_ENV_ALLOW or key.startswith(_GIT_ENV_ALLOW_PREFIXES)
    }


def compose_env(
    overrides: Mapping[str, str] | None, *, base: Mapping[str, str] | None = None, drop: Sequence[str] = ()
) -> dict[str, str]:
    """The child environment: ``base`` minus ``drop``, then ``overrides`` (what the child's definition sets,
    ``GIT_*`` included).

    Without ``base``, this process's environment minus the caller's git variables (a git alias or hook
    exports ``GIT_DIR``, ``GIT_INDEX_FILE``, ``GIT_WORK_TREE``: a child must not see the user's checkout
    through them; :func:`without_git_env`). An explicit ``base`` is the caller's own
    composition, made from that same clean environment (the build's is).
    """

    env = without_git_env(os.environ) if base is None else dict(base)
    for name in drop:
        env.pop(name, None)
    env.update({k: str(v) for k, v in (overrides or {}).items()})
    return env


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``, read from /proc.

    A group outlives its leader: after the leader exits, its children (an engine core, workers)
    keep the group id. Falls back to ``killpg(pgid, 0)`` where /proc is absent ([pgid] or []).
    """
    proc_root = Path("/proc")
    if not proc_root.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members = []
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
            # fields[0] is the state, fields[2] the process group (stat(5) fields 3 and 5)
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return members


def group_states(pgid: int) -> dict[int, str]:
    """Every process of group ``pgid``, zombies included, with its one-letter /proc state (``T`` stopped,
    ``Z`` zombie, ``R``, ``S``, ``D``...); ``{}`` where /proc is absent."""
    states: dict[int, str] = {}
    proc_root = Path("/proc")
    if not proc_root.is_dir():
        return states
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
            if int(fields[2]) == pgid:
                states[int(entry.name)] = fields[0]
    return states


def stop_process_group(
    pgid: int, *, grace_s: float = KILL_GRACE_S, proc: subprocess.Popen[bytes] | None = None
) -> int | None:
    """End process group ``pgid``: SIGINT, wait, SIGTERM, wait, SIGKILL; the whole group, even without its leader.

    The one child-stop routine of the package. Each step signals the whole group, then waits up
    to ``grace_s`` seconds until no live member is left (see :func:`group_members`); SIGCONT follows
    SIGINT and SIGTERM so that stopped (SIGSTOPped) members can act on them. SIGINT first lets a
    child write what it has (pytest its JUnit XML, a server its last log lines). ``proc``, when
    given, is the group's leader as our child: it is reaped, and its exit code returned.

    Returns:
        The leader's exit code when ``proc`` is given (negative: killed by that signal), else None.
    """
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        if not _group_running(pgid, proc):
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        if sig != signal.SIGKILL:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGCONT)
        _wait_group(pgid, proc, grace_s if sig != signal.SIGKILL else max(grace_s, 5.0))
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        return proc.returncode
    return None


def _group_running(pgid: int, proc: subprocess.Popen[bytes] | None) -> bool:
    if proc is not None:
        proc.poll()  # reap the leader, so that it does not count as a zombie member
    return bool(group_members(pgid))


def _wait_group(pgid: int, proc: subprocess.Popen[bytes] | None, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    pause = 0.01
    while _group_running(pgid, proc) and time.monotonic() < deadline:
        time.sleep(pause)  # polling the group's members: a group has no handle to wait on
        pause = min(pause * 2, 0.2)


def stop_process_groups(pgids: Iterable[int], *, grace_s: float = KILL_GRACE_S) -> None:
    """:func:`stop_process_group` on several groups at once (one thread each), so the waits overlap."""
    groups = list(dict.fromkeys(pgids))
    threads = [threading.Thread(target=stop_process_group, args=(g,), kwargs={"grace_s": grace_s}) for g in groups]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def kill_group(proc: subprocess.Popen[bytes], *, grace_s: float = KILL_GRACE_S) -> None:
    """Stop the child's whole process group with :func:`stop_process_group` (the child leads its group)."""
    stop_process_group(proc.pid, grace_s=grace_s, proc=proc)


def run(
    argv: Sequence[str],
    *,
    cwd: str | Path,
    env: Mapping[str, str] | None = None,
    env_overrides: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    log_path: str | Path | None = None,
    on_line: Callable[[str], None] | None = None,
    stdin_data: bytes | None = None,
    on_start: Callable[[int], None] | None = None,
    grace_s: float = KILL_GRACE_S,
) -> ProcResult:
    """Run ``argv`` in its own process group and return its result; never raises on exit status.

    The output (returned and logged) has secrets redacted (:mod:`ds4sync.core.redact`). While a
    registry is active (:func:`ds4sync.core.children.registered_children`) the child's group is
    registered there until it ended; members a finished leader left in its group are stopped.

    Args:
        argv: program and arguments; the program must be on PATH or a path.
        cwd: working directory.
        env: full child environment (default: this process's, plus ``env_overrides``).
        env_overrides: variables set on top of ``env``; recorded in the result.
        timeout_s: wall-clock limit in seconds; the group is killed past it.
        log_path: combined output is streamed here as it arrives.
        on_line: called with each output line (without newline) as it arrives.
        stdin_data: bytes written to the child's stdin (stdin is /dev/null otherwise).
        on_start: called with the child's pid (also its process-group id) once it started,
            so a caller running children from worker threads can stop them on Ctrl-C.
        grace_s: seconds each of SIGINT and SIGTERM is given when the group is stopped.

    Raises:
        ToolMissingError: the program does not exist.
        KeyboardInterrupt: re-raised after the child's group has been stopped.
    """
    overrides = {k: str(v) for k, v in (env_overrides or {}).items()}
    child_env = _mark(compose_env(overrides, base=env))
    _log.debug("run %s  (in %s%s)", redact_secrets(" ".join(argv)), cwd, f", log {log_path}" if log_path else "")
    start = time.monotonic()
    log = open(log_path, "ab") if log_path else None  # noqa: SIM115 - closed below
    try:
        proc = _popen(argv, cwd=cwd, env=child_env, stdin_data=stdin_data)
        if on_start is not None:
            on_start(proc.pid)
        chunks: list[bytes] = []
        secret = tuple(v for k, v in overrides.items() if is_secret_name(k))
        reader = threading.Thread(target=_pump, args=(proc, chunks, log, on_line, secret), daemon=True)
        reader.start()
        _feed(proc, stdin_data)
        timed_out = _wait_stopping_group(proc, reader, timeout_s=timeout_s, grace_s=grace_s)
        return ProcResult(
            argv=tuple(argv),
            cwd=str(cwd),
            returncode=None if timed_out else proc.returncode,
            output=b"".join(chunks).decode("utf-8", "replace"),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
            log_path=str(log_path) if log_path else None,
            env_overrides=overrides,
        )
    finally:
        if log:
            log.close()


def _popen(
    argv: Sequence[str], *, cwd: str | Path, env: Mapping[str, str], stdin_data: bytes | None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session (and process group) of its own, output piped, and register its group.

    Raises:
        ToolMissingError: the program does not exist.
    """
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=str(cwd),
            env=env,
            start_new_session=True,
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except FileNotFoundError as exc:
        raise not_started(argv[0], cwd) from exc
    _register(proc.pid, argv)
    return proc


def _feed(proc: subprocess.Popen[bytes], stdin_data: bytes | None) -> None:
    """Write ``stdin_data`` to the child's stdin and close it; a child that exits unread is no error."""
    if stdin_data is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(stdin_data)
        proc.stdin.close()


def _wait_stopping_group(
    proc: subprocess.Popen[bytes], reader: threading.Thread, *, timeout_s: float | None, grace_s: float
) -> bool:
    """Wait for the child (at most ``timeout_s``) and its output; return whether it timed out.

    The group is stopped past the timeout, on Ctrl-C (re-raised) and when a finished leader left members
    in it; it is unregistered once it has ended.
    """
    timed_out = interrupted = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        # Past the timeout, on Ctrl-C, and for strays a finished leader left in its group.
        if timed_out or interrupted or group_members(proc.pid):
            kill_group(proc, grace_s=grace_s)
        reader.join(timeout=10)
        if proc.poll() is not None and not group_members(proc.pid):
            _unregister(proc.pid)
    return timed_out


def _pump(
    proc: subprocess.Popen[bytes],
    chunks: list[bytes],
    log: object,
    on_line: Callable[[str], None] | None,
    secret: tuple[str, ...] = (),
) -> None:
    assert proc.stdout is not None
    for raw in iter(proc.stdout.readline, b""):
        line = _redacted(raw, secret)
        chunks.append(line)
        if log is not None:
            log.write(line)  # type: ignore[attr-defined]
            log.flush()  # type: ignore[attr-defined]
        if on_line is not None:
            on_line(line.decode("utf-8", "replace").rstrip("\n"))
    proc.stdout.close()


def _redacted(line: bytes, secret: tuple[str, ...] = ()) -> bytes:
    text = line.decode("utf-8", "replace")
    clean = redact_secrets(text, extra=secret)
    return line if clean == text else clean.encode("utf-8")


def _mark(env: dict[str, str]) -> dict[str, str]:
    if ACTIVE_REGISTRIES:
        env[CHILD_MARK] = ACTIVE_REGISTRIES[-1].mark
    return env


def _register(pid: int, argv: Sequence[str]) -> None:
    if ACTIVE_REGISTRIES:
        with contextlib.suppress(OSError):
            ACTIVE_REGISTRIES[-1].register(pid, argv)


def _unregister(pid: int) -> None:
    if ACTIVE_REGISTRIES:
        with contextlib.suppress(OSError):
            ACTIVE_REGISTRIES[-1].forget(pid)


def not_started(program: str, cwd: str | Path, *, missing: Ds4syncError | None = None) -> Ds4syncError:
    """Why a child could not start (``subprocess`` raises FileNotFoundError for both): the folder it was to
    run in is gone (a StateError), else the program is not installed (``missing``, or a ToolMissingError)."""
    if not Path(cwd).is_dir():
        return StateError(
            f"cannot run {Path(program).name}: the folder it runs in does not exist",
            where=str(cwd),
            fix="run ds4sync from a folder that exists (a removed worktree is not one)",
        )
    return missing or ToolMissingError(
        f"program not found: {program}", where=str(cwd), fix="install it or put it on PATH"
    )


def open_by(path: Path) -> list[int]:
    """Pids of live processes that hold ``path`` open (from ``/proc/<pid>/fd``; [] where there is no /proc).

    Processes this user cannot inspect are not seen.
    """
    target = os.path.realpath(path)
    holders = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) == target for fd in (entry / "fd").iterdir()):
                holders.append(int(entry.name))
    return holders


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (and is not a zombie we own)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError, IndexError):
        return stat.read_text().split(") ", 1)[1][0] != "Z"
    return True


def spawn(
    argv: Sequence[str], *, cwd: str | Path, log_path: str | Path, env_overrides: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a long-running child (a server) in its own process group, output appended to ``log_path``.

    The caller owns the returned process and stops it with :func:`kill_group`; it is registered
    in the active registry (:func:`ds4sync.core.children.registered_children`), if any.

    Raises:
        ToolMissingError: the program does not exist.
    """
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=str(cwd),
                env=_mark(compose_env(env_overrides)),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        except FileNotFoundError as exc:
            raise not_started(argv[0], cwd) from exc
    _register(proc.pid, argv)
    return proc


def process_state(pid: int) -> str | None:
    """The one-letter state of a process from /proc (R running, S sleeping, D disk, Z zombie...), or None."""
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    return None
