"""The nightly job as a service: sync, prove, report, publish; then promote, deploy, prune, notify.

One night = one run: a run still waiting for a person is never buried under a new one; a paused
run is resumed; a run stopped by an unreachable forge is resumed (publishing again). When neither
upstream nor the fork branch moved since the last sync, the night is a quiet skip: no lock, no
fetch, no worktree, one ``git ls-remote``.

A time budget (``--budget`` / ``nightly.budget_s``) stops the gates still running when it is spent,
through the one stop routine, and records them incomplete.

Exit codes (a wrapper can act on them; see ``ds4sync.core.errors.ExitCode``)::

    0  synced and green (published, promoted when configured), or nothing moved since a green sync
    1  a gate, build or invariant failed (also each night after, while nothing moved)
    2  bad config, arguments or repository state
    3  internal error (traceback saved)
    4  a person must act (conflict, patch-set adaptation, refused push, forge refused the token or repo)
       (possible duplicate work is flagged in the PR and the notification; the night stays 0)
    5  the time budget ran out: gates recorded incomplete; `ds4sync resume` continues
    6  the forge or a notification target was unreachable or rate-limited: try again later
"""

from __future__ import annotations

import math
import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ds4sync.core.errors import ConfigError, Ds4syncError, ExitCode, GitError
from ds4sync.core.git import SHA_RE
from ds4sync.loop.preflight import require_preflight
from ds4sync.loop.sync import AlreadyMerged, Progress, SyncBranchTaken, abort, resume, start_merge
from ds4sync.models.publish_duplicates import DuplicateCheck
from ds4sync.models.record import RunRecord
from ds4sync.publish.notice import compose_notice as build_notice
from ds4sync.publish.notify import Notice
from ds4sync.runner import RunOutcome, Workspace, require_branch, update_run

Clock = Callable[[], float]


@dataclass(frozen=True)
class NightlyResult:
    """What the night did: the run (None when nothing moved), a message, the exit code, and the loop's steps."""

    outcome: RunOutcome | None
    message: str
    exit_code: ExitCode
    skipped: bool = False
    promoted: str | None = None
    deployed: str | None = None
    pruned: tuple[str, ...] = ()
    notified: object | None = None  # publish.results.NotifyResult
    notes: tuple[str, ...] = field(default_factory=tuple)
    log_path: str | None = None  # the log that says why the run stopped (None when done)

    @property
    def record(self) -> RunRecord | None:
        """The night's run record, if a run took place."""
        return self.outcome.record if self.outcome is not None else None


def run_nightly(
    ws: Workspace,
    *,
    ref: str | None = None,
    progress: Progress | None = None,
    budget_s: float | None = None,
    notify: bool = True,
    clock: Clock = time.monotonic,
) -> NightlyResult:
    """One night: sync upstream's ``ref`` (default ``upstream.ref``) end to end, then the loop's steps.

    ``budget_s`` (default ``nightly.budget_s``) bounds the run's wall-clock time in seconds.
    Expected outcomes (failed gate, person needed, forge down) are results with an exit code;
    errors of input (bad config, unknown branch) raise as everywhere else.

    Raises:
        ConfigError: ``budget_s`` is not a number of seconds above 0.
        Ds4syncError: what :func:`~ds4sync.loop.preflight.preflight` finds (no fork branch, a shallow clone,
            a gate file or patch-set that does not load...).
    """
    if budget_s is not None and not (math.isfinite(budget_s) and budget_s > 0):
        raise ConfigError(
            f"--budget must be a number of seconds above 0, got {budget_s:g}",
            where="--budget",
            fix="give the seconds the night may take (e.g. --budget 14400), or leave it out for nightly.budget_s",
        )
    require_preflight(ws, ref)  # the checks `config check` reports: it never says ok where this refuses
    budget = budget_s if budget_s is not None else ws.config.nightly.budget_s
    deadline = clock() + budget if budget else None
    night = _sync(ws, ref=ref, progress=progress, deadline=deadline)
    night = _after(ws, night, progress=progress)
    from ds4sync.loop.watch import watch_night

    # Green is the one rule (gates/status.run_green), and a night that proves no tier proves nothing to pin.
    green = (
        night.record is not None
        and exit_code(night.record) == ExitCode.OK
        and bool(ws.config.gates.required_for_promote)
        and _run_green(ws, night.record)
    )
    night = replace(night, notes=(*night.notes, *watch_night(ws, night.record, green=green, progress=progress)))
    if notify and ws.config.notify is not None and (not night.skipped or ws.config.notify.on_skip):
        night = _notify(ws, night)
    return night


