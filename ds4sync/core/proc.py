"""The one subprocess runner: timeouts, process groups, logs, clean interruption.

Every child runs in its own session (process group) so that a timeout or Ctrl-C stops
the whole tree it spawned (compilers, pytest workers, servers), never just the parent.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ds4sync.core.errors import ToolMissingError
from ds4sync.core.redact import redact_secrets

if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # Started in the background with SIGINT ignored: children would inherit that and never
    # get the SIGINT that lets them stop cleanly (pytest writes its JUnit XML on it).
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


INTERRUPT_GRACE_S = 5.0
TERMINATE_GRACE_S = 5.0
KILL_WAIT_S = 5.0
_POLL_S = 0.05


def stop_group(
    pgid: int,
    *,
    proc: subprocess.Popen[bytes] | None = None,
    interrupt_s: float = INTERRUPT_GRACE_S,
    terminate_s: float = TERMINATE_GRACE_S,
) -> int | None:
    """The one child-stop routine: SIGINT, wait, SIGTERM, wait, SIGKILL to the whole process group ``pgid``.

    SIGINT first lets a child finish cleanly (pytest writes its JUnit XML on KeyboardInterrupt);
    SIGTERM after ``interrupt_s`` seconds, SIGKILL after ``terminate_s`` more. A step is skipped
    once no live member of the group is left, and the group is stopped even when its leader is
    already dead (stragglers of a killed leader are the usual leftovers). ``proc``, when given,
    is the leader's Popen: it is reaped so that its exit status is known.

    Returns:
        The leader's exit status when ``proc`` was given and it ended, else None.
    """
    stop_groups([pgid], procs=[proc] if proc is not None else (), interrupt_s=interrupt_s, terminate_s=terminate_s)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_WAIT_S)
        return proc.returncode
    return None


def stop_groups(
    pgids: Iterable[int],
    *,
    procs: Iterable[subprocess.Popen[bytes]] = (),
    interrupt_s: float = INTERRUPT_GRACE_S,
    terminate_s: float = TERMINATE_GRACE_S,
) -> None:
    """:func:`stop_group` for several groups at once: each signal goes to every group still alive, then one wait."""
    groups, leaders = list(dict.fromkeys(pgids)), list(procs)
    steps = ((signal.SIGINT, interrupt_s), (signal.SIGTERM, terminate_s), (signal.SIGKILL, KILL_WAIT_S))
    for sig, wait_s in steps:
        alive = _alive_groups(groups, leaders)
        if not alive:
            return
        for pgid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
        deadline = time.monotonic() + wait_s
        while _alive_groups(alive, leaders) and time.monotonic() < deadline:
            time.sleep(_POLL_S)


def kill_group(proc: subprocess.Popen[bytes], *, grace_s: float = INTERRUPT_GRACE_S) -> None:
    """Stop ``proc``'s process group with :func:`stop_group` (``grace_s`` between the signals)."""
    stop_group(proc.pid, proc=proc, interrupt_s=grace_s, terminate_s=grace_s)


