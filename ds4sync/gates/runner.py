"""Run one tier: load its gates, select the affected ones, serve unchanged ones from cache,
run the rest in parallel (CPU gates up to ``jobs`` at once, GPU gates on disjoint devices),
and record the :class:`TierResult` into the active run, if any.

Ctrl-C stops every running child's process group, then re-raises KeyboardInterrupt.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from ds4sync.core import fault
from ds4sync.core.children import registered_children
from ds4sync.core.errors import ConfigError, NeedsPersonError, ToolMissingError
from ds4sync.core.git import GitRepo
from ds4sync.core.model import updated
from ds4sync.core.proc import stop_process_groups
from ds4sync.core.record import now_iso
from ds4sync.gates.cache import GateCache, cache_key, environment_fingerprint
from ds4sync.gates.definition import Gate
from ds4sync.gates.environments import ToolsEnv, build_python, tools_python
from ds4sync.gates.executors import GateExecutor
from ds4sync.gates.kinds import GateContext, kind_module, runner_for
from ds4sync.gates.selection import Selected, changed_files, select
from ds4sync.gates.tiers import load_tier, tier_environment
from ds4sync.models.gates_results import GateResult, TestFailure, TierResult
from ds4sync.models.gates_status import gate_green, gate_ran
from ds4sync.models.record import RunRecord
from ds4sync.runner import Phase, PhaseOutcome, RunContext, Workspace, for_run, run_by_hand, upstream_here

STOP_GRACE_S = 3.0


@dataclass(frozen=True)
class TierOptions:
    """What `ds4sync gate` asked for; None/empty fields fall back to ds4sync.yaml's ``gates:``."""

    tier: str
    names: tuple[str, ...] = ()
    changed_since: str | None = None
    run_all: bool = False
    jobs: int | None = None
    gpus: tuple[str, ...] | None = None
    use_cache: bool = True
    python: str | None = None
    target: Path | None = None
    bench: bool = False  # kernel gates: also benchmark (passed to kinds as ``ctx.extra["bench"]``)
    executor: str | None = None  # "local" or "ray" (default: gates.executor in ds4sync.yaml)
    address: str | None = None  # the Ray cluster (default: gates.ray_address)
    deadline: float | None = None  # time.monotonic() past which running gates are stopped (nightly budget)


@dataclass(frozen=True)
class GateEvent:
    """Progress of one gate: queued, started (with devices), progress (tests so far), finished (result)."""

    gate: str
    kind: Literal["queued", "started", "progress", "finished"]
    tests: int = 0
    devices: tuple[str, ...] = ()
    result: GateResult | None = None


Progress = Callable[[GateEvent], None]


def resolve_python(explicit: str | None, target: Path, fork: Path, *, built: str | None = None) -> str:
    """The target environment's interpreter: ``explicit``, else ``built`` (the interpreter of the venv this
    run's build made, when it exists), else ``<checkout>/.venv/bin/python``, else the fork checkout's, else the
    python running ds4sync.

    Raises:
        ToolMissingError: ``explicit`` names no existing program.
    """
    if explicit:
        path = Path(explicit)
        found = str(path if path.is_absolute() else target / path) if "/" in explicit else shutil.which(explicit)
        if not found or not Path(found).exists():
            raise ToolMissingError(
                f"python not found: {explicit}",
                where="gates.python / --python",
                fix="point it at the target environment's interpreter",
            )
        return found
    if built and Path(built).exists():
        return built
    for root in (target, fork):
        candidate = root / ".venv" / "bin" / "python"
        if candidate.exists():
            return str(candidate)
    return sys.executable


