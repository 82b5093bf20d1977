"""The run record: one JSON document per run, written atomically after every phase.

It is the single source for ``status``, ``resume``, ``abort`` and the report. Records
live under the fork's git common dir (``<git-common-dir>/ds4sync/runs/<run-id>/``),
never in a work tree.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ds4sync.core.errors import NeedsPersonError, StateError
from ds4sync.core.files import write_atomic, write_json_atomic
from ds4sync.core.model import FrozenModel
from ds4sync.core.proc import pid_alive
from ds4sync.core.record import ACTIVE_STATUSES, ForkRef, PhaseState, RunStatus, UpstreamRef, now_iso
from ds4sync.models.gates_results import TierResult
from ds4sync.models.loop_results import DeployResult, PromoteResult
from ds4sync.models.merge_results import MergeSummary
from ds4sync.models.native_results import BuildResult
from ds4sync.models.patchsets_results import ReplayResult, VerifyResult
from ds4sync.models.publish_results import NotifyResult, PublishResult
from ds4sync.models.semantic_results import SemanticResult
from ds4sync.models.serving_results import ABResult, BackportDecision, ServingResult

#: 2: ``results`` is :class:`RunResults` (one typed field per phase); 1: a dict of JSON per phase.
SCHEMA_VERSION = 2


class ReportResult(FrozenModel):
    """The report phase's entry: where it wrote the PR description and the JSON summary."""

    path: str
    summary: str


class RunResults(BaseModel):
    """Each phase's result, typed by the phase's own model; ``None`` (or empty) when it did not run.

    ``gates`` is keyed by tier (``static``, ``unit``, ``gpu``, ``kernel``, ``serving``, ``perf``);
    kernel-suite and perf numbers live in those tiers' gate results. ``serving``, ``ab`` (the latest A/B;
    ``ab_runs`` every A/B of the run, oldest first, for a trend per metric) and ``backports`` are written
    by ``ds4sync serving gate``, ``ds4sync ab`` and ``ds4sync backport evaluate`` inside a run
    (``backports`` keyed by upstream SHA); ``publish`` and ``notify`` by the publish phase and the
    nightly job; ``promote`` and ``deploy`` by those commands. ``legacy`` keeps, unread, what a
    schema-1 record held that no current model accepts (see :func:`migrate_record`).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    merge: MergeSummary | None = None
    replay: ReplayResult | None = None
    verify: VerifyResult | None = None
    semantic: SemanticResult | None = None
    build: BuildResult | None = None
    gates: dict[str, TierResult] = Field(default_factory=dict)
    serving: ServingResult | None = None
    ab: ABResult | None = None
    ab_runs: list[ABResult] = Field(default_factory=list)
    backports: dict[str, BackportDecision] = Field(default_factory=dict)
    report: ReportResult | None = None
    publish: PublishResult | None = None
    notify: NotifyResult | None = None
    promote: PromoteResult | None = None
    deploy: DeployResult | None = None
    legacy: dict[str, Any] = Field(default_factory=dict)

    def written(self) -> tuple[str, ...]:
        """The names of the fields some phase wrote (not None, not empty), in field order."""
        return tuple(
            name for name in type(self).model_fields if name != "legacy" and getattr(self, name) not in (None, {}, [])
        )


class RunRecord(BaseModel):
    """Everything one sync run did and found.

    ``results`` holds each phase's result as that phase's own model (:class:`RunResults`).
    Records of an older ``schema_version``, or with a field no ds4sync writes any more, are
    migrated when read (:func:`migrate_record`).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)  # a wrong value fails where it is set

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
    #: The gate tiers that had to pass when the run started (``gates.promote_tiers``, else ``gates.tiers``);
    #: None in records written before it was kept.
    required_tiers: tuple[str, ...] | None = None
    status: RunStatus = "running"
    phases: dict[str, PhaseState] = Field(default_factory=dict)
    results: RunResults = Field(default_factory=RunResults)
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        return migrate_record(data) if isinstance(data, dict) else data

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


def migrate_record(data: dict[str, Any]) -> dict[str, Any]:
    """A record's JSON in the current schema; schema 1 (``results`` a dict of JSON) is lifted.

    Each schema-1 entry is validated against its phase's model; an entry that no model
    accepts (an unknown key, or a shape no phase ever wrote) moves to ``results.legacy``
    with a note, so nothing is lost and the report never reads it.

    Raises:
        ValueError: the record is from a newer ds4sync (``schema_version`` above ours).
    """
    version = data.get("schema_version", SCHEMA_VERSION)  # a record built in code is current
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ValueError(f"record schema {version!r} is newer than this ds4sync reads ({SCHEMA_VERSION})")
    if version == SCHEMA_VERSION:
        return _drop_retired(data)
    data = dict(data)
    old = data.get("results") or {}
    fields = RunResults.model_fields
    kept: dict[str, Any] = {}
    legacy: dict[str, Any] = {}
    for key, value in old.items() if isinstance(old, dict) else ():
        if key in fields and key != "legacy":
            try:
                RunResults.model_validate({key: value})
            except ValidationError:
                legacy[key] = value
            else:
                kept[key] = value
        else:
            legacy[key] = value
    notes = list(data.get("notes") or [])
    if legacy:
        notes.append(
            f"migrated from record schema {version}: kept unread in results.legacy: {', '.join(sorted(legacy))}"
        )
    data.update(schema_version=SCHEMA_VERSION, results={**kept, "legacy": legacy}, notes=notes)
    return _drop_retired(data)


