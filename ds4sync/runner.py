"""The run as data: one tuple of phases, started, resumed and aborted the same way.

Each phase reads the run record, does one thing, and returns a :class:`PhaseOutcome`;
the runner writes it back atomically. ``resume`` starts at the first phase not done.

This module is the only writer of the run record (:func:`update_run`) and of its report
(written by the runner after every stop, :func:`run_phases`); a command that runs one phase of
an existing run by hand (``ds4sync build``, ``gate``, ``serving gate`` inside a run) goes through
:func:`run_by_hand` or :func:`record_by_hand`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ds4sync.core import fault
from ds4sync.core.children import registered_children
from ds4sync.core.errors import ConfigError, Ds4syncError, GitError, StateError
from ds4sync.core.git import SHA_RE, GitRepo, check_user_ref
from ds4sync.core.record import PhaseState, now_iso
from ds4sync.core.redact import register_secret_names
from ds4sync.models.config import Config, find_config, load_config, shipped_profile

if TYPE_CHECKING:  # `plan` opens a workspace without loading the record models (every phase's result)
    from ds4sync.models.record import RecordStore, RunRecord

OutcomeStatus = Literal["done", "needs-person", "failed", "skipped"]


@dataclass(frozen=True)
class PhaseOutcome:
    """What one phase ended with: a status, a one-line message, its result and next steps.

    ``result`` is the phase's own model, stored typed in the record's ``results`` (a field of
    :class:`~ds4sync.core.record.RunResults`); None leaves what is there.
    """

    status: OutcomeStatus
    message: str = ""
    result: Any = None
    next_steps: tuple[str, ...] = ()
    details: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.status in ("done", "skipped")


@dataclass
class Workspace:
    """The fork checkout, its config, profile and state store: what every command opens first."""

    repo: GitRepo
    config: Config
    state_dir: Path
    profile: Path
    fork_branch: str | None
    profile_explicit: bool = False

    @cached_property
    def store(self) -> RecordStore:
        """The run records, logs and lock under ``state_dir`` (loaded on first use)."""
        from ds4sync.models.record import RecordStore

        return RecordStore(self.state_dir)

    @property
    def resolutions_dir(self) -> Path:
        """The shared rerere store: in the configured profile, else in the state dir.

        The shipped profile is read-only data; without a profile of their own, a repo's
        recorded resolutions stay in its state dir (shared by its worktrees only).
        """
        if self.profile_explicit:
            return self.profile / self.config.merge.resolutions_dir
        return self.state_dir / "resolutions"


@dataclass
class RunContext:
    """What a phase gets: the workspace, the run record, and a progress callback.

    ``start_commit`` is the sync worktree's HEAD when the current phase first started (None
    before the worktree exists); ``recovering`` is True when that phase's last attempt was
    killed, so the phase must find its own finished commit or start over from ``start_commit``.
    """

    ws: Workspace
    record: RunRecord
    progress: Callable[[str], None] = field(default=lambda message: None)
    start_commit: str | None = None
    recovering: bool = False
    deadline: float | None = None  # time.monotonic() of the run's time budget (nightly), None: no budget
    #: What the person said on ``resume`` (``--accept-markers PATH``, ``--accept-proposals``), read by the
    #: ``on_person`` hook of the phase that waits for them.
    accept_markers: tuple[str, ...] = ()
    accept_proposals: bool = False

    @property
    def worktree(self) -> GitRepo:
        """The sync worktree.

        Raises:
            StateError: its folder is gone (deleted by hand); the run can only be aborted.
        """
        path = Path(self.record.worktree)
        if not (path / ".git").exists():
            raise StateError(
                f"the sync worktree of run {self.record.run_id} is gone",
                where=str(path),
                fix="`ds4sync abort` drops the run (the fork branch is untouched), then start a new `ds4sync merge`",
            )
        return GitRepo(path)


PhaseFn = Callable[[RunContext], PhaseOutcome]


@dataclass(frozen=True)
class Phase:
    """A named step of the pipeline; its result (that field's model) goes to ``record.results.<result_key or name>``."""

    name: str
    run: PhaseFn
    result_key: str | None = None
    #: Called instead of ``run`` when the phase waits for a person (``needs-person``) and the run goes on:
    #: it takes what the person did (the resolve phase: their resolutions) and returns the phase's outcome.
    #: It raises :class:`~ds4sync.core.errors.NeedsPersonError` to refuse, the record saved as it left it.
    on_person: PhaseFn | None = None


@dataclass(frozen=True)
class RunOutcome:
    """Where a run stands after the runner stopped: the record and the last phase's outcome."""

    record: RunRecord
    last_phase: str | None
    outcome: PhaseOutcome | None

    @property
    def status(self) -> str:
        """The run's status (running, needs-person, failed, done, aborted)."""
        return self.record.status


def open_workspace(
    repo_path: Path,
    *,
    config_path: Path | None = None,
    branch: str | None = None,
    state_dir: Path | None = None,
    profile: Path | None = None,
) -> Workspace:
    """Open the fork checkout and load its config; CLI options win over ds4sync.yaml.

    Inside a linked worktree (a run's sync worktree) without a ds4sync.yaml of its own, the main worktree's
    is read, so that a command run there sees the state dir, gates and profile the run was started with.

    Raises:
        GitError: ``repo_path`` is not a git checkout.
        ConfigError: the config file is malformed, the state dir is a file, the profile is missing.
    """
    repo = GitRepo(repo_path, search_parents=True)
    found = find_config(repo.path, config_path)
    if found is None and config_path is None and (main := repo.main_worktree()).path != repo.path:
        found = find_config(main.path, None)  # a linked worktree without one of its own: the main worktree's
    config = load_config(found)
    register_secret_names(config.redact.env)
    root = Path(state_dir or config.state_dir or (repo.common_dir / "ds4sync")).absolute()
    if root.exists() and not root.is_dir():
        raise ConfigError(
            "the state dir is not a folder",
            where=str(root),
            fix="point --state-dir / state_dir at a folder (or move that file away)",
        )
    try:  # every command logs there: one line now, not an error per log record later
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"the state dir cannot be created ({exc.strerror or exc})",
            where=str(root),
            fix="point --state-dir / state_dir at a folder you can write to",
        ) from exc
    chosen = profile or config.profile
    if chosen is not None and not Path(chosen).is_dir():
        raise ConfigError(
            "profile folder does not exist" if not Path(chosen).exists() else "the profile is not a folder",
            where=str(chosen),
            fix="point --profile / profile at a folder with patches/, gates/ (relative paths start at ds4sync.yaml)",
        )
    return Workspace(
        repo=repo,
        config=config,
        state_dir=Path(root),
        profile=Path(chosen).resolve() if chosen is not None else shipped_profile(),  # the record keeps it whole
        fork_branch=branch or config.fork.branch,
        profile_explicit=chosen is not None,
    )


