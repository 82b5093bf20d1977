"""The nightly job: fetch upstream, sync, prove, report; and the cron line that runs it.

One night = one run: a run still waiting for a person is never buried under a new one;
a paused run is resumed; an upstream already merged is a quiet success.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from ds4sync.core.errors import ConfigError, ExitCode
from ds4sync.loop.sync import AlreadyMerged, Progress, SyncBranchTaken, resume, start_merge
from ds4sync.runner import RunOutcome, Workspace


@dataclass(frozen=True)
class NightlyResult:
    """What the night did: the run (None when there was nothing to merge), a message, the exit code."""

    outcome: RunOutcome | None
    message: str
    exit_code: ExitCode


def run_nightly(ws: Workspace, *, ref: str | None = None, progress: Progress | None = None) -> NightlyResult:
    """Sync the fork with upstream's ``ref`` (default: ``upstream.ref``), fetched fresh, end to end.

    Exit codes follow the CLI's: 0 done (or nothing new), 1 a gate/build/invariant
    failed, 4 a person must act (this night's or an earlier run's).
    """
    active = ws.store.current()
    if active is not None and active.status == "needs-person":
        return NightlyResult(
            None, f"run {active.run_id} is still waiting for a person; no new sync started", ExitCode.NEEDS_PERSON
        )
    if active is not None:
        outcome = resume(ws, progress=progress)
    else:
        try:
            outcome = start_merge(ws, ref or ws.config.upstream.ref, progress=progress, fetch=True)
        except SyncBranchTaken as exc:
            if exc.run_status == "done":
                return NightlyResult(
                    None,
                    f"nothing new: upstream is already synced in run {exc.run_id}, waiting to be promoted",
                    ExitCode.OK,
                )
            raise
        except AlreadyMerged as exc:
            return NightlyResult(None, f"nothing to do: {exc.what}", ExitCode.OK)
        while outcome.status == "paused":
            outcome = resume(ws, progress=progress)
    code = {"done": ExitCode.OK, "failed": ExitCode.FAILED}.get(outcome.status, ExitCode.NEEDS_PERSON)
    message = outcome.outcome.message if outcome.outcome is not None else outcome.status
    return NightlyResult(outcome, f"run {outcome.record.run_id}: {outcome.status} ({message})", code)


def cron_line(ws: Workspace, *, at: str = "02:30", executable: str | None = None) -> str:
    """A crontab entry that runs ``ds4sync nightly`` on this repository at ``at`` (HH:MM, local time).

    Raises:
        ConfigError: ``at`` is not HH:MM.
    """
    try:
        hour, minute = (int(part) for part in at.split(":"))
        if not (0 <= hour < 24 and 0 <= minute < 60):
            raise ValueError
    except ValueError as exc:
        raise ConfigError(f"'{at}' is not a time of day", where="--at", fix="use HH:MM, e.g. 02:30") from exc
    program = executable or str(Path(sys.argv[0]).resolve())
    repo = shlex.quote(str(ws.repo.path))
    config = f" --config {shlex.quote(str(ws.config.source))}" if ws.config.source else ""
    log = shlex.quote(str(ws.store.root / "nightly.log"))
    return f"{minute} {hour} * * * {shlex.quote(program)} nightly --repo {repo}{config} >> {log} 2>&1"