def _sync(ws: Workspace, *, ref: str | None, progress: Progress | None, deadline: float | None) -> NightlyResult:
    active = ws.store.current()
    if active is not None and active.status == "needs-person" and not _retryable(active):
        return NightlyResult(
            None, f"run {active.run_id} is still waiting for a person; no new sync started", ExitCode.NEEDS_PERSON
        )
    if active is not None:
        outcome = resume(ws, progress=progress, deadline=deadline)
    else:
        asked = ref or ws.config.upstream.ref
        quiet = unchanged_since_last_sync(ws, asked)
        if quiet is not None:
            # Nothing to do; but a last sync that failed still fails: the alarm stays on until something moves.
            last = _last_sync(ws)
            code = ExitCode.FAILED if last is not None and last.status == "failed" else ExitCode.OK
            return NightlyResult(None, quiet, code, skipped=True)
        try:
            try:
                outcome = start_merge(ws, asked, progress=progress, fetch=True, deadline=deadline)
            except SyncBranchTaken as exc:
                if not _superseded(ws, exc.run_id):
                    raise
                # The same upstream, but the fork moved since: that run can never be promoted. Start over.
                abort(ws, run_id=exc.run_id)
                outcome = start_merge(ws, asked, progress=progress, fetch=True, deadline=deadline)
                outcome.record.notes.append(f"run {exc.run_id} was superseded (the fork moved) and aborted")
                update_run(ws, outcome.record)
        except SyncBranchTaken as exc:
            if exc.run_status == "done":
                return NightlyResult(
                    None,
                    f"nothing new: upstream is already synced in run {exc.run_id}, waiting to be promoted",
                    ExitCode.OK,
                    skipped=True,
                )
            raise
        except AlreadyMerged as exc:
            return NightlyResult(None, f"nothing to do: {exc.what}", ExitCode.OK, skipped=True)
    while outcome.status == "paused":
        outcome = resume(ws, progress=progress, deadline=deadline)
    culprit = _culprit(ws, outcome, progress=progress)
    message = outcome.outcome.message if outcome.outcome is not None else outcome.status
    if culprit:
        message = f"{message}; {culprit}"
    where = f"{outcome.last_phase}: " if outcome.status != "done" and outcome.last_phase else ""
    return NightlyResult(
        outcome,
        f"run {outcome.record.run_id}: {outcome.status} ({where}{message})",
        exit_code(outcome.record),
        log_path=failure_log(outcome),
    )


def _culprit(ws: Workspace, outcome: RunOutcome, *, progress: Progress | None) -> str | None:
    """With ``nightly.bisect_on_failure``: the upstream commit that broke a failed run, noted in its record and report.

    Runs for a run that failed in replay, verify or (with ``nightly.bisect_tier``) the gates; a conflict that
    waits for a person is not a break. The bisect's own errors become the note instead of failing the night.
    """
    record = outcome.record
    settings = ws.config.nightly
    bisectable = {"replay", "verify"} | ({"gate"} if settings.bisect_tier else set())
    if not settings.bisect_on_failure or outcome.status not in ("failed", "needs-person"):
        return None
    if outcome.last_phase not in bisectable:
        return None
    from ds4sync.core.errors import Ds4syncError
    from ds4sync.loop.bisect import run_bisect

    try:
        result = run_bisect(ws, good=None, bad=record.upstream.sha, tier=settings.bisect_tier, progress=progress)
        line = f"bisect: {result.culprit_line()} ({result.evaluations} evaluations)"
    except Ds4syncError as exc:
        line = f"bisect could not run: {exc.one_line()}"
    record.notes.append(line)
    update_run(ws, record, report=True)
    return line