def for_run(ws: Workspace, record: RunRecord) -> Workspace:
    """``ws`` with the profile ``record`` was started with: one run reads one patch-set catalogue, one
    gate set, one resolution store and one set of report templates from its merge to its report.

    A workspace opened without a profile of its own (no ``--profile``, none in ds4sync.yaml) takes the
    run's; one that names a different profile is refused.

    Raises:
        ConfigError: ``ws`` names another profile than the run's, or the run's profile folder is gone.
    """
    if record.profile is None or Path(record.profile).resolve() == ws.profile.resolve():
        return ws
    recorded = Path(record.profile)
    if ws.profile_explicit:
        raise ConfigError(
            f"run {record.run_id} was started with the profile {recorded}, not {ws.profile}",
            where="--profile / profile in ds4sync.yaml",
            fix=f"leave the profile out (or pass --profile {recorded}), or abort the run and start a new one",
        )
    if not recorded.is_dir():
        raise ConfigError(
            f"the profile run {record.run_id} was started with is gone",
            where=str(recorded),
            fix="put the profile folder back, or abort the run and start a new one",
        )
    return replace(ws, profile=recorded, profile_explicit=recorded != shipped_profile())


def require_branch(ws: Workspace) -> str:
    """The fork branch to sync: --branch, else ``fork.branch`` of the config, else the checked-out branch.

    Raises:
        StateError: none of them names one (a detached HEAD and no configured branch).
    """
    branch = ws.fork_branch or _fork_branch_of(ws, ws.repo.current_branch())
    if not branch:
        raise StateError(
            "no fork branch given and HEAD is detached",
            where=str(ws.repo.path),
            fix="pass --branch NAME, set fork.branch in ds4sync.yaml, or check out the fork branch",
        )
    return branch


