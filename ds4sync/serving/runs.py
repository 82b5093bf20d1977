"""Where serving results go: the active run's record and log folder, else a folder under the state dir."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ds4sync.core.errors import ConfigError
from ds4sync.models.serving_settings import ServingConfig, read_serving_file
from ds4sync.runner import Workspace, record_by_hand

if TYPE_CHECKING:
    from ds4sync.models.record import RunRecord


def load_serving_config(ws: Workspace, path: Path | None) -> ServingConfig:
    """The serving section: from ``path`` (a YAML with a ``serving:`` key or the section itself), else ds4sync.yaml.

    Raises:
        ConfigError: neither has one, or it is malformed.
    """
    if path is not None:
        return read_serving_file(path)
    if ws.config.serving is None:
        raise ConfigError(
            "no serving section",
            where=str(ws.config.source or ws.repo.path),
            fix="add `serving:` (server.command or server.base_url, server.model) to ds4sync.yaml "
            "or pass --serving-config FILE",
        )
    return ws.config.serving


def output_dir(ws: Workspace, kind: str, explicit: Path | None = None) -> Path:
    """``explicit``, else ``<run logs>/<kind>-<time>`` of the active run, else ``<state>/<kind>/<time>``;
    always an absolute path (children run in other folders)."""
    if explicit is not None:
        explicit = explicit.expanduser().resolve()
        explicit.mkdir(parents=True, exist_ok=True)
        return explicit
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    record = ws.store.current()
    path = (ws.store.log_dir(record.run_id) / f"{kind}-{stamp}") if record else ws.store.root / kind / stamp
    path = path.resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def children(ws: Workspace, *, announce: Any = lambda _m: None) -> Any:
    """The registry of servers this state dir's commands started; orphans of a killed command are ended first,
    each announced in one line through ``announce`` (:func:`reap_line`).

    Returns a :class:`~ds4sync.core.children.ChildRegistry` under ``<state>/children``.
    """
    from ds4sync.core.children import ChildRegistry

    registry = ChildRegistry(ws.store.root / "children")
    ended = registry.reap_orphans()
    if ended:
        announce(reap_line(ended))
    return registry


def reap_line(ended: Any) -> str:
    """``ended 1 orphaned server group(s) left by a killed ds4sync: pgid 4242 (server http://...)``."""
    names = ", ".join(f"pgid {e.pgid} ({e.label or ' '.join(e.argv[:2])})" for e in ended)
    return f"ended {len(ended)} orphaned server group(s) left by a killed ds4sync: {names}"


def record_ab(ws: Workspace, result: Any, *, out_dir: Path) -> dict[str, Any]:
    """Keep an A/B result: ``<out_dir>/ab.json``, one line in ``<state>/ab/history.jsonl`` (every run, also
    outside a sync run: the trend's source), and, in an active run, ``results.ab`` (the latest) and
    ``results.ab_runs`` (every A/B of the run).

    Returns where it went: ``{"result": path, "history": path, "run_id": id or None}``.
    """
    import json

    from ds4sync.core.files import write_json_atomic

    data = result.model_dump(mode="json")
    write_json_atomic(out_dir / "ab.json", data)
    history = ws.store.root / "ab" / "history.jsonl"
    history.parent.mkdir(parents=True, exist_ok=True)
    entry = {
        "created_at": data["created_at"],
        "baseline": data["baseline"],
        "candidate": data["candidate"],
        "mode": data["mode"],
        "verdict": data["verdict"],
        "pairs": data["pairs"],
        "seed": data["seed"],
        "confidence": data["confidence"],
        "result": str(out_dir / "ab.json"),
        "metrics": {row.metric: row.brief() for row in result.rows},
    }
    with history.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, default=str) + "\n")

    def keep(record: RunRecord) -> None:
        record.results.ab = result
        record.results.ab_runs = [*record.results.ab_runs, result]

    record = record_by_hand(ws, keep)
    return {"result": str(out_dir / "ab.json"), "history": str(history), "run_id": record and record.run_id}


def record_result(ws: Workspace, key: str, result: Any) -> str | None:
    """Write ``result`` (its model) to ``record.results.<key>`` of the active run and save; returns the run id.

    ``backports`` results are kept per upstream SHA (``results.backports[sha]``).
    """

    def keep(record: RunRecord) -> None:
        if key == "backports":
            record.results.backports[result.upstream_sha] = result
        else:
            setattr(record.results, key, result)

    record = record_by_hand(ws, keep)
    return record.run_id if record is not None else None


def evaluate_backport_in(
    ws: Workspace,
    ref: str,
    *,
    onto: str | None = None,
    serving_path: Path | None = None,
    progress: Any = lambda _m: None,
) -> Any:
    """``ds4sync backport evaluate``: measure upstream ``ref`` on the sync branch (or ``onto``) and record it.

    Returns the :class:`~ds4sync.models.serving_results.BackportDecision`.

    Raises:
        StateError: no active run and no ``onto`` branch.
        GitError: ``ref`` is not a commit here.
        ConfigError: the serving section is missing or malformed.
    """
    import sys

    from ds4sync.core.errors import GitError, StateError
    from ds4sync.serving.backport import evaluate_backport

    record = ws.store.current()
    base_ref = onto or (record.sync_branch if record else None)
    if base_ref is None:
        raise StateError(
            "no active run to apply the backport on",
            where=str(ws.store.root),
            fix="start a sync first, or pass --onto BRANCH",
        )
    sha = ws.repo.resolve_commit(ref)
    if sha is None:
        raise GitError(
            f"'{ref}' is not a commit here", where=str(ws.repo.path), fix="fetch it first (`git fetch upstream`)"
        )
    cfg = load_serving_config(ws, serving_path)
    registry = children(ws, announce=progress)
    decision = evaluate_backport(
        ws.repo,
        sha,
        cfg,
        base_ref=base_ref,
        base_tree=Path(record.worktree) if record and not onto else None,
        work_dir=output_dir(ws, "backport"),
        python=sys.executable,
        patch_dir=ws.profile / "patches",
        registry=registry,
        progress=progress,
    )
    record_result(ws, "backports", decision)
    return decision