def failure_log(outcome: RunOutcome) -> str | None:
    """The log that says why the run stopped: the first blocking gate's, or the build's (None when done)."""
    record = outcome.record
    if outcome.status == "done":
        return None
    if outcome.last_phase == "gate":
        for tier in record.results.gates.values():
            for gate in tier.gates:
                if gate.blocking:
                    return gate.log_path
    if outcome.last_phase == "build":
        return record.results.build.log_path if record.results.build else None
    return None


def _superseded(ws: Workspace, run_id: str | None) -> bool:
    """Whether ``run_id`` is a finished, unpromoted run made from a fork head the branch has since left."""
    if run_id is None:
        return False
    record = ws.store.load(run_id)
    if record.active or record.results.promote is not None or record.status == "aborted":
        return False
    return ws.repo.resolve_commit(f"refs/heads/{record.fork.branch}") != record.fork.head_before


def exit_code(record: RunRecord) -> ExitCode:
    """The nightly exit code of a run that stopped (see the module docstring)."""
    if record.status == "done":
        return ExitCode.OK
    if record.status == "failed":
        return ExitCode.FAILED
    if record.phase("gate").status == "needs-person" and record.phase("gate").message.startswith("time budget"):
        return ExitCode.BUDGET
    if _retryable(record):
        return ExitCode.TRANSIENT
    return ExitCode.NEEDS_PERSON


def _retryable(record: RunRecord) -> bool:
    """A run stopped only because the forge was unreachable or rate-limited: the next night retries it."""
    publish = record.results.publish
    return record.phase("publish").status == "needs-person" and publish is not None and publish.status == "unavailable"


def unchanged_since_last_sync(ws: Workspace, ref: str) -> str | None:
    """A skip message when neither upstream's ``ref`` nor the fork branch moved since the last sync, else None.

    Asks the upstream remote with ``git ls-remote`` (no objects fetched). A SHA ``ref`` is compared
    as is; a ref upstream does not have (or an unreachable upstream) is "moved": the normal path
    then reports it properly.
    """
    last = _last_sync(ws)
    if last is None:
        return None
    branch = require_branch(ws)
    fork_now = ws.repo.resolve_commit(f"refs/heads/{branch}")
    promoted = last.results.promote.new_head if last.results.promote else None
    if fork_now is None or fork_now not in (last.fork.head_before, promoted):
        return None
    upstream_now = _upstream_sha(ws, ref)
    if upstream_now is None or upstream_now != last.upstream.sha:
        return None
    return (
        f"nothing moved since run {last.run_id} ({last.status}): upstream {ref} is still {upstream_now[:12]}, "
        f"{branch} is still {fork_now[:12]}"
    )


def _last_sync(ws: Workspace) -> RunRecord | None:
    for run_id in reversed(ws.store.run_ids()):
        record = ws.store.load(run_id)
        if record.status != "aborted":
            return record
    return None


def _upstream_sha(ws: Workspace, ref: str) -> str | None:
    if SHA_RE.match(ref) and len(ref) == 40:
        return ref
    remote = ws.config.upstream.remote
    source = remote if ws.repo.remote_url(remote) else ws.config.upstream.url
    if not source:
        return None
    wanted = ref if ref.startswith("refs/") else f"refs/heads/{ref}"
    try:
        sha = ws.repo.remote_head(source, wanted)
        if sha is None and not ref.startswith("refs/"):
            sha = ws.repo.remote_head(source, f"refs/tags/{ref}^{{}}") or ws.repo.remote_head(
                source, f"refs/tags/{ref}"
            )
    except Ds4syncError:
        return None
    return sha


