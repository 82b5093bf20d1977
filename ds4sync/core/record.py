"""The run record: one JSON document per run, written atomically after every phase.

It is the single source for ``status``, ``resume``, ``abort`` and the report. Records
live under the fork's git common dir (``<git-common-dir>/ds4sync/runs/<run-id>/``),
never in a work tree.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ds4sync.core.errors import NeedsPersonError, StateError
from ds4sync.core.files import write_atomic, write_json_atomic
from ds4sync.core.proc import pid_alive
from ds4sync.core.redact import redact_data

SCHEMA_VERSION = 1

PhaseStatus = Literal["pending", "running", "done", "needs-person", "failed", "skipped"]
# running: a process works on it; paused: phases remain (`ds4sync resume` goes on);
# needs-person: a phase waits for a person; failed / done / aborted: finished.
RunStatus = Literal["running", "paused", "needs-person", "failed", "done", "promoted", "aborted"]
ACTIVE_STATUSES: frozenset[str] = frozenset({"running", "paused", "needs-person"})


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


class PhaseState(BaseModel):
    """Where one phase of a run stands."""

    model_config = ConfigDict(extra="forbid")

    status: PhaseStatus = "pending"
    started_at: str | None = None
    finished_at: str | None = None
    pid: int | None = None
    attempts: int = 0
    message: str = ""
    start_commit: str | None = Field(default=None, description="sync worktree HEAD when this attempt started")


class UpstreamRef(BaseModel):
    """The upstream side of a run: remote, ref as asked, the SHA it resolved to."""

    model_config = ConfigDict(extra="forbid")

    remote: str
    url: str | None = None
    ref: str
    sha: str
    name: str | None = None
    branch: str | None = Field(default=None, description="upstream's branch the SHA stands for, e.g. main")


class ForkRef(BaseModel):
    """The fork side of a run: branch and its head before the run."""

    model_config = ConfigDict(extra="forbid")

    branch: str
    head_before: str
    name: str | None = None


class RunRecord(BaseModel):
    """Everything one sync run did and found.

    ``results`` maps a phase name (``merge``, ``replay``, ``verify``, ``build``,
    ``gates``, ...) to that phase's result in JSON form; each phase module owns the
    typed model of its entry. ``followups`` are later additions to the same sync
    branch (newest last), rendered by the report as dated follow-up sections.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    run_id: str
    created_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)
    repo: str
    state_dir: str
    profile: str | None = None
    upstream: UpstreamRef
    fork: ForkRef
    sync_branch: str
    worktree: str
    backup_ref: str
    backup_branch: str | None = None
    status: RunStatus = "running"
    phases: dict[str, PhaseState] = Field(default_factory=dict)
    results: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    followups: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def active(self) -> bool:
        """Whether the run still holds the repository (running or waiting for a person)."""
        return self.status in ACTIVE_STATUSES

    def phase(self, name: str) -> PhaseState:
        """The state of phase ``name`` (pending when never started)."""
        return self.phases.setdefault(name, PhaseState())

    def interrupted_phase(self) -> str | None:
        """The phase marked running whose process is gone, if any (a killed run)."""
        for name, state in self.phases.items():
            if state.status == "running" and state.pid is not None and not pid_alive(state.pid):
                return name
        return None