def _alive_groups(pgids: Sequence[int], leaders: Sequence[subprocess.Popen[bytes]]) -> list[int]:
    for leader in leaders:
        leader.poll()  # reap the leader, or it stays a zombie member of its group
    return [pgid for pgid in pgids if group_members(pgid)]


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``; read from /proc.

    Where /proc cannot be read, ``[pgid]`` when signal 0 reaches the group, else ``[]``.
    """
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members = []
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields and fields[0] != "Z" and fields[2] == str(pgid):
            members.append(int(entry.name))
    return members


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name: [state, ppid, pgrp, session, ...]."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (/proc/<pid>/stat field 22); None if gone."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


class ChildRegistry:
    """The process groups a run started: ``children.json`` under the run folder, one atomic write per change.

    Each entry holds ``pgid`` (the leader's pid: every child runs in its own session),
    ``argv``, ``start_ticks`` (the leader's start time, so a reused pid is never taken for
    ours), ``owner`` (the ds4sync process that started it) and ``started_at``. Children also
    carry ``DS4SYNC_CHILD_OF=<tag>:<owner pid>`` in their environment (set before they start,
    inherited by their own children), which finds a child that a kill caught between its
    start and its registration.
    """

    def __init__(self, path: Path, *, tag: str | None = None) -> None:
        self.path = path
        self.tag = tag or path.parent.name
        self._lock = threading.Lock()

    @property
    def mark(self) -> str:
        """The value of :data:`CHILD_MARK` given to children started by this process."""
        return f"{self.tag}:{os.getpid()}"

    def entries(self) -> list[dict[str, object]]:
        """The registered groups (an unreadable file reads as none)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        if not isinstance(data, list):
            return []
        return [e for e in data if isinstance(e, dict) and isinstance(e.get("pgid"), int)]

    def add(self, pid: int, argv: Sequence[str]) -> None:
        """Register the group led by ``pid`` (call right after it started)."""
        entry = {
            "pgid": pid,
            "argv": [str(a) for a in argv][:8],
            "start_ticks": start_ticks(pid),
            "owner": os.getpid(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        with self._lock:
            self._write([*(e for e in self.entries() if e["pgid"] != pid), entry])

    def remove(self, pid: int) -> None:
        """Forget the group led by ``pid`` (it ended and was reaped)."""
        with self._lock:
            entries = self.entries()
            kept = [e for e in entries if e["pgid"] != pid]
            if len(kept) != len(entries):
                self._write(kept)

    def _write(self, entries: list[dict[str, object]]) -> None:
        from ds4sync.core.record import write_json_atomic  # the one atomic write (record imports this module)

        write_json_atomic(self.path, entries)

    def leftovers(self) -> list[dict[str, object]]:
        """Registered groups that are still alive and still ours.

        A group is ours while its leader runs with the recorded start time, or, with the
        leader gone, while members of the group remain (Linux never hands out a pid that
        is still some group's id, so such a group cannot be someone else's). Groups of a
        ds4sync process that is still alive (not this one) are left to it.
        """
        found = []
        registered = {int(e["pgid"]) for e in self.entries()}  # type: ignore[call-overload]
        for pgid, owner in _marked_groups(self.tag):
            if pgid not in registered and (owner == os.getpid() or not pid_alive(owner)):
                found.append({"pgid": pgid, "argv": _cmdline(pgid), "owner": owner, "found_by": CHILD_MARK})
        for entry in self.entries():
            pgid = int(entry["pgid"])  # type: ignore[call-overload]
            owner = entry.get("owner")
            if isinstance(owner, int) and owner != os.getpid() and pid_alive(owner):
                continue
            if not group_members(pgid):
                continue
            leader = start_ticks(pgid)
            if leader is not None and pid_alive(pgid) and entry.get("start_ticks") not in (None, leader):
                continue  # the pid was reused by a process that is not ours
            found.append(entry)
        return found

    def stop_leftovers(self, *, interrupt_s: float = 1.0, terminate_s: float = 2.0) -> list[dict[str, object]]:
        """Stop every leftover group (see :meth:`leftovers`) with :func:`stop_group`; return those stopped."""
        stopped = self.leftovers()
        stop_groups([int(e["pgid"]) for e in stopped], interrupt_s=interrupt_s, terminate_s=terminate_s)  # type: ignore[call-overload]
        with self._lock:
            self._write([e for e in self.entries() if group_members(int(e["pgid"]))])  # type: ignore[call-overload]
        return stopped


CHILD_MARK = "DS4SYNC_CHILD_OF"


def _marked_groups(tag: str) -> list[tuple[int, int]]:
    """(pgid, owner pid) of live processes whose environment carries ``DS4SYNC_CHILD_OF=<tag>:<owner>``."""
    needle = f"{CHILD_MARK}={tag}:".encode()
    groups: dict[int, int] = {}
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return []
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item.startswith(needle):
                fields = _stat_fields(int(entry.name))
                owner = item[len(needle) :].decode(errors="replace")
                if fields and fields[0] != "Z" and owner.isdigit():
                    groups.setdefault(int(fields[2]), int(owner))
                break
    return sorted(groups.items())


def _cmdline(pid: int) -> list[str]:
    try:
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a][:8]
    except OSError:
        return []


_ACTIVE: list[ChildRegistry] = []


@contextlib.contextmanager
def registered_children(path: Path) -> Iterator[ChildRegistry]:
    """While inside, every child started by :func:`run` or :func:`spawn` is registered in ``path``."""
    registry = ChildRegistry(path)
    _ACTIVE.append(registry)
    try:
        yield registry
    finally:
        _ACTIVE.remove(registry)


def _mark(env: dict[str, str]) -> dict[str, str]:
    if _ACTIVE:
        env[CHILD_MARK] = _ACTIVE[-1].mark
    return env


def _register(pid: int, argv: Sequence[str]) -> None:
    if _ACTIVE:
        with contextlib.suppress(OSError):
            _ACTIVE[-1].add(pid, argv)


def _unregister(pid: int) -> None:
    if _ACTIVE:
        with contextlib.suppress(OSError):
            _ACTIVE[-1].remove(pid)


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
    grace_s: float = INTERRUPT_GRACE_S,
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
        grace_s: seconds between SIGINT, SIGTERM and SIGKILL when the group is stopped.

    The output (returned and logged) has secrets redacted (:mod:`ds4sync.core.redact`); the
    child's group is registered in the active :func:`registered_children` registry.

    Raises:
        ToolMissingError: the program does not exist.
        KeyboardInterrupt: re-raised after the child's group has been stopped.
    """
    overrides = {k: str(v) for k, v in (env_overrides or {}).items()}
    child_env = _mark(compose_env(overrides, base=env))
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
        _register(proc.pid, argv)
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
    for raw in iter(proc.stdout.readline, b""):
        line = _redacted(raw)
        chunks.append(line)
        if log is not None:
            log.write(line)  # type: ignore[attr-defined]
            log.flush()  # type: ignore[attr-defined]
        if on_line is not None:
            on_line(line.decode("utf-8", "replace").rstrip("\n"))
    proc.stdout.close()


def _redacted(line: bytes) -> bytes:
    text = line.decode("utf-8", "replace")
    clean = redact_secrets(text)
    return line if clean == text else clean.encode("utf-8")


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
    in the active :func:`registered_children` registry.

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
            raise ToolMissingError(
                f"program not found: {argv[0]}", where=str(cwd), fix="install it or put it on PATH"
            ) from exc
    _register(proc.pid, argv)
    return proc


def process_state(pid: int) -> str | None:
    """The one-letter state of a process from /proc (R running, S sleeping, D disk, Z zombie...), or None."""
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    return None