def _after(ws: Workspace, night: NightlyResult, *, progress: Progress | None) -> NightlyResult:
    """Promote and deploy a green run when configured, then prune old runs."""
    say = progress or (lambda _m: None)
    promoted = deployed = None
    notes = list(night.notes)
    record = night.record
    code = night.exit_code
    if record is not None and record.status == "done" and ws.config.nightly.promote:
        from ds4sync.loop.promote import blockers, promote

        reasons = blockers(ws, record)
        if reasons:
            notes.append(f"not promoted: {'; '.join(reasons)}")
        else:
            try:
                result = promote(ws, run_id=record.run_id)
                promoted = (
                    f"{result.branch}: {result.old_head[:12]} -> {result.new_head[:12]} "
                    f"(rollback {result.rollback_ref})"
                )
                say(f"promoted {promoted}")
            except Ds4syncError as exc:
                notes.append(f"not promoted: {exc.one_line()}")
                code = max(code, ExitCode.NEEDS_PERSON)
        if promoted and ws.config.nightly.deploy and ws.config.deploy is not None:
            from ds4sync.loop.deploy import deploy

            try:
                switched = deploy(ws, run_id=record.run_id)
                deployed = f"{switched.model} now serves {switched.new.tree}"
                say(f"deployed: {deployed}")
            except Ds4syncError as exc:
                notes.append(f"not deployed: {exc.one_line()}")
                code = max(code, ExitCode.NEEDS_PERSON)
    pruned = prune_runs(ws, keep=ws.config.nightly.keep_runs)
    return replace(night, exit_code=code, promoted=promoted, deployed=deployed, pruned=pruned, notes=tuple(notes))


def prune_runs(ws: Workspace, *, keep: int) -> tuple[str, ...]:
    """Remove the worktrees, sync branches, backup refs and logs of all but the newest ``keep`` runs.

    Never touches an active run, a run a rollback ref points at (promoted, or kept by a deploy), or
    a run whose pushed head is the head of a PR still open at the last duplicate-work check. Each
    pruned record stays (a few KB: the trend reads it) with a note. Returns the pruned run ids.
    """
    from ds4sync.loop.deploy import deployed_runs

    ids = ws.store.run_ids()
    old = ids[:-keep] if keep > 0 else ids
    if not old:
        return ()
    protected = _open_pr_runs(ws, ids) | deployed_runs(ws)
    pruned = []
    for run_id in old:
        record = ws.store.load(run_id)
        if record.active or run_id in protected or any(n.startswith("pruned:") for n in record.notes):
            continue
        if ws.repo.ref_exists(f"refs/ds4sync/rollback/{run_id}"):
            continue
        with ws.store.lock(f"prune {run_id}"):
            ws.repo.worktree_remove(Path(record.worktree))
            if ws.repo.checked_out_in(record.sync_branch) is None:
                ws.repo.delete_branch(record.sync_branch)
            ws.repo.delete_ref(record.backup_ref)
            _remove_tree(ws.store.run_dir(run_id) / "logs")
            record.notes.append("pruned: worktree, sync branch, backup ref and logs removed")
            update_run(ws, record)
        pruned.append(run_id)
    return tuple(pruned)


def _open_pr_runs(ws: Workspace, ids: list[str]) -> set[str]:
    """For each PR head still open at the newest duplicate-work check, the newest run that pushed to it.

    That run's merge commit is what the open PR shows; older pushes to the same head are superseded.
    """
    newest_check: DuplicateCheck | None = None
    pushed_to: dict[str, str] = {}  # head branch -> newest run that published to it
    for run_id in ids:
        publish = ws.store.load(run_id).results.publish
        if publish is None:
            continue
        if publish.duplicate_check is not None:
            newest_check = publish.duplicate_check
        if publish.status == "published":
            pushed_to[publish.head_branch] = run_id
    if newest_check is None:
        return set(pushed_to.values())
    open_heads = {p.head for p in newest_check.open_prs} | {newest_check.head_branch}
    return {run_id for head, run_id in pushed_to.items() if head in open_heads}