#: Fields records once had that nothing writes or reads any more; dropped on load (kept unread in
#: ``results.legacy`` when they held anything). ``followups``: later additions to the sync branch.
RETIRED_FIELDS = ("followups",)


def _drop_retired(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without :data:`RETIRED_FIELDS`; a non-empty one moves to ``results.legacy`` with a note."""
    if not any(name in data for name in RETIRED_FIELDS):
        return data
    data = dict(data)
    kept = {name: value for name in RETIRED_FIELDS if (value := data.pop(name, None))}
    if kept:
        results = dict(data.get("results") or {})
        results["legacy"] = {**(results.get("legacy") or {}), **kept}
        data["results"] = results
        data["notes"] = [*(data.get("notes") or []), f"retired fields kept unread in results.legacy: {', '.join(kept)}"]
    return data


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
        """Persist ``record`` atomically (secrets redacted, by the one atomic JSON write) and keep
        ``current`` pointing at active runs."""
        record.updated_at = now_iso()
        path = self.record_path(record.run_id)
        _keep_previous(path, path.with_name(PREVIOUS_RECORD))
        write_json_atomic(path, record.model_dump(mode="json"))
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
            what = f"run record is not UTF-8 (byte {exc.object[exc.start]:#04x} at offset {exc.start})"
            return self._previous(run_id, what, exc)
        except OSError as exc:
            raise StateError(f"cannot read the run record ({exc.strerror})", where=str(path)) from exc
        except ValidationError as exc:
            what = f"run record is not valid ({_first_error(exc)})"
            if exc.errors()[0]["type"] == "json_invalid":  # damaged (cut short, emptied): its previous copy reads
                return self._previous(run_id, what, exc)
            raise StateError(  # JSON of another shape or a newer ds4sync: an older copy would lose what it holds
                what,
                where=str(path),
                fix=f"use the ds4sync that wrote it, or fix that field ({PREVIOUS_RECORD} beside it is the copy "
                "from before its last save)",
            ) from exc

    def _previous(self, run_id: str, what: str, exc: Exception) -> RunRecord:
        """The record as it was before its last save (:data:`PREVIOUS_RECORD`, kept by :meth:`save`), when
        ``record.json`` is damaged (not UTF-8, not JSON: cut short, emptied); a note and a warning say so, and
        the next save writes it whole again.

        Raises:
            StateError: there is no readable previous record either (``what``, and what to do instead).
        """
        path = self.record_path(run_id)
        previous = path.with_name(PREVIOUS_RECORD)
        try:
            record = RunRecord.model_validate_json(previous.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValidationError):
            kept = "is not readable either" if previous.exists() else "does not exist"
            raise StateError(
                what,
                where=str(path),
                fix=f"the copy from before its last save ({PREVIOUS_RECORD}) {kept}: move the run folder "
                f"{path.parent} away, then `git worktree remove --force` its worktree and `git branch -D` its "
                "sync branch (`git worktree list` shows both)",
            ) from exc
        said = f"{what}; using the copy from before its last save ({previous.name}, {record.updated_at})"
        logging.getLogger("ds4sync").warning("%s: %s", path, said)
        record.notes.append(said)
        return record

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

    def holder_alive(self) -> bool:
        """Whether a live ds4sync command holds this repository's lock (``lock.json`` names a running pid).

        A run whose status is ``running`` is only running while its command holds the lock: a kill
        before its first phase started (or between two phases) leaves ``running`` with no phase
        to name the dead process.
        """
        holder = _read_json(self.root / "lock.json") or {}
        pid = holder.get("pid")
        return isinstance(pid, int) and pid != os.getpid() and pid_alive(pid)

    def interrupted(self, record: RunRecord) -> str | None:
        """How a ``running`` run whose process is gone was interrupted, or None (alive, or not running)."""
        if record.status != "running":
            return None
        killed = record.interrupted_phase()
        if killed:
            return f"during phase '{killed}' (its process {record.phases[killed].pid} is gone)"
        if any(state.status == "running" for state in record.phases.values()) or self.holder_alive():
            return None
        return "between phases (the command that ran it is gone)"

    def require_no_active_run(self) -> None:
        """Refuse to start a run while another one holds the repository.

        Raises:
            NeedsPersonError: a run is waiting for a person, or was killed mid-phase.
        """
        record = self.current()
        if record is None:
            return
        how = self.interrupted(record)
        if how:
            raise NeedsPersonError(
                f"run {record.run_id} was interrupted {how}",
                where=record.worktree,
                fix="run `ds4sync resume` to go on or `ds4sync abort` to drop it",
            )
        raise NeedsPersonError(
            f"run {record.run_id} is still {record.status}",
            where=record.worktree,
            fix="finish it with `ds4sync resume` or drop it with `ds4sync abort`",
        )


#: The record as it was before the latest save, beside ``record.json`` (the fallback when that is unreadable).
PREVIOUS_RECORD = "record.prev.json"


def _keep_previous(path: Path, previous: Path) -> None:
    """Make ``previous`` the file now at ``path`` (a hard link, renamed into place: atomic, nothing copied);
    a copy where the file system has no hard links. Nothing when there is no record yet, or it is not JSON."""
    try:
        json.loads(path.read_bytes())
    except (OSError, ValueError):  # none, or the unreadable one the load fell back from: keep the good copy
        return
    staging = previous.with_name(f".{previous.name}.tmp")
    staging.unlink(missing_ok=True)
    try:
        os.link(path, staging)
    except OSError:
        shutil.copyfile(path, staging)
    os.replace(staging, previous)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error.get("loc", ()))
    return f"{where}: {error['msg']}" if where else str(error["msg"])