def make_run_id(upstream_sha: str, *, when: datetime | None = None) -> str:
    """``YYYYMMDD-HHMMSS-<upstream sha 10>``: sortable and unique per second."""
    stamp = (when or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{upstream_sha[:10]}"


class RecordStore:
    """Run records, logs, worktrees and the lock of one repository's state dir.

    Layout::

        <state>/runs/<run-id>/record.json   the record
        <state>/runs/<run-id>/logs/         logs the record points at
        <state>/worktrees/<run-id>/         the sync worktree
        <state>/current                     id of the active run, if any
        <state>/lock, lock.json             one ds4sync command at a time
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def run_dir(self, run_id: str) -> Path:
        """The folder of one run (record and logs)."""
        return self.root / "runs" / run_id

    def log_dir(self, run_id: str) -> Path:
        """Where the logs of one run go (created on demand)."""
        path = self.run_dir(run_id) / "logs"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def worktree_path(self, run_id: str) -> Path:
        """Where the sync worktree of one run lives."""
        return self.root / "worktrees" / run_id

    def record_path(self, run_id: str) -> Path:
        """The record file of one run."""
        return self.run_dir(run_id) / "record.json"

    def save(self, record: RunRecord) -> Path:
        """Persist ``record`` atomically (secrets redacted, :func:`ds4sync.core.redact.redact_data`) and keep
        ``current`` pointing at active runs."""
        record.updated_at = now_iso()
        path = self.record_path(record.run_id)
        write_json_atomic(path, redact_data(record.model_dump(mode="json")))
        current = self.root / "current"
        if record.active:
            write_atomic(current, record.run_id + "\n")
        elif current.is_file() and current.read_text().strip() == record.run_id:
            current.unlink()
        return path

    def load(self, run_id: str) -> RunRecord:
        """Load one run's record.

        Raises:
            StateError: no such run, or the file is not a valid record.
        """
        path = self.record_path(run_id)
        if path.exists() and not path.is_file():
            raise StateError(
                "run record is not a file (a folder or something else is in its place)",
                where=str(path),
                fix="move it away and restore record.json from a backup, or remove the run folder",
            )
        if not path.is_file():
            raise StateError(
                f"no run named {run_id}",
                where=str(self.root),
                fix="see `ds4sync status --all` for the runs of this repo",
            )
        try:
            return RunRecord.model_validate_json(path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise StateError(
                f"run record is not UTF-8 (byte {exc.object[exc.start]:#04x} at offset {exc.start})",
                where=str(path),
                fix="restore it from the backup or remove the run folder",
            ) from exc
        except OSError as exc:
            raise StateError(f"cannot read the run record ({exc.strerror})", where=str(path)) from exc
        except ValidationError as exc:
            raise StateError(
                f"run record is not valid ({exc.errors()[0]['msg']})",
                where=str(path),
                fix="restore it from the backup or remove the run folder",
            ) from exc

    def current(self) -> RunRecord | None:
        """The active run of this repository, if any.

        Without a ``current`` pointer, the latest run when it is active: a kill between the
        record write and the pointer write leaves exactly that.
        """
        pointer = self.root / "current"
        if not pointer.is_file():
            latest = self.latest()
            return latest if latest is not None and latest.active else None
        run_id = pointer.read_text().strip()
        if not run_id or not self.record_path(run_id).is_file():
            return None
        record = self.load(run_id)
        return record if record.active else None

    def latest(self) -> RunRecord | None:
        """The most recent run, active or not."""
        ids = self.run_ids()
        return self.load(ids[-1]) if ids else None

    def run_ids(self) -> list[str]:
        """All run ids, oldest first."""
        runs = self.root / "runs"
        if not runs.is_dir():
            return []
        return sorted(p.name for p in runs.iterdir() if (p / "record.json").exists())

    def resolve(self, run_id: str | None) -> RunRecord:
        """The run named ``run_id``, else the active run, else the latest.

        Raises:
            StateError: there is no run at all.
        """
        if run_id:
            return self.load(run_id)
        record = self.current() or self.latest()
        if record is None:
            raise StateError(
                "no ds4sync run in this repository yet",
                where=str(self.root),
                fix="start one with `ds4sync merge <upstream-ref>`",
            )
        return record

    @contextlib.contextmanager
    def lock(self, command: str) -> Iterator[dict[str, Any] | None]:
        """Hold the repository lock while ``command`` runs.

        Yields the info of a stale lock left by a dead process (None when there was
        none), so the caller can report it.

        Raises:
            StateError: another live ds4sync command holds the lock.
        """
        import filelock  # only commands that change state pay for it

        self.root.mkdir(parents=True, exist_ok=True)
        info_path = self.root / "lock.json"
        lock = filelock.FileLock(str(self.root / "lock"), timeout=0)
        try:
            lock.acquire()
        except filelock.Timeout as exc:
            holder = _read_json(info_path) or {}
            raise StateError(
                f"another ds4sync command holds this repository's lock "
                f"(pid {holder.get('pid', '?')}, `{holder.get('command', '?')}` since {holder.get('since', '?')})",
                where=str(self.root),
                fix="wait for it to finish; one command runs at a time",
            ) from exc
        stale = _read_json(info_path)
        if stale is not None and not isinstance(stale.get("pid"), int):
            stale = {"pid": "?", "command": "?", "since": "?", "note": "lock.json was malformed"}
        elif stale is not None and pid_alive(stale["pid"]) and stale.get("pid") != os.getpid():
            stale = None  # a live holder without the flock cannot exist; ignore odd leftovers
        write_json_atomic(
            info_path, {"pid": os.getpid(), "host": socket.gethostname(), "command": command, "since": now_iso()}
        )
        try:
            yield stale
        finally:
            with contextlib.suppress(OSError):
                info_path.unlink()
            lock.release()

    def require_no_active_run(self) -> None:
        """Refuse to start a run while another one holds the repository.

        Raises:
            NeedsPersonError: a run is waiting for a person, or was killed mid-phase.
        """
        record = self.current()
        if record is None:
            return
        killed = record.interrupted_phase()
        if killed:
            pid = record.phases[killed].pid
            raise NeedsPersonError(
                f"run {record.run_id} was interrupted during phase '{killed}' (its process {pid} is gone)",
                where=record.worktree,
                fix="run `ds4sync resume` to go on or `ds4sync abort` to drop it",
            )
        raise NeedsPersonError(
            f"run {record.run_id} is still {record.status}",
            where=record.worktree,
            fix="finish it with `ds4sync resume` or drop it with `ds4sync abort`",
        )


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