@dataclass
class _Children:
    """Process groups started by gate threads, so that Ctrl-C can stop them all."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    groups: set[int] = field(default_factory=set)
    cancelled: threading.Event = field(default_factory=threading.Event)

    def add(self, pgid: int) -> None:
        with self.lock:
            self.groups.add(pgid)
        if self.cancelled.is_set():  # started while stopping: stop it too
            self.stop()

    def stop(self) -> None:
        self.cancelled.set()
        with self.lock:
            groups = list(self.groups)
        stop_process_groups(groups, grace_s=STOP_GRACE_S)


class _Devices:
    """Disjoint GPU assignment: a gate takes ``n`` ids and gives them back when done."""

    def __init__(self, ids: tuple[str, ...]) -> None:
        self.free = list(ids)
        self.total = len(ids)
        self.cond = threading.Condition()

    @contextlib.contextmanager
    def take(self, count: int):
        with self.cond:
            self.cond.wait_for(lambda: len(self.free) >= count)
            got, self.free = tuple(self.free[:count]), self.free[count:]
        try:
            yield got
        finally:
            with self.cond:
                self.free = sorted([*self.free, *got], key=lambda d: (len(d), d))
                self.cond.notify_all()


def run_tier(
    ws: Workspace, options: TierOptions, *, record: RunRecord | None = None, progress: Progress | None = None
) -> TierResult:
    """Run the gates of ``options.tier`` and return their results (recorded into ``record`` when given).

    Runs in ``options.target``, else the run's worktree, else a scratch worktree of the checkout's
    HEAD under the state dir (so that the person's checkout is never written to). Each result
    records the commit and tree id it ran on; a tree that changed while the gates ran makes
    every gate an error.

    Raises:
        ConfigError: bad gate file, unknown tier or gate name.
        ToolMissingError: the target python does not exist.
        KeyboardInterrupt: after every child was stopped.
    """
    if options.target is None and record is None:
        with scratch_worktree(ws) as scratch:
            result = run_tier(ws, dataclasses.replace(options, target=scratch), progress=progress)
        return updated(result, repo=str(ws.repo.path))
    if record is not None:
        with registered_children(ws.store.run_dir(record.run_id) / "children"):
            return _run_tier(ws, options, record=record, progress=progress)
    return _run_tier(ws, options, record=record, progress=progress)


@contextlib.contextmanager
def scratch_worktree(ws: Workspace):
    """A copy of the checkout as it is, under ``<state>/gate-worktrees/``, removed afterwards.

    A detached worktree at the checkout's HEAD whose files are the tree the gates will prove
    (:meth:`GitRepo.worktree_tree`: tracked changes, deletions and the untracked, not ignored
    files, symlinks and modes as git stores them), written by ``git read-tree -u``; the index is
    then reset to HEAD, so that what the person changed shows as changed there too. The gates see
    what the person has, and whatever they write lands in the copy, never in the person's checkout.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = ws.store.root / "gate-worktrees" / f"{stamp}-{os.getpid()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    repo = ws.repo
    head, (tree, _) = repo.head(), repo.worktree_tree(exclude=_state_inside(ws, repo.path))
    scratch = repo.worktree_add_detached(path, head)
    try:
        scratch.check_out_tree_unstaged(tree)  # HEAD's index; the changes stay in the files
        yield path
    finally:
        repo.worktree_remove(path)


def _state_inside(ws: Workspace, target: Path) -> tuple[Path, ...]:
    """The state dir, where it lies inside ``target`` (a CI artefact folder): no part of the checkout."""
    state = ws.store.root.resolve()
    return (state,) if state.is_relative_to(target.resolve()) else ()


#: Untracked files a tier result names (its tier line shows the first three).
MAX_UNTRACKED = 20


def _run_tier(
    ws: Workspace, options: TierOptions, *, record: RunRecord | None, progress: Progress | None
) -> TierResult:
    started_at, start = now_iso(), time.monotonic()
    if record is not None:
        ws = for_run(ws, record)  # the run's own gate definitions
    target = options.target or (Path(record.worktree) if record else ws.repo.path)
    repo = _mergeable(target)
    # The proof is the tree the gates see: tracked changes and untracked files included, so that a commit
    # that lacks a file a gate needed is never the tree it passed on. Gates writing files git does not
    # ignore (caches) do not count as the checkout changing: that check compares tracked files only.
    head, (tracked, _) = repo.head(), repo.worktree_tree(untracked=False)
    tree, untracked = repo.worktree_tree(exclude=_state_inside(ws, target))
    gates = _named(load_tier(ws.profile, options.tier), options.names, ws.profile)
    settings = ws.config.gates
    changed = changed_files(repo, options.changed_since) if options.changed_since else None
    decisions, run_all_reason = select(
        gates,
        changed,
        run_all=options.run_all,
        patterns=settings.run_all_patterns,
        excludes=settings.run_all_exclude_patterns,
    )
    environments = _Environments.of(ws, options, target=target, record=record)
    tier_env = environments.resolve(environments.tier)
    python = tier_env.python
    fingerprint = tier_env.fingerprint
    emit = progress or (lambda _event: None)
    plan = _plan(ws, options, record, target, repo, environments, python or "", emit)
    results = _proofs(repo, plan.execute(decisions), head=head, tracked=tracked, tree=tree)
    return TierResult(
        tier=options.tier,
        repo=str(target),
        head=head,
        tree=tree,
        untracked=tuple(untracked[:MAX_UNTRACKED]),
        started_at=started_at,
        duration_s=time.monotonic() - start,
        changed_since=options.changed_since,
        changed_files=None if changed is None else len(changed),
        run_all_reason=run_all_reason,
        python=python,
        environment=dict(fingerprint),
        gates=tuple(results),
    )


def _mergeable(target: Path) -> GitRepo:
    """The checkout at ``target``, when git can write its tree (no unmerged path).

    Raises:
        NeedsPersonError: unmerged paths: no gate could say what it ran on.
    """
    repo = GitRepo(target)
    unmerged = sorted(set(repo.unmerged_paths()))
    if unmerged:
        raise NeedsPersonError(
            f"{len(unmerged)} unmerged path(s) in the worktree: {', '.join(unmerged[:5])}",
            where=str(target),
            fix="resolve and `git add` them (then `ds4sync resume`), and gate again",
        )
    return repo


def _plan(
    ws: Workspace,
    options: TierOptions,
    record: RunRecord | None,
    target: Path,
    repo: GitRepo,
    environments: _Environments,
    python: str,
    emit: Progress,
) -> _Plan:
    """How the tier's gates run in ``target`` (``repo``): its log folder (the run's, else a dated one), the base of the
    fork's delta (the run's upstream commit, else --changed-since, else upstream's ref here), cache,
    devices, CPU slots, deadline and executor."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    log_dir = (
        ws.store.log_dir(record.run_id) / "gates" if record else ws.store.root / "gate-logs" / f"{stamp}-{options.tier}"
    )
    base_ref = record.upstream.sha if record else (options.changed_since or upstream_here(ws, ws.config.upstream.ref))
    settings = ws.config.gates
    plan = _Plan(
        repo=repo,
        cache=GateCache(ws.store.root / "gate-cache"),
        environments=environments,
        use_cache=options.use_cache,
        emit=emit,
        children=_Children(),
        devices=_Devices(_gpus(options.gpus, settings.gpus)),
        cpu_slots=threading.Semaphore(options.jobs or settings.jobs),
        context=GateContext(
            cwd=target, python=python, log_dir=log_dir, base_ref=base_ref, extra={"bench": options.bench}
        ),
        deadline=options.deadline,
    )
    plan.executor = _executor(ws, options, repo)
    return plan


def _proofs(repo: GitRepo, results: list[GateResult], *, head: str, tracked: str, tree: str) -> list[GateResult]:
    """``results``, each naming the commit and tree it proved; all ``error`` when the checkout's commit or
    tracked files changed while the gates ran (``tracked``: its tracked tree before)."""
    after = (repo.head(), repo.worktree_tree(untracked=False)[0])
    proof: dict[str, str] = {"commit": head, "tree": tree}
    if after != (head, tracked):
        proof |= {
            "status": "error",
            "reason": f"the checkout changed while the gates ran ({tracked[:12]} -> {after[1][:12]})",
        }
    return [updated(r, **proof) for r in results]


def run_tier_in_run(
    ws: Workspace,
    record: RunRecord,
    options: TierOptions,
    *,
    progress: Progress | None = None,
    say: Callable[[str], None] | None = None,
    check: Callable[[TierResult], None] | None = None,
) -> TierResult:
    """Run one tier in the run's worktree by hand (``ds4sync gate`` inside a run) through the runner's
    bookkeeping (:func:`ds4sync.runner.run_by_hand`), its result recorded at ``record.results.gates[tier]``;
    ``say`` hears of leftover children stopped first; ``check`` may refuse the result before it is stored
    (an ended run takes only a result that proves its head). The caller holds the store's lock.

    Raises:
        as :func:`run_tier`, and whatever ``check`` raises (nothing stored then).
    """
    done: list[TierResult] = []

    def gate_tier(ctx: RunContext) -> PhaseOutcome:
        result = run_tier(ctx.ws, options, record=ctx.record, progress=progress)
        if check is not None:
            check(result)
        ctx.record.results.gates[result.tier] = result
        done.append(result)
        return PhaseOutcome("done" if result else "failed", result.line())

    run_by_hand(ws, record, Phase("gate", gate_tier), progress=say, as_phase=False)
    return done[0]


@dataclass(frozen=True)
class _Environment:
    """One environment resolved: its interpreter and fingerprint, or why it cannot be used (``error``)."""

    name: str
    python: str | None = None
    fingerprint: tuple[tuple[str, str], ...] = ()
    error: str | None = None


@dataclass
class _Environments:
    """The environments a tier's gates name (:mod:`ds4sync.gates.environments`), each resolved once."""

    ws: Workspace
    options: TierOptions
    target: Path
    record: RunRecord | None
    tier: str
    tools: ToolsEnv | None
    tier_file: Path
    resolved: dict[str, _Environment] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, ws: Workspace, options: TierOptions, *, target: Path, record: RunRecord | None) -> _Environments:
        """``--python``, else ``gates.environments[tier]``, else the tier file's ``environment``, else target.

        Raises:
            ToolMissingError: ``--python`` names no existing program.
        """
        named, tools, path = tier_environment(ws.profile, options.tier)
        configured = {str(t): str(e) for t, e in ws.config.gates.environments.items()}
        tier = "--python" if options.python else configured.get(options.tier) or named or "target"
        envs = cls(ws, options, target, record, tier, tools, path)
        if options.python:  # asked for on the command line: a missing one ends the command, as before
            python = resolve_python(options.python, target, ws.repo.path)
            envs.resolved["--python"] = _Environment("--python", python, environment_fingerprint(python))
        return envs

    def name_of(self, gate: Gate) -> str:
        """The environment ``gate`` runs in: ``--python`` over its own ``environment`` over its tier's."""
        return self.tier if self.tier == "--python" else gate.environment or self.tier

    def resolve(self, name: str) -> _Environment:
        """``name`` resolved (made, for a tools venv) the first time it is asked for; errors kept, not raised."""
        with self.lock:
            if name not in self.resolved:
                try:
                    python = self._python(name)
                    self.resolved[name] = _Environment(name, python, environment_fingerprint(python))
                except ToolMissingError as exc:
                    self.resolved[name] = _Environment(name, error=exc.one_line())
            return self.resolved[name]

    def _python(self, name: str) -> str:
        build = self.record.results.build if self.record else None
        built = build.python if build is not None and build.status == "passed" else None
        if name == "build":
            why = "this run has no build result" if build is None else f"this run's build {build.status}"
            return build_python(built, in_run=self.record is not None, why_not=why)
        if name == "tools":
            if self.tools is None:
                raise ToolMissingError(
                    "environment 'tools' asked for, but the tier file describes no tools venv",
                    where=str(self.tier_file),
                    fix="add tools: {requirements: [NAME==VERSION]} to it",
                )
            return tools_python(self.tools, self.ws.store.root / "tools-venvs", where=str(self.tier_file))
        if name == "ds4sync":
            return sys.executable
        return resolve_python(self.ws.config.gates.python, self.target, self.ws.repo.path, built=built)


