"""Commands of a sync run: plan, merge, resume, abort, promote, nightly, cron, status, config, demo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ds4sync.cli._app import (
    BranchOpt,
    ConfigOpt,
    FetchOpt,
    JsonOpt,
    ProfileOpt,
    RepoOpt,
    StateOpt,
    _progress,
    _workspace,
    app,
    config_app,
    err,
    out,
)
from ds4sync.core.errors import ExitCode


@app.command()
def plan(
    ref: Annotated[str, typer.Argument(help="Upstream ref or SHA to merge.")],
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    branch: BranchOpt = None,
    state_dir: StateOpt = None,
    fetch: FetchOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Predict a merge (conflicts, kinds, overlaps) without touching any work tree."""
    from ds4sync.cli import views as ui
    from ds4sync.loop import sync

    summary = sync.plan(_workspace(repo, config, branch, state_dir), ref, fetch=fetch)
    if json_out:
        ui.print_json(out, summary.brief())
    else:
        ui.merge_summary(out, summary, title=f"plan: merge {ref} into the fork")


@app.command()
def merge(
    ref: Annotated[str, typer.Argument(help="Upstream ref or SHA to merge.")],
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    branch: BranchOpt = None,
    state_dir: StateOpt = None,
    profile: ProfileOpt = None,
    fetch: FetchOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Merge an upstream SHA into the fork in a new sync worktree, reusing recorded resolutions."""
    from ds4sync.loop import sync

    ws = _workspace(repo, config, branch, state_dir, profile)
    outcome = sync.start_merge(ws, ref, progress=_progress(json_out), fetch=fetch)
    _finish(ws, outcome, json_out=json_out)


@app.command()
def resume(
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    state_dir: StateOpt = None,
    profile: ProfileOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Go on with the active run: accept resolved conflicts, record them, and continue."""
    from ds4sync.loop import sync

    ws = _workspace(repo, config, None, state_dir, profile)
    _finish(ws, sync.resume(ws, progress=_progress(json_out)), json_out=json_out)


@app.command()
def abort(
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    state_dir: StateOpt = None,
    run: Annotated[str | None, typer.Option("--run", help="Run id (default: the active run).")] = None,
) -> None:
    """Drop the active run: remove its worktree and sync branch; the fork branch is untouched."""
    from ds4sync.loop import sync

    record = sync.abort(_workspace(repo, config, None, state_dir), run_id=run)
    out.print(f"run {record.run_id} aborted; {record.fork.branch} untouched; backup kept at {record.backup_ref}")


@app.command()
def promote(
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    state_dir: StateOpt = None,
    run: Annotated[str | None, typer.Option("--run", help="Run id (default: active, else latest).")] = None,
    allow_blockers: Annotated[
        bool, typer.Option("--allow-blockers", help="Promote despite failed gates (recorded).")
    ] = False,
    allow_ungated: Annotated[
        bool,
        typer.Option("--allow-ungated", help="Promote although no gate tier is configured (recorded loudly)."),
    ] = False,
) -> None:
    """Fast-forward the fork branch to the sync head the gates proved (keeps a rollback ref). Nothing else moves it."""
    from ds4sync.loop import promote as promote_mod

    ws = _workspace(repo, config, None, state_dir)
    result = promote_mod.promote(ws, run_id=run, allow=allow_blockers, allow_ungated=allow_ungated)
    out.print(f"{result.branch}: {result.old_head[:12]} -> {result.new_head[:12]}; rollback: {result.rollback_ref}")
    if result.ungated:
        err.print(f"warning: {promote_mod.UNGATED_NOTE}", markup=False)


@app.command()
def nightly(
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    state_dir: StateOpt = None,
    profile: ProfileOpt = None,
    ref: Annotated[str | None, typer.Option("--ref", help="Upstream ref (default: upstream.ref).")] = None,
) -> None:
    """Fetch upstream and run a whole sync (merge, patch-sets, build, gates, report); for cron."""
    from ds4sync.loop.nightly import run_nightly

    ws = _workspace(repo, config, None, state_dir, profile)
    result = run_nightly(ws, ref=ref, progress=_progress(False))
    out.print(result.message, markup=False)
    if result.outcome is not None and "report" in result.outcome.record.results:
        out.print(f"report: {result.outcome.record.results['report'].get('path')}", markup=False)
    if result.exit_code:
        raise typer.Exit(int(result.exit_code))


@app.command()
def cron(
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    state_dir: StateOpt = None,
    at: Annotated[str, typer.Option("--at", help="Time of day, HH:MM (local).")] = "02:30",
) -> None:
    """Print the crontab line that runs `ds4sync nightly` on this repository."""
    from ds4sync.loop.nightly import cron_line

    out.print(cron_line(_workspace(repo, config, None, state_dir), at=at), markup=False)


@app.command()
def status(
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    state_dir: StateOpt = None,
    run: Annotated[str | None, typer.Option("--run", help="Run id (default: active, else latest).")] = None,
    all_runs: Annotated[bool, typer.Option("--all", help="List every run.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Show the current run and what to do next."""
    from ds4sync.cli import views as ui

    ws = _workspace(repo, config, None, state_dir)
    if all_runs:
        for run_id in ws.store.run_ids():
            record = ws.store.load(run_id)
            out.print(f"{run_id}  {record.status:12}  {record.fork.branch} <- {record.upstream.ref}")
        return
    record = ws.store.resolve(run)
    if json_out:
        ui.print_json(out, record.model_dump(mode="json"))
    else:
        ui.run_status(out, record, record_path=str(ws.store.record_path(record.run_id)))


@config_app.command("check")
def config_check(repo: RepoOpt = Path("."), config: ConfigOpt = None) -> None:
    """Validate ds4sync.yaml and print what it resolves to."""
    from ds4sync.config import CONFIG_NAME
    from ds4sync.runner import open_workspace

    ws = open_workspace(repo, config_path=config)
    source = ws.config.source or f"(no {CONFIG_NAME}; defaults)"
    out.print(f"config: {source}: ok")
    out.print(f"upstream: {ws.config.upstream.remote} {ws.config.upstream.url or ''} ref {ws.config.upstream.ref}")
    out.print(f"fork branch: {ws.fork_branch or '(not set; pass --branch)'}")
    out.print(f"profile: {ws.profile}")
    out.print(f"state dir: {ws.store.root}")
    out.print(f"resolution rules: {len(ws.config.merge.rules)}")


@app.command()
def demo(
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Folder for the demo repos (default: a new temporary folder).")
    ] = None,
) -> None:
    """Build a small upstream and fork with realistic history, and run a sync end to end."""
    from ds4sync.cli import views as ui
    from ds4sync.demo import run as demo_mod

    result = demo_mod.run_demo(workdir, progress=_progress(False))
    for title, summary in result.summaries:
        ui.merge_summary(out, summary, title=title)
    for line in result.lines:
        out.print(line)
    if result.exit_code:
        raise typer.Exit(int(result.exit_code))


def _finish(ws, outcome, *, json_out: bool) -> None:
    from ds4sync.cli import views as ui
    from ds4sync.merge.plan import MergeSummary

    record = outcome.record
    path = str(ws.store.record_path(record.run_id))
    summary = MergeSummary.model_validate(record.results["merge"]) if "merge" in record.results else None
    if json_out:
        data = summary.brief() if summary else {}
        data.update(
            {
                "run_id": record.run_id,
                "status": record.status,
                "worktree": record.worktree,
                "sync_branch": record.sync_branch,
                "record": path,
            }
        )
        data.update({key: record.results[key] for key in ("replay", "verify") if key in record.results})
        ui.print_json(out, data)
    else:
        if summary:
            ui.merge_summary(out, summary, title=f"merge {record.upstream.ref} into {record.fork.branch}")
        ui.run_outcome(out, outcome, record_path=path)
    code = {"needs-person": ExitCode.NEEDS_PERSON, "failed": ExitCode.FAILED}.get(record.status, ExitCode.OK)
    if code:
        raise typer.Exit(int(code))