def _fork_branch_of(ws: Workspace, checked_out: str | None) -> str | None:
    """The checked-out branch, or, inside a sync worktree (its branch is a run's sync branch), the fork
    branch that run syncs: a sync branch is never taken for the fork."""
    if checked_out is None or not ws.store.root.is_dir():
        return checked_out
    for run_id in reversed(ws.store.run_ids()):
        record = ws.store.load(run_id)
        if record.sync_branch == checked_out:
            return record.fork.branch
    return checked_out


def resolve_upstream(ws: Workspace, ref: str, *, fetch: bool = False) -> str:
    """The commit SHA that upstream ``ref`` names (see :func:`resolve_upstream_ref`)."""
    return resolve_upstream_ref(ws, ref, fetch=fetch)[0]


def resolve_upstream_ref(ws: Workspace, ref: str, *, fetch: bool = False) -> tuple[str, str]:
    """The commit that upstream ``ref`` names, and which ref it was read from.

    ``ref`` is upstream's name for a commit: ``main`` and ``upstream/main`` both name the
    upstream remote's ``main`` (``refs/remotes/<remote>/main``, or fetched when that is
    absent or ``fetch`` is set), never a stale local branch of the same name. A SHA names
    itself; a full ref (``refs/heads/main``, ``refs/tags/v1``) is taken as written. Without
    an upstream remote, a name is resolved here. Returns (sha, what it was read from).

    Raises:
        GitError: the ref starts with ``-`` or is empty; it is unknown and cannot be fetched.
    """
    repo = ws.repo
    where = str(repo.path)
    check_user_ref(ref, what="upstream ref", where=where)
    require_unambiguous(repo, ref)
    _require_commitish(repo, ref)
    remote = ws.config.upstream.remote
    has_remote = repo.remote_url(remote) is not None
    source = remote if has_remote else ws.config.upstream.url
    if SHA_RE.match(ref):
        return _upstream_sha(repo, ref, source, remote), f"commit {ref}"
    if ref.startswith("refs/"):
        return _upstream_full_ref(ws, ref, source, fetch=fetch)
    name = ref[len(remote) + 1 :] if has_remote and ref.startswith(f"{remote}/") else ref
    if fetch and source:
        return _fetched(ws, source, name), f"{name} fetched from {source}"
    here = _upstream_name_here(ws, ref)
    if here is not None:
        return here
    if not source:
        raise _no_remote(ref, remote, where)
    try:
        return _fetched(ws, source, name), f"{name} fetched from {source}"
    except GitError as exc:
        local = repo.resolve_commit(f"refs/heads/{ref}")
        if local:
            exc.fix = f"{exc.fix}; for the local branch '{ref}' say `refs/heads/{ref}`"
        raise


def upstream_here(ws: Workspace, ref: str) -> str | None:
    """The commit upstream's name ``ref`` stands for as this repository has it, by the rule of
    :func:`resolve_upstream_ref` but never fetching (a gate's delta base outside a run); None when
    it is not here."""
    if SHA_RE.match(ref) or ref.startswith("refs/"):
        return ws.repo.resolve_commit(ref)
    here = _upstream_name_here(ws, ref)
    return here[0] if here is not None else None


def _upstream_name_here(ws: Workspace, ref: str) -> tuple[str, str] | None:
    """Upstream's branch or tag ``ref`` (``main``, ``upstream/main``) as fetched here: from the upstream
    remote's refs, never a local branch of the same name; without an upstream remote or URL, ``ref`` as
    this repository names it. Returns (sha, the ref it was read from), or None."""
    repo, remote = ws.repo, ws.config.upstream.remote
    if repo.remote_url(remote) is not None:
        name = ref[len(remote) + 1 :] if ref.startswith(f"{remote}/") else ref
        for candidate in (f"refs/remotes/{remote}/{name}", f"refs/tags/{name}"):
            sha = repo.resolve_commit(candidate)
            if sha:
                return sha, candidate
    elif not ws.config.upstream.url:
        sha = repo.resolve_commit(ref)
        if sha:
            return sha, _full_name(repo, ref)
    return None


