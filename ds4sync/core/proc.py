"""The one subprocess runner: timeouts, process groups, logs, clean interruption.

Every child runs in its own session (process group) so that a timeout or Ctrl-C stops
the whole tree it spawned (compilers, pytest workers, servers), never just the parent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ds4sync.core.errors import ToolMissingError

KILL_GRACE_S = 5.0


@dataclass(frozen=True)
class ProcResult:
    """The outcome of one child process.

    ``returncode`` is None when the process was killed for its timeout; ``output`` is
    the combined stdout/stderr (also in ``log_path`` when one was given).
    """

    argv: tuple[str, ...]
    cwd: str
    returncode: int | None
    output: str
    duration_s: float
    timed_out: bool = False
    interrupted: bool = False
    log_path: str | None = None
    env_overrides: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        """One line naming argv, exit status, cwd and log, for error messages."""
        status = "timed out" if self.timed_out else f"exit {self.returncode}"
        where = f" (log: {self.log_path})" if self.log_path else ""
        return f"`{' '.join(self.argv)}` in {self.cwd}: {status}{where}"


def compose_env(
    overrides: Mapping[str, str] | None, *, base: Mapping[str, str] | None = None, drop: Sequence[str] = ()
) -> dict[str, str]:
    """The child environment: ``base`` (default: this process) minus ``drop``, then ``overrides``."""
    env = dict(os.environ if base is None else base)
    for name in drop:
        env.pop(name, None)
    env.update({k: str(v) for k, v in (overrides or {}).items()})
    return env


def stop_groups(pgids: Sequence[int], *, grace_s: float = KILL_GRACE_S) -> None:
    """Stop process groups started elsewhere (by pid only): SIGTERM all, wait up to ``grace_s``, SIGKILL.

    For children whose ``Popen`` lives in another thread (gates run in a pool); :func:`kill_group`
    is the same routine for a child we hold.
    """
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pgids and time.monotonic() < deadline and any(_group_alive(pgid) for pgid in pgids):
        time.sleep(0.05)
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid_alive(pgid)


def kill_group(proc: subprocess.Popen[bytes], *, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM the child's process group, then SIGKILL it after ``grace_s`` seconds."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    # A group can outlive its leader: reap stragglers too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


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
) -> ProcResult:
    """Run ``argv`` in its own process group and return its result; never raises on exit status.

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

    Raises:
        ToolMissingError: the program does not exist.
        KeyboardInterrupt: re-raised after the child's group has been stopped.
    """
    overrides = {k: str(v) for k, v in (env_overrides or {}).items()}
    child_env = compose_env(overrides, base=env)
    start = time.monotonic()
    log = open(log_path, "ab") if log_path else None  # noqa: SIM115 - closed below
    try:
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=str(cwd),
                env=child_env,
                start_new_session=True,
                stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        except FileNotFoundError as exc:
            raise ToolMissingError(
                f"program not found: {argv[0]}", where=str(cwd), fix="install it or put it on PATH"
            ) from exc
        if on_start is not None:
            on_start(proc.pid)
        chunks: list[bytes] = []
        reader = threading.Thread(target=_pump, args=(proc, chunks, log, on_line), daemon=True)
        reader.start()
        if stdin_data is not None and proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(stdin_data)
            proc.stdin.close()
        timed_out = interrupted = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
        except KeyboardInterrupt:
            interrupted = True
            kill_group(proc)
            raise
        finally:
            reader.join(timeout=10)
        return ProcResult(
            argv=tuple(argv),
            cwd=str(cwd),
            returncode=None if timed_out else proc.returncode,
            output=b"".join(chunks).decode("utf-8", "replace"),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
            interrupted=interrupted,
            log_path=str(log_path) if log_path else None,
            env_overrides=overrides,
        )
    finally:
        if log:
            log.close()


def _pump(
    proc: subprocess.Popen[bytes], chunks: list[bytes], log: object, on_line: Callable[[str], None] | None
) -> None:
    assert proc.stdout is not None
    for line in iter(proc.stdout.readline, b""):
        chunks.append(line)
        if log is not None:
            log.write(line)  # type: ignore[attr-defined]
            log.flush()  # type: ignore[attr-defined]
        if on_line is not None:
            on_line(line.decode("utf-8", "replace").rstrip("\n"))
    proc.stdout.close()


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

    The caller owns the returned process and stops it with :func:`kill_group`.

    Raises:
        ToolMissingError: the program does not exist.
    """
    with open(log_path, "ab") as log:
        try:
            return subprocess.Popen(
                list(argv),
                cwd=str(cwd),
                env=compose_env(env_overrides),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        except FileNotFoundError as exc:
            raise ToolMissingError(
                f"program not found: {argv[0]}", where=str(cwd), fix="install it or put it on PATH"
            ) from exc


def process_state(pid: int) -> str | None:
    """The one-letter state of a process from /proc (R running, S sleeping, D disk, Z zombie...), or None."""
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    return None
