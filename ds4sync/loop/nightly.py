"""The nightly job: fetch upstream, sync, prove, report; and the cron line that runs it.

One night = one run: a run still waiting for a person is never buried under a new one;
a paused run is resumed; an upstream already merged is a quiet success.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from ds4sync.core.errors import ConfigError, ExitCode, GitError
from ds4sync.loop.sync import AlreadyMerged, Progress, SyncBranchTaken, resume, start_merge
from ds4sync.runner import RunOutcome, Workspace, require_branch


@dataclass(frozen=True)
class NightlyResult:
    """What the night did: the run (None when there was nothing to merge), a message, the exit code."""

    outcome: RunOutcome | None
    message: str
    exit_code: ExitCode
    log_path: str | None = None


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
    where = f"{outcome.last_phase}: " if outcome.status != "done" and outcome.last_phase else ""
    return NightlyResult(
        outcome, f"run {outcome.record.run_id}: {outcome.status} ({where}{message})", code, failure_log(outcome)
    )


def failure_log(outcome: RunOutcome) -> str | None:
    """The log that says why the run stopped: the first blocking gate's, or the build's (None when done)."""
    record = outcome.record
    if outcome.status == "done":
        return None
    if outcome.last_phase == "gate":
        from ds4sync.gates.model import GREEN

        for tier in (record.results.get("gates") or {}).values():
            for gate in tier.get("gates", []):
                if gate.get("required", True) and gate.get("status") not in GREEN:
                    return gate.get("log_path")
    if outcome.last_phase == "build":
        return (record.results.get("build") or {}).get("log_path")
    return None


def cron_line(ws: Workspace, *, at: str = "02:30", executable: str | None = None) -> str:
    """A crontab entry that runs ``ds4sync nightly`` on this repository at ``at`` (HH:MM, local time).

    Refused for a repository where ``nightly`` cannot run: no fork branch (the line pins
    ``--branch`` when only the checkout names it) or no upstream to fetch from.

    Raises:
        ConfigError: ``at`` is not HH:MM.
        StateError, GitError: nightly could not run here (what is missing, and how to fix it).
    """
    try:
        hour, minute = (int(part) for part in at.split(":"))
        if not (0 <= hour < 24 and 0 <= minute < 60):
            raise ValueError
    except ValueError as exc:
        raise ConfigError(f"'{at}' is not a time of day", where="--at", fix="use HH:MM, e.g. 02:30") from exc
    branch = require_branch(ws)
    ws.repo.branch_head(branch)
    remote = ws.config.upstream.remote
    if not (ws.repo.remote_url(remote) or ws.config.upstream.url):
        raise GitError(
            f"nightly has no upstream to fetch: no remote '{remote}' and no upstream.url",
            where=str(ws.repo.path),
            fix=f"`git remote add {remote} URL` or set upstream.url in ds4sync.yaml",
        )
    program = executable or str(Path(sys.argv[0]).resolve())
    repo = shlex.quote(str(ws.repo.path))
    config = f" --config {shlex.quote(str(ws.config.source))}" if ws.config.source else ""
    pinned = "" if ws.config.fork.branch == branch else f" --branch {shlex.quote(branch)}"
    log = shlex.quote(str(ws.store.root / "nightly.log"))
    return f"{minute} {hour} * * * {shlex.quote(program)} nightly --repo {repo}{config}{pinned} >> {log} 2>&1"