def _require_commitish(repo: GitRepo, ref: str) -> None:
    """Refuse a ref git has that names no commit (a tree or blob SHA, ``X^{tree}``)."""
    kind = repo.object_type(ref)
    if kind is not None and kind not in ("commit", "tag"):
        raise GitError(
            f"'{ref}' is a {kind}, not a commit", where=str(repo.path), fix="name an upstream commit, branch or tag"
        )


def _upstream_sha(repo: GitRepo, ref: str, source: str | None, remote: str) -> str:
    where = str(repo.path)
    sha = repo.resolve_commit(ref)
    if sha is None and not source:
        raise _no_remote(ref, remote, where)
    if sha is None and source:
        repo.fetch(source, ref)
        sha = repo.resolve_commit(ref)
    if sha is None:
        raise GitError(f"'{ref}' is not a commit of {source}", where=where, fix="check the SHA against upstream")
    return sha


def _upstream_full_ref(ws: Workspace, ref: str, source: str | None, *, fetch: bool) -> tuple[str, str]:
    sha = None if fetch else ws.repo.resolve_commit(ref)
    if sha:
        return sha, ref
    if source and ref.startswith(("refs/heads/", "refs/tags/")):
        return _fetched(ws, source, ref), f"{ref} fetched from {source}"
    raise GitError(f"'{ref}' names no commit here", where=str(ws.repo.path), fix="check the ref (`git show-ref`)")


def _no_remote(ref: str, remote: str, where: str) -> GitError:
    return GitError(
        f"'{ref}' is not a commit here and there is no remote '{remote}' to fetch it from",
        where=where,
        fix=f"add the remote (`git remote add {remote} URL`) or set upstream.url in ds4sync.yaml",
    )


def _fetched(ws: Workspace, source: str, ref: str) -> str:
    ws.repo.fetch(source, ref)
    fetched = ws.repo.resolve_commit("FETCH_HEAD")
    if fetched is None:
        raise GitError(f"fetching '{ref}' from {source} gave no commit", where=str(ws.repo.path))
    return fetched


def require_unambiguous(repo: GitRepo, ref: str) -> None:
    """Refuse a short SHA that more than one commit here starts with, naming the candidates.

    Raises:
        GitError: ``ref`` is ambiguous (the message says "ambiguous" and lists the commits).
    """
    if not re.fullmatch(r"[0-9a-fA-F]{4,39}", ref):
        return
    commits = repo.commits_with_prefix(ref.lower())
    if len(commits) > 1:
        shown = "; ".join(f"{c[:12]} {repo.subject(c)}" for c in commits[:5])
        raise GitError(
            f"'{ref}' is ambiguous: {len(commits)} commits start with it ({shown})",
            where=str(repo.path),
            fix="give more characters of the SHA",
        )


def _full_name(repo: GitRepo, ref: str) -> str:
    return repo.full_ref_name(ref) or ref


def require_clone_complete(repo: GitRepo) -> None:
    """Refuse a shallow or partial clone before anything is created: the merge needs all of history and blobs.

    Raises:
        GitError: the clone is shallow or partial (the message says how to complete it).
    """
    if repo.is_shallow():
        raise GitError(
            "shallow clone: the merge-base and the fork's history are cut off",
            where=str(repo.path),
            fix="complete it with `git fetch --unshallow` (every remote), then run ds4sync again",
        )
    promisor = repo.partial_clone_remote()
    if promisor:
        raise GitError(
            f"partial clone (objects are fetched on demand from '{promisor}'): the merge would fetch blobs mid-run",
            where=str(repo.path),
            fix=f"make it a full clone: `git config --unset-all remote.{promisor}.partialclonefilter; "
            f"git fetch --refetch {promisor}`",
        )


