"""Where a gate runs: here (the default), or as a task on a Ray cluster.

Ray is vLLM's own distributed runtime, so the fork's GPU hosts often run it already. With
``--executor ray`` each gate becomes one Ray task that asks for what the gate asks for: its GPUs
(``devices``) and, when the gate names one, a custom resource per GPU kind (``gpu_kind: sm120``),
which the cluster's nodes advertise (``ray start --resources '{"sm120": 2}'``). The task checks out
the gate's exact commit in the node's own copy of the repository, runs the gate with the same kind
code as a local run, and sends back the result, the log, the JUnit XML and the node's environment
fingerprint; the driver writes them where a local run would have, so the record, the report and
the gate cache cannot tell the difference except for ``details.executor``.

A node lost while a gate runs (its raylet or worker died) makes that gate an ``error`` naming the
node; a gate that allows reruns (``rerun_failures`` > 0) is tried once more on the nodes left. Ray's
own task retries are off: a retry is ours to decide and to record.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ds4sync.core.errors import ConfigError, GitError, ToolMissingError
from ds4sync.core.git import GitRepo, clone_repository
from ds4sync.core.model import updated
from ds4sync.core.proc import pid_alive
from ds4sync.gates.definition import Gate
from ds4sync.gates.kinds import GateContext, runner_for
from ds4sync.models.gates_details import PytestDetails, RayExecution
from ds4sync.models.gates_results import GateResult

#: Exceptions of Ray that mean the node or worker running a task went away (matched by name:
#: ``ray.exceptions`` is imported only when a Ray executor is used).
_LOST = ("NodeDiedError", "WorkerCrashedError", "ObjectLostError", "OwnerDiedError", "LocalRayletDiedError")


class GateExecutor(Protocol):
    """Runs one gate somewhere and returns its result as a local run would record it."""

    def run(self, gate: Gate, ctx: GateContext) -> GateResult: ...


@dataclass
class RayExecutor:
    """Each gate as a Ray task on a node that has its GPUs and GPU kind (see the module docstring).

    ``address``: the cluster (``host:port`` of the head's GCS, or ``auto``); ``source``: a path or URL
    every node can clone the repository from; ``commit``: the commit every gate runs on.

    Raises (from :meth:`connect`):
        ToolMissingError: ray is not installed.
        ConfigError: no cluster answers at ``address``.
    """

    address: str
    source: str
    commit: str
    _remote: Any = None

    def connect(self) -> RayExecutor:
        """Join the cluster as a driver (idempotent)."""
        try:
            import ray
        except ImportError as exc:
            raise ToolMissingError(
                "ray is not installed", where="--executor ray", fix="pip install 'ds4sync[ray]'"
            ) from exc
        if not ray.is_initialized():
            try:
                ray.init(address=self.address, log_to_driver=False, configure_logging=False)
            except (ConnectionError, RuntimeError) as exc:
                raise ConfigError(
                    f"no Ray cluster answers at {self.address} ({exc})",
                    where="--address",
                    fix="start one with `ray start --head`, or pass its address",
                ) from exc
        self._remote = ray.remote(_run_on_node)
        return self

    def run(self, gate: Gate, ctx: GateContext) -> GateResult:
        """Run ``gate`` on the cluster; results, log and JUnit land in ``ctx.log_dir`` as for a local run."""
        import ray

        tries = 2 if gate.definition.rerun_failures > 0 else 1
        lost: list[str] = []
        for attempt in range(1, tries + 1):
            resources = {gate.definition.gpu_kind: 1.0} if gate.definition.gpu_kind else {}
            ref = self._remote.options(
                num_cpus=1, num_gpus=gate.definition.devices, resources=resources, max_retries=0
            ).remote(gate, self.source, self.commit, ctx.python, ctx.base_ref, dict(ctx.extra))
            try:
                shipped = ray.get(ref, timeout=(gate.definition.timeout or 3600) + 600)
            except Exception as exc:
                name = type(exc).__name__
                cause = getattr(exc, "cause", None)
                lost_node = name in _LOST or type(cause).__name__ in _LOST
                if not lost_node:
                    raise
                lost.append(_node_of(exc))
                if attempt < tries:
                    continue
                return _lost(gate, lost)
            return _land(shipped, gate, ctx, retried_after=lost)
        return _lost(gate, lost)  # pragma: no cover - the loop always returns


def _node_of(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("node_id=", "node ", "Node "):
        if marker in text:
            return text.split(marker, 1)[1].split()[0].strip(".,:)`'\"")
    return "unknown node"


def _lost(gate: Gate, nodes: list[str]) -> GateResult:
    tried = f" (tried {len(nodes)} times)" if len(nodes) > 1 else ""
    return GateResult(
        name=gate.name,
        tier=gate.tier,
        kind=gate.definition.kind,
        status="error",
        required=gate.definition.required,
        reason=f"the Ray node running it was lost: {', '.join(nodes)}{tried}",
        details={"executor": RayExecution(lost_nodes=tuple(nodes))},
    )


def _land(shipped: dict[str, Any], gate: Gate, ctx: GateContext, *, retried_after: list[str]) -> GateResult:
    """Write the node's log and JUnit where a local run would have, and point the result at them."""
    result = GateResult.model_validate(shipped["result"])
    update: dict[str, Any] = {}
    details = result.details
    for key, suffix in (("log", "log"), ("junit", "xml")):
        text = shipped.get(key)
        if text is None:
            continue
        path = ctx.log_path(gate, suffix)
        path.write_text(text, encoding="utf-8")
        if key == "log":
            update["log_path"] = str(path)
        elif isinstance(details, PytestDetails):
            details = updated(details, junit=str(path))
    executor = RayExecution(
        node_id=shipped["node_id"],
        node_ip=shipped["node_ip"],
        host=shipped["host"],
        environment=shipped["environment"],
        retried_after_lost=tuple(retried_after),
    )
    return updated(result, **update, details=updated(details, executor=executor))


def _run_on_node(
    gate: Gate, source: str, commit: str, python: str, base_ref: str | None, extra: dict[str, Any]
) -> dict[str, Any]:
    """The Ray task: the node's copy of the repository at ``commit``, the gate run there, its files read back.

    The task's worktree and log folder are removed when it ends, passed or not: a node that runs
    gates every night keeps one clone, not one checkout per gate. A task killed with its node
    cannot clean up; the next task on that host removes what dead tasks left (:func:`_node_checkout`).
    """
    import ray

    from ds4sync.gates.cache import environment_fingerprint

    clone, checkout = _node_checkout(source, commit, gate.name)
    log_dir = _task_dir(clone.path.parent / "logs", checkout.name)
    try:
        python = python if os.path.exists(python) else _python_here()
        ctx = GateContext(cwd=checkout, python=python, log_dir=log_dir, base_ref=base_ref, extra=extra)
        result = runner_for(gate.definition.kind)(gate, ctx)
        files = {}
        for key, suffix in (("log", "log"), ("junit", "xml")):
            path = log_dir / f"{gate.tier}-{gate.name}.{suffix}"
            files[key] = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    finally:
        _drop_task(clone, checkout, log_dir)
    context = ray.get_runtime_context()
    return {
        "result": result.model_dump(mode="json"),
        **files,
        "environment": dict(environment_fingerprint(python)),
        "node_id": context.get_node_id(),
        "node_ip": ray.util.get_node_ip_address(),
        "host": socket.gethostname(),
    }


def _python_here() -> str:
    import sys

    return sys.executable


def _node_checkout(source: str, commit: str, gate_name: str) -> tuple[GitRepo, Path]:
    """This node's clone of ``source`` (cloned once per node, then fetched) and a new detached worktree
    of it at ``commit`` for this task, named ``<gate>-<commit12>-<host>-<pid>-<ns>``.

    Under the clone's lock it first removes the worktrees and log folders of tasks whose process
    is gone from this host (a node killed mid-gate), so they do not pile up.
    """
    from filelock import FileLock

    root = Path(os.environ.get("DS4SYNC_RAY_CACHE", Path(tempfile.gettempdir()) / "ds4sync-ray"))
    root.mkdir(parents=True, exist_ok=True)
    clone = root / "repo"
    # Several gates start at once on one host: one of them clones, the others wait for it, never see half a clone.
    with FileLock(str(root / ".clone.lock")):
        if not (clone / ".git").exists():
            try:
                clone_repository(source, clone, checkout=False)
            except GitError as exc:
                raise GitError(f"cannot clone {source} on this node: {exc.what[-300:]}", where=str(clone)) from exc
        repo = GitRepo(clone)
        _sweep_dead_tasks(repo, root)
        if repo.resolve_commit(commit) is None:
            repo.fetch("origin", commit)
        target = root / "worktrees" / f"{gate_name}-{commit[:12]}-{_HOST}-{os.getpid()}-{time.monotonic_ns()}"
        return repo, repo.worktree_add_detached(target, commit).path


def _task_dir(parent: Path, name: str) -> Path:
    parent.mkdir(parents=True, exist_ok=True)
    path = parent / name
    path.mkdir()
    return path


#: This host in task folder names, so that a cache folder shared by several hosts is swept only of this one's.
_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def _task_pid(name: str) -> int | None:
    """The pid in the name of a task folder of this host (``<gate>-<commit12>-<host>-<pid>-<ns>``), else None."""
    parts = name.rsplit("-", 4)
    if len(parts) != 5 or parts[2] != _HOST or not (parts[3].isdigit() and parts[4].isdigit()):
        return None
    return int(parts[3])


def _drop_task(repo: GitRepo, checkout: Path, log_dir: Path) -> None:
    """Remove one task's worktree (git's own ``worktree remove``) and its log folder."""
    from filelock import FileLock

    with FileLock(str(repo.path.parent / ".clone.lock")):
        repo.worktree_remove(checkout)
    shutil.rmtree(log_dir, ignore_errors=True)


def _sweep_dead_tasks(repo: GitRepo, root: Path) -> None:
    """Worktrees and log folders of tasks whose process no longer exists (caller holds the clone's lock)."""
    for folder in (root / "worktrees", root / "logs"):
        for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
            pid = _task_pid(entry.name)
            if pid is None or pid_alive(pid):
                continue
            if folder.name == "worktrees":
                repo.worktree_remove(entry)
            else:
                shutil.rmtree(entry, ignore_errors=True)