@dataclass
class _Plan:
    repo: GitRepo
    cache: GateCache
    environments: _Environments
    use_cache: bool
    emit: Progress
    children: _Children
    devices: _Devices
    cpu_slots: threading.Semaphore
    context: GateContext
    deadline: float | None = None
    over_budget: threading.Event = field(default_factory=threading.Event)
    executor: GateExecutor | None = None  # None: run here; else e.g. a RayExecutor

    def execute(self, decisions: list[Selected]) -> list[GateResult]:
        results: dict[str, GateResult] = {}
        todo: list[tuple[Gate, str | None, str]] = []
        for item in decisions:
            gate = item.gate
            env = self.environments.resolve(self.environments.name_of(gate))
            if env.error is not None:  # the environment it names is not there: an error, never another python
                results[gate.name] = _plain(gate, "error", f"environment {env.name}: {env.error}")
                self.emit(GateEvent(gate.name, "finished", result=results[gate.name]))
                continue
            key = cache_key(gate, self.repo, env.fingerprint)
            # A gate left out by selection proves something only through a pass on identical inputs.
            hit = self.cache.get(key) if key and (self.use_cache or not item.runs) else None
            if hit is not None:
                why = "" if item.runs else f"{item.skip_reason or 'not affected'}; "
                results[gate.name] = updated(
                    hit,
                    status="cached",
                    reason=f"{why}same inputs passed before ({hit.counts.summary()})",
                    cache_key=key,
                    details=updated(hit.details, cached_duration_s=hit.duration_s),
                    duration_s=0.0,
                )
            elif not item.runs:
                why = item.skip_reason or "not affected"
                results[gate.name] = _plain(gate, "skipped", f"{why}; no pass on identical inputs: not proven")
            if gate.name in results:
                self.emit(GateEvent(gate.name, "finished", result=results[gate.name]))
                continue
            todo.append((gate, key, item.reason))
            self.emit(GateEvent(gate.name, "queued"))
        if todo:
            self._run_all(todo, results)
        return [results[item.gate.name] for item in decisions]

    def _run_all(self, todo: list[tuple[Gate, str | None, str]], results: dict[str, GateResult]) -> None:
        workers = max(1, len(todo))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gate") as pool:
            futures: dict[Future[GateResult], str] = {
                pool.submit(self._one, gate, key, why): gate.name for gate, key, why in todo
            }
            pending = set(futures)
            try:
                while pending:
                    if (
                        self.deadline is not None
                        and not self.over_budget.is_set()
                        and time.monotonic() >= self.deadline
                    ):
                        # The time budget is spent: stop what runs, start nothing more; both are incomplete.
                        self.over_budget.set()
                        self.children.stop()
                    done, pending = wait(pending, timeout=self._tick(), return_when=FIRST_COMPLETED)
                    for fut in done:
                        results[futures[fut]] = fut.result()
            except KeyboardInterrupt:
                self.children.stop()
                wait(pending, timeout=30)
                raise

    def _tick(self) -> float:
        if self.deadline is None or self.over_budget.is_set():
            return 0.2
        return max(0.0, min(0.2, self.deadline - time.monotonic()))

    def _stopped(self, gate: Gate, reason: str) -> GateResult:
        """A gate the time budget stopped (or never started): incomplete, never counted as passing."""
        return _plain(
            gate,
            "incomplete",
            f"time budget reached: {reason}",
            failure=TestFailure(
                node_id=gate.name, message="stopped at the time budget", env_category="time-budget", env_rule="budget"
            ),
        )

    def _one(self, gate: Gate, key: str | None, why: str) -> GateResult:
        need = gate.definition.devices
        if self.over_budget.is_set():
            return self._stopped(gate, "not started")
        if self.executor is not None:  # the cluster schedules GPUs and GPU kinds itself
            return self._finish(gate, key, self._remote(gate, why))
        if self.children.cancelled.is_set():
            return _plain(gate, "error", "interrupted before it started")
        if need > self.devices.total:
            return _plain(
                gate,
                "incomplete",
                f"needs {need} GPUs, {self.devices.total} given (--gpus)",
                failure=TestFailure(
                    node_id=gate.name,
                    message="not enough GPUs on this host",
                    env_category="host-topology",
                    env_rule="devices",
                ),
            )
        slot = self.devices.take(need) if need else _semaphore(self.cpu_slots)
        with slot as devices:
            if self.over_budget.is_set():
                return self._stopped(gate, "not started")
            if self.children.cancelled.is_set():
                return _plain(gate, "error", "interrupted before it started")
            result = self._execute(gate, tuple(devices or ()), why)
        return self._finish(gate, key, result)

    def _finish(self, gate: Gate, key: str | None, result: GateResult) -> GateResult:
        if key and result.status == "passed":
            result = updated(result, cache_key=key)
            self.cache.put(key, result)
        self.emit(GateEvent(gate.name, "finished", result=result))
        return result

    def _started(self, gate: Gate, pgid: int) -> None:
        self.children.add(pgid)
        fault.point(f"gate.child-started.{gate.name}")

    def _remote(self, gate: Gate, why: str) -> GateResult:
        assert self.executor is not None
        self.emit(GateEvent(gate.name, "started"))
        result = self.executor.run(gate, dataclasses.replace(self.context, python=self._python(gate)))
        return updated(result, details=updated(result.details, selected_because=why))

    def _execute(self, gate: Gate, devices: tuple[str, ...], why: str) -> GateResult:
        counter = getattr(kind_module(gate.definition.kind), "progress_count", None)
        seen = [0]

        def on_line(line: str) -> None:
            if counter is not None:
                n = counter(line)
                if n:
                    seen[0] += n
                    self.emit(GateEvent(gate.name, "progress", tests=seen[0], devices=devices))

        ctx = GateContext(
            cwd=self.context.cwd,
            python=self._python(gate),
            log_dir=self.context.log_dir,
            devices=devices,
            base_ref=self.context.base_ref,
            on_line=on_line,
            on_start=lambda pgid: self._started(gate, pgid),
            extra=self.context.extra,
        )
        self.emit(GateEvent(gate.name, "started", devices=devices))
        try:
            result = runner_for(gate.definition.kind)(gate, ctx)
        except ToolMissingError as exc:
            result = _plain(gate, "error", exc.one_line())
        if self.over_budget.is_set() and _stopped_short(result.status):
            stopped = self._stopped(gate, f"stopped after {result.duration_s:.1f} s")
            result = updated(
                result, status="incomplete", reason=stopped.reason, failures=stopped.failures, counts=stopped.counts
            )
        elif self.children.cancelled.is_set() and _stopped_short(result.status):
            result = updated(result, status="error", reason=f"interrupted ({result.reason})")
        env = self.environments.name_of(gate)
        return updated(result, details=updated(result.details, selected_because=why, environment=env))

    def _python(self, gate: Gate) -> str:
        """The interpreter of the environment ``gate`` runs in (resolved before the gate was queued)."""
        python = self.environments.resolve(self.environments.name_of(gate)).python
        assert python is not None  # execute() made a gate whose environment failed an error result
        return python