def run_phases(ctx: RunContext, phases: Sequence[Phase], *, stop_after: str | None = None) -> RunOutcome:
    """Run the phases not done yet, in order, saving the record after each.

    Each phase is a transaction on the sync worktree: its attempt records the commit it
    started from (``PhaseState.start_commit``); a phase found ``running`` was killed, and
    runs again with ``ctx.recovering`` set and ``ctx.start_commit`` the commit its first
    attempt started from. Every child process started meanwhile is registered in the run's
    ``children/`` folder (see :class:`ds4sync.core.children.ChildRegistry`). Fault points
    ``phase.<name>.before`` and ``phase.<name>.after`` bracket each phase.

    Stops at the first phase that needs a person or fails, and after ``stop_after``.
    """
    with registered_children(ctx.ws.store.run_dir(ctx.record.run_id) / CHILDREN_DIR):
        return _run_phases(ctx, phases, stop_after=stop_after)


CHILDREN_DIR = "children"


def worktree_head(record: RunRecord) -> str | None:
    """HEAD of the run's sync worktree, or None when it does not exist (yet)."""
    path = Path(record.worktree)
    if not (path / ".git").exists():
        return None
    try:
        return GitRepo(path).head()
    except GitError:
        return None


def _run_phases(ctx: RunContext, phases: Sequence[Phase], *, stop_after: str | None) -> RunOutcome:
    record = ctx.record
    last: tuple[str, PhaseOutcome] | None = None
    for phase in phases:
        state = record.phase(phase.name)
        if state.status in ("done", "skipped"):
            if phase.name == stop_after:
                break
            continue
        outcome = _run_one(ctx, phase, state)
        last = (phase.name, outcome)
        if outcome.status in ("needs-person", "failed"):
            record.status = outcome.status
            _write_report_step(ctx, phases)
            return RunOutcome(record, phase.name, outcome)
        update_run(ctx.ws, record)
        if phase.name == stop_after:
            break
    remaining = [p.name for p in phases if record.phase(p.name).status not in ("done", "skipped")]
    record.status = "paused" if remaining else "done"
    _write_report_step(ctx, phases)
    return RunOutcome(record, last[0] if last else None, last[1] if last else None)


def _run_one(ctx: RunContext, phase: Phase, state: PhaseState) -> PhaseOutcome:
    """One phase as a transaction: mark it running with its start commit, run it, store its result and state
    (the record saved before it runs; the caller saves after). A phase waiting for a person that has an
    ``on_person`` hook takes what the person did instead (:func:`_take_person`)."""
    record = ctx.record
    if state.status == "needs-person" and phase.on_person is not None:
        return _take_person(ctx, phase, state)
    recovering = state.status == "running"  # the lock is ours: the process that ran it is gone
    start = state.start_commit if recovering else worktree_head(record)
    ctx.start_commit, ctx.recovering = start, recovering
    if recovering:
        ctx.progress(f"phase {phase.name} was interrupted; recovering from {start[:12] if start else 'the start'}")
        clear_stale_lock(ctx)
    record.phases[phase.name] = PhaseState(
        status="running",
        started_at=state.started_at or now_iso(),
        pid=os.getpid(),
        attempts=state.attempts + 1,
        start_commit=start,
    )
    record.status = "running"
    update_run(ctx.ws, record)
    fault.point(f"phase.{phase.name}.before")
    try:
        outcome = phase.run(ctx)
    except Exception as exc:  # the phase is failed, never left "running"; the error still propagates
        _mark_failed(ctx, phase.name, exc)
        raise
    fault.point(f"phase.{phase.name}.after")
    _store_outcome(record, phase, outcome, start_commit=start)
    return outcome


def _take_person(ctx: RunContext, phase: Phase, state: PhaseState) -> PhaseOutcome:
    """Run ``phase.on_person`` (a resumed run whose phase waited for a person) and store its outcome; a
    refusal is raised with the record saved as the hook left it (what still waits, for ``status``)."""
    assert phase.on_person is not None
    try:
        outcome = phase.on_person(ctx)
    except Exception:
        update_run(ctx.ws, ctx.record)
        raise
    _store_outcome(ctx.record, phase, outcome, start_commit=state.start_commit)
    return outcome