def _remove_tree(path: Path) -> None:
    import shutil

    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


def _notify(ws: Workspace, night: NightlyResult) -> NightlyResult:
    from ds4sync.publish.notify import send

    assert ws.config.notify is not None
    notice = compose_notice(ws, night)
    sent = send(ws.config.notify, notice)
    code = night.exit_code
    if not sent.sent and sent.targets and code == ExitCode.OK:
        code = ExitCode.TRANSIENT
    if night.record is not None:
        record = ws.store.load(night.record.run_id)
        record.results.notify = sent
        update_run(ws, record)
    return replace(night, exit_code=code, notified=sent)


def compose_notice(ws: Workspace, night: NightlyResult) -> Notice:
    """The night's one message (built by :func:`ds4sync.publish.notice.compose_notice`), with this workspace's
    title prefix and fork name, and whether the run is green by the pipeline's own rule."""
    record = night.record
    return build_notice(
        night,
        proven=record is not None and _run_green(ws, record),
        title_prefix=ws.config.notify.title_prefix if ws.config.notify else "ds4sync",
        fork=ws.config.fork.name or ws.fork_branch or "fork",
    )


def _run_green(ws: Workspace, record: RunRecord) -> bool:
    """Whether ``record`` is green by :func:`ds4sync.models.gates_status.run_green`: every phase of the pipeline
    done or skipped, and every tier promote requires green."""
    from ds4sync.models.gates_status import run_green
    from ds4sync.pipeline import PHASES

    phases = {p.name: record.phases[p.name].status if p.name in record.phases else "pending" for p in PHASES}
    tiers = {name: tier.gates for name, tier in record.results.gates.items()}
    return run_green(phases, tiers, required=ws.config.gates.required_for_promote)


def cron_line(ws: Workspace, *, at: str = "02:30", executable: str | None = None) -> str:
    """A crontab entry that runs ``ds4sync nightly`` on this repository at ``at`` (HH:MM, local time).

    Raises:
        ConfigError: ``at`` is not HH:MM.
        StateError, GitError: nightly could not run here (what is missing, and how to fix it).
    """
    hour, minute = _time_of_day(at)
    log = shlex.quote(_one_line(ws.store.root / "nightly.log"))
    # cron starts the command with PATH=/usr/bin:/bin: the tools gates and builds find by name (uv, nvcc,
    # ccache) must be found at night as they are now.
    path = shlex.quote(_one_line(night_path(executable)))
    # crontab(5): an unescaped % ends the command (the rest becomes its stdin); cron drops the backslash
    command = f"PATH={path} {_command(ws, executable)} >> {log} 2>&1".replace("%", r"\%")
    return f"{minute} {hour} * * * {command}"