def _stopped_short(status: str) -> bool:
    """Whether a gate that ended with ``status`` while its run was being stopped was cut short by it."""
    return gate_ran(status) and not gate_green(status)


@contextlib.contextmanager
def _semaphore(sem: threading.Semaphore):
    with sem:
        yield ()


def _plain(gate: Gate, status: str, reason: str, *, failure: TestFailure | None = None) -> GateResult:
    from ds4sync.models.gates_results import TestCounts

    counts = TestCounts(env_only=1) if failure and failure.env_category else TestCounts()
    return GateResult(
        name=gate.name,
        tier=gate.tier,
        kind=gate.definition.kind,
        status=status,
        required=gate.definition.required,
        reason=reason,
        counts=counts,
        failures=(failure,) if failure else (),
    )


def _gpus(asked: tuple[str, ...] | None, configured: tuple[str, ...]) -> tuple[str, ...]:
    """--gpus, else gates.gpus in ds4sync.yaml, else this process's CUDA_VISIBLE_DEVICES (none when unset)."""
    if asked is not None:
        return asked
    if configured:
        return configured
    return tuple(d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip())


def _named(gates: tuple[Gate, ...], names: tuple[str, ...], profile: Path) -> tuple[Gate, ...]:
    if not names:
        return gates
    known = {g.name for g in gates}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(
            f"no gate named {', '.join(unknown)} in this tier (known: {', '.join(sorted(known))})",
            where=str(profile),
            fix="check --gate",
        )
    return tuple(g for g in gates if g.name in names)


def _executor(ws: Workspace, options: TierOptions, repo: GitRepo) -> GateExecutor | None:
    """The executor asked for (``--executor``, else ``gates.executor``): None runs gates here.

    Raises:
        ConfigError: a Ray run of a checkout with uncommitted changes (the nodes see commits only).
    """
    settings = ws.config.gates
    kind = options.executor or settings.executor
    if kind == "local":
        return None
    if kind != "ray":
        raise ConfigError(f"unknown executor '{kind}'", where="--executor", fix="use local or ray")
    from ds4sync.gates.executors import RayExecutor

    dirty = repo.status_porcelain()
    if dirty:
        raise ConfigError(
            f"{repo.path} has uncommitted changes ({len(dirty)} paths): Ray nodes run committed trees only",
            where="--executor ray",
            fix="commit them, or run the gates here",
        )
    source = settings.ray_source or str(repo.path)
    return RayExecutor(options.address or settings.ray_address, source, repo.head()).connect()