def _store_outcome(record: RunRecord, phase: Phase, outcome: PhaseOutcome, *, start_commit: str | None) -> None:
    """Put ``outcome``'s result at the phase's key of ``record.results`` and its status into ``record.phases``."""
    if outcome.result is not None:
        setattr(record.results, phase.result_key or phase.name, outcome.result)
    state = record.phase(phase.name)
    record.phases[phase.name] = PhaseState(
        status=outcome.status,
        started_at=state.started_at or now_iso(),
        finished_at=now_iso(),
        attempts=state.attempts,
        message=outcome.message,
        start_commit=start_commit,
    )


def update_run(ws: Workspace, record: RunRecord, *, report: bool = False) -> Path:
    """Validate ``record`` and save it atomically: the one place the run record is written.

    The whole record is validated again first (a list or dict inside it changed in place is not
    checked when it is assigned). With ``report``, its report (``report.md``, ``summary.json``) is
    written again from the saved record, so that it states what the record now says (a promote, an
    abort, a note); a report that cannot be rendered is noted in the record instead. Returns the
    record's path.

    Raises:
        pydantic.ValidationError: the record holds a value its model does not accept (a bug).
    """
    path = _save(ws, record)
    if report:
        try:
            _write_report(ws, record)
        except Ds4syncError as exc:
            record.notes.append(f"report not written: {exc.one_line()}")
            path = _save(ws, record)
    return path


def _save(ws: Workspace, record: RunRecord) -> Path:
    type(record).model_validate(record.model_dump())
    return ws.store.save(record)


def _write_report(ws: Workspace, record: RunRecord) -> Path:
    """Render ``record``'s report into its run folder (the one call of the report writer).

    Raises:
        ConfigError: no report templates in the workspace's profile nor in the shipped one.
    """
    from ds4sync.report.files import write_report

    return write_report(ws.store, record, ws.profile)


def _write_report_step(ctx: RunContext, phases: Sequence[Phase]) -> None:
    """The runner's always-run last step: write the report with the status the run stopped with, and save.

    Whether the run is done, paused, failed or waiting for a person, ``report.md`` and ``summary.json``
    state where it stands (a stopped run's report phase stays pending; a resumed run writes the final
    one). A report that cannot be rendered fails a done report phase (and the run); for a run that
    stopped before it, it is only noted, so the stopped phase's outcome stays what the person sees.
    """
    from ds4sync.report.files import report_files

    record = ctx.record
    reported, before = record.phase("report").status == "done", record.results.report
    record.results.report = report_files(ctx.ws.store, record.run_id)  # saved first: the report renders the record
    _save(ctx.ws, record)
    try:
        _write_report(ctx.ws, record)
    except Ds4syncError as exc:
        record.results.report = before
        record.notes.append(f"report not written: {exc.one_line()}")
        if reported:
            _mark_failed(ctx, "report", exc)
        else:
            _save(ctx.ws, record)
        return
    if record.status in ("failed", "needs-person") and any(p.name == "report" for p in phases):
        ctx.progress(f"report ({record.status}) written to {record.results.report.path}")