def systemd_units(ws: Workspace, *, at: str = "02:30", executable: str | None = None) -> dict[str, str]:
    """A user service and timer (``Persistent=true``: a night missed while the machine was off runs at boot).

    Returns ``{file name: text}`` for ``~/.config/systemd/user/``.

    Raises:
        ConfigError: ``at`` is not HH:MM.
    """
    hour, minute = _time_of_day(at)
    name = unit_name(ws)
    repo, log = _unit_value(ws.repo.path), _unit_value(ws.store.root / "nightly.log")
    # systemd.service(5): in ExecStart, $ expands a variable ($$ is one $) and \ starts a C escape
    command = _unit_value(_command(ws, executable)).replace("\\", "\\\\").replace("$", "$$")
    # systemd.exec(5): a user service's PATH is systemd's own; give the night the PATH it is installed with.
    quoted = _unit_value(night_path(executable)).replace("\\", "\\\\").replace('"', '\\"')
    environment = f'"PATH={quoted}"'
    service = (
        "[Unit]\n"
        f"Description=ds4sync nightly sync of {repo}\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"WorkingDirectory={repo}\n"
        f"Environment={environment}\n"
        f"ExecStart={command}\n"
        "# 1 failed, 4 needs a person, 5 out of time, 6 forge unreachable: reported, not restarted.\n"
        "SuccessExitStatus=0\n"
        f"StandardOutput=append:{log}\n"
        "StandardError=inherit\n"
        "Nice=10\n"
    )
    timer = (
        "[Unit]\n"
        f"Description=Run {name}.service every night at {hour:02d}:{minute:02d}\n"
        "\n"
        "[Timer]\n"
        f"OnCalendar=*-*-* {hour:02d}:{minute:02d}:00\n"
        "Persistent=true\n"
        "RandomizedDelaySec=300\n"
        f"Unit={name}.service\n"
        "\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )
    return {f"{name}.service": service, f"{name}.timer": timer}


def night_path(executable: str | None = None) -> str:
    """The PATH a night runs with: the folder of the ds4sync it runs first, then the installing shell's PATH."""
    folders = [str(Path(executable or sys.executable).parent), *os.environ.get("PATH", os.defpath).split(os.pathsep)]
    return os.pathsep.join(dict.fromkeys(f for f in folders if f))


def _unit_value(value: object) -> str:
    """``value`` as a systemd unit setting: ``%`` doubled (systemd.unit(5) reads ``%x`` as a specifier)."""
    return _one_line(value).replace("%", "%%")


def _one_line(value: object) -> str:
    """``str(value)``, refused when it holds a line break (no crontab line or unit setting can carry one).

    Raises:
        ConfigError: a line break in the path.
    """
    text = str(value)
    if "\n" in text or "\r" in text:
        raise ConfigError(
            "a path with a line break cannot go into a crontab line or a systemd unit",
            where=repr(text),
            fix="move the repository (or the state dir) to a path without line breaks",
        )
    return text


def unit_name(ws: Workspace) -> str:
    """``ds4sync-nightly-<repo folder>``, in the characters systemd allows in a unit name."""
    import re

    stem = re.sub(r"[^A-Za-z0-9_.-]", "-", ws.repo.path.name) or "repo"
    return f"ds4sync-nightly-{stem}"


def _command(ws: Workspace, executable: str | None) -> str:
    """``ds4sync nightly --repo ...``, refused where nightly cannot run (its preflight, then no upstream).

    The command pins ``--branch`` when only the checkout names the fork branch.

    Raises:
        Ds4syncError: what is missing, and how to fix it (:func:`~ds4sync.loop.preflight.preflight`).
    """
    require_preflight(ws)
    branch = require_branch(ws)
    remote = ws.config.upstream.remote
    if not (ws.repo.remote_url(remote) or ws.config.upstream.url):
        raise GitError(
            f"nightly has no upstream to fetch: no remote '{remote}' and no upstream.url",
            where=str(ws.repo.path),
            fix=f"`git remote add {remote} URL` or set upstream.url in ds4sync.yaml",
        )
    program = _one_line(executable or Path(sys.argv[0]).resolve())
    repo = shlex.quote(_one_line(ws.repo.path))
    config = f" --config {shlex.quote(_one_line(ws.config.source))}" if ws.config.source else ""
    pinned = "" if ws.config.fork.branch == branch else f" --branch {shlex.quote(branch)}"
    return f"{shlex.quote(program)} nightly --repo {repo}{config}{pinned}"


def _time_of_day(at: str) -> tuple[int, int]:
    try:
        hour, minute = (int(part) for part in at.split(":"))
        if not (0 <= hour < 24 and 0 <= minute < 60):
            raise ValueError
    except ValueError as exc:
        raise ConfigError(f"'{at}' is not a time of day", where="--at", fix="use HH:MM, e.g. 02:30") from exc
    return hour, minute