def run_by_hand(
    ws: Workspace,
    record: RunRecord,
    phase: Phase,
    *,
    progress: Callable[[str], None] | None = None,
    as_phase: bool = True,
) -> PhaseOutcome:
    """Run ``phase`` alone on the existing run ``record``: a person's ``ds4sync build`` or ``gate`` inside a run.

    The same bookkeeping as a pipeline phase: children a killed command left are stopped first, the ones
    it starts are registered in the run, the phase is marked running with its start commit before it runs
    and failed when it raises, and its result is stored at its key of ``record.results``. ``as_phase``
    False: the phase is a part of a pipeline phase (one gate tier), so its result is stored (the phase
    writes it into ``ctx.record`` itself where the key holds many) but no phase state. The run's status
    is left as it is. The caller holds the store's lock.

    Raises:
        whatever the phase raises, after recording it.
    """
    say = progress or (lambda _m: None)
    stop_leftover_children(ws, record, say)
    ctx = RunContext(ws, record, say)
    with registered_children(ws.store.run_dir(record.run_id) / CHILDREN_DIR):
        if not as_phase:
            outcome = phase.run(ctx)
            if outcome.result is not None:
                setattr(record.results, phase.result_key or phase.name, outcome.result)
            update_run(ws, record)
            return outcome
        state = record.phase(phase.name)
        start = worktree_head(record)
        ctx.start_commit = start
        record.phases[phase.name] = PhaseState(
            status="running", started_at=now_iso(), pid=os.getpid(), attempts=state.attempts + 1, start_commit=start
        )
        update_run(ws, record)
        try:
            outcome = phase.run(ctx)
        except Exception as exc:
            _mark_failed(ctx, phase.name, exc, run_failed=False)
            raise
        _store_outcome(record, phase, outcome, start_commit=start)
        update_run(ws, record)
        return outcome


def record_by_hand(
    ws: Workspace, update: Callable[[RunRecord], None], *, run_id: str | None = None
) -> RunRecord | None:
    """Store what a person's command measured beside the run (``serving gate``, ``ab``, ``backport evaluate``,
    gate results merged from CI) into the active run, or into run ``run_id`` (an ended one too): ``update``
    writes it into the record, read again now, and the runner saves it. Returns that record, or None when
    there is no such run (nothing is stored).

    Raises:
        StateError: the record cannot be read.
    """
    record = ws.store.current() if run_id is None else ws.store.load(run_id)
    if record is None:
        return None
    update(record)
    update_run(ws, record)
    return record


def clear_stale_lock(ctx: RunContext) -> None:
    """Remove a stale ``index.lock`` from the run's sync worktree (:meth:`GitRepo.clear_stale_index_lock`),
    saying so and noting it in the record; called wherever a killed attempt is picked up."""
    if not (Path(ctx.record.worktree) / ".git").exists():
        return
    said = GitRepo(Path(ctx.record.worktree)).clear_stale_index_lock()
    if said:
        ctx.progress(said)
        ctx.record.notes.append(said)


def _mark_failed(ctx: RunContext, name: str, exc: Exception, *, run_failed: bool = True) -> None:
    """Record phase ``name`` as failed with the error and the command that goes on after the fix (and the
    run as failed, unless ``run_failed`` is False: a phase run by hand)."""
    what = exc.one_line() if isinstance(exc, Ds4syncError) else f"{type(exc).__name__}: {exc}"
    state = ctx.record.phases[name]
    state.status = "failed"
    state.finished_at = now_iso()
    state.message = f"{what} (fix it, then `ds4sync resume`; or `ds4sync abort`)"
    if run_failed:
        ctx.record.status = "failed"
    update_run(ctx.ws, ctx.record)


def stop_leftover_children(ws: Workspace, record: RunRecord, say: Callable[[str], None], *, note: bool = True) -> None:
    """Stop the child process groups a killed run left running (still ours: pid and start time match), with
    the one stop routine, saying so in one line; ``note``: also in the record (commands holding the lock)."""
    from ds4sync.core.children import ChildRegistry

    stopped = ChildRegistry(ws.store.run_dir(record.run_id) / CHILDREN_DIR).reap_orphans(grace_s=2.0)
    if stopped:
        names = ", ".join(f"{e.pgid} `{' '.join(e.argv[:3])}`" for e in stopped)
        say(f"stopped {len(stopped)} process group(s) left by the interrupted run {record.run_id}: {names}")
        if note:
            record.notes.append(f"stopped {len(stopped)} leftover process group(s) of an interrupted attempt: {names}")
            update_run(ws, record)


def stop_dead_run_children(ws: Workspace, say: Callable[[str], None], *, note: bool = True) -> None:
    """What every command that touches a run does first: stop the children that the run it would touch (the
    active run, else the latest) registered and whose command is gone (:func:`stop_leftover_children`), so no
    command runs beside a killed run's gate, build or server in the same worktree."""
    record = ws.store.current() or ws.store.latest()
    if record is not None:
        stop_leftover_children(ws, record, say, note=note)
