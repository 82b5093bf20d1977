"""Commands of a sync run: plan, merge, resume, abort, promote, nightly, cron, status, config, demo."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ds4sync.cli import options as opt
from ds4sync.cli._app import _progress, app, config_app, done, err, out
from ds4sync.core.errors import ExitCode, StateError


@app.command()
@opt.workspace("repo", "config", "branch", "state_dir")
def plan(
    ref: Annotated[str, typer.Argument(help="Upstream ref or SHA to merge.")],
    where: opt.Where = opt.HERE,
    fetch: opt.Fetch = False,
    semantic: Annotated[
        bool,
        typer.Option(
            "--semantic/--no-semantic",
            help="Also run the semantic check on the predicted tree (most of plan's time on a large fork).",
        ),
    ] = True,
    json_out: opt.Json = False,
) -> None:
    """Predict a merge (conflicts, kinds, overlaps, semantic breaks) without touching any work tree."""
    from ds4sync.loop import sync

    summary = sync.plan(where.open(), ref, fetch=fetch, semantic=semantic)

    def text() -> None:
        from ds4sync.cli import views as ui

        ui.merge_summary(out, summary, title=f"plan: merge {ref} into the fork")
        from ds4sync.cli.semantic_view import semantic_findings

        semantic_findings(out, summary.semantic)

    done(json_out, summary.brief, text=text)


@app.command()
@opt.workspace("repo", "config", "branch", "state_dir", "profile")
def merge(
    ref: Annotated[str, typer.Argument(help="Upstream ref or SHA to merge.")],
    where: opt.Where = opt.HERE,
    fetch: opt.Fetch = False,
    json_out: opt.Json = False,
) -> None:
    """Merge an upstream SHA into the fork in a new sync worktree, reusing recorded resolutions."""
    from ds4sync.loop import sync

    ws = where.open()
    outcome = sync.start_merge(ws, ref, progress=_progress(json_out), fetch=fetch)
    _finish(ws, outcome, json_out=json_out)


@app.command()
@opt.workspace("repo", "config", "state_dir", "profile")
def resume(
    where: opt.Where = opt.HERE,
    accept_markers: Annotated[
        list[str] | None,
        typer.Option(
            "--accept-markers",
            metavar="PATH",
            help="Accept this conflicted file although it holds a whole conflict hunk (a fixture meant to); "
            "recorded on its conflict. Repeatable.",
        ),
    ] = None,
    accept_proposals: Annotated[
        bool, typer.Option("--accept-proposals", help="Stage the validated model proposals you reviewed.")
    ] = False,
    json_out: opt.Json = False,
) -> None:
    """Go on with the active run: accept resolved conflicts, record them, and continue."""
    from ds4sync.loop import sync

    ws = where.open()
    outcome = sync.resume(
        ws,
        progress=_progress(json_out),
        accept_markers=tuple(accept_markers or ()),
        accept_proposals=accept_proposals,
    )
    _finish(ws, outcome, json_out=json_out)


@app.command()
@opt.workspace("repo", "config", "state_dir")
def abort(
    where: opt.Where = opt.HERE,
    run: opt.Run = None,
    yes: opt.Yes = False,
    json_out: opt.Json = False,
) -> None:
    """Drop a run: remove its worktree and sync branch; the fork branch is untouched.

    A finished run that was never promoted is asked about first (``--yes`` skips the question).
    """
    from ds4sync.loop import sync

    ws = where.open()
    target = sync.abort_target(ws, run_id=run)
    if target.status == "done" and not yes:
        _confirm_drop(target.run_id, target.sync_branch)
    record = sync.abort(ws, run_id=target.run_id)
    data = {
        "run_id": record.run_id,
        "status": record.status,
        "branch": record.fork.branch,
        "sync_branch": record.sync_branch,
        "backup_ref": record.backup_ref,
    }
    done(
        json_out,
        data,
        text=lambda: out.print(
            f"run {record.run_id} aborted; {record.fork.branch} untouched; backup kept at {record.backup_ref}",
            markup=False,
        ),
    )


def _confirm_drop(run_id: str, sync_branch: str) -> None:
    question = f"run {run_id} finished and was never promoted; drop it and its branch {sync_branch}?"
    if not sys.stdin.isatty():
        raise StateError(
            f"run {run_id} finished and was never promoted; not dropping it without --yes",
            fix="pass --yes to drop it, or `ds4sync promote` it",
        )
    if not typer.confirm(question, default=False, err=True):
        err.print("nothing dropped", markup=False)
        raise typer.Exit(int(ExitCode.USAGE))


@app.command()
@opt.workspace("repo", "config", "state_dir")
def promote(
    where: opt.Where = opt.HERE,
    run: opt.Run = None,
    allow_blockers: Annotated[
        bool, typer.Option("--allow-blockers", help="Promote despite failed gates (recorded).")
    ] = False,
    allow_ungated: Annotated[
        bool,
        typer.Option("--allow-ungated", help="Promote although no gate tier is configured (recorded loudly)."),
    ] = False,
    json_out: opt.Json = False,
) -> None:
    """Fast-forward the fork branch to the sync head the gates proved (keeps a rollback ref). Nothing else moves it.

    When the fork branch is checked out in a clean work tree, that tree is updated too (like
    git's ``receive.denyCurrentBranch=updateInstead``); a dirty one is refused, naming its files.
    """
    from ds4sync.loop import promote as promote_mod

    ws = where.open()
    try:
        result = promote_mod.promote(
            ws, run_id=run, allow=allow_blockers, allow_ungated=allow_ungated, progress=_progress(json_out)
        )
    except promote_mod.AlreadyPromoted as exc:
        line = exc.what
        data = {**exc.result.model_dump(mode="json"), "run_id": exc.run_id, "already_promoted": True}
        done(json_out, data, text=lambda: out.print(line, markup=False))
        return
    data = {**result.model_dump(mode="json"), "already_promoted": False}

    def text() -> None:
        out.print(
            f"{result.branch}: {result.old_head[:12]} -> {result.new_head[:12]}; rollback: {result.rollback_ref}",
            markup=False,
        )
        if result.worktree_updated:
            out.print(f"updated the checkout of {result.branch} in {result.worktree_updated}", markup=False)
        if result.ungated:
            err.print(f"warning: {promote_mod.UNGATED_NOTE}", markup=False)
        if result.completed_after_kill:
            err.print(f"note: {result.branch} had already moved before an interruption; now recorded", markup=False)
        if result.left_behind:
            shown = ", ".join(result.left_behind[:5]) + (", ..." if len(result.left_behind) > 5 else "")
            err.print(
                f"warning: {len(result.left_behind)} changed or untracked path(s) in the sync worktree were not "
                f"promoted (no commit has them): {shown}",
                markup=False,
            )

    done(json_out, data, text=text)


@app.command()
@opt.workspace("repo", "config", "branch", "state_dir")
def cron(
    where: opt.Where = opt.HERE,
    at: Annotated[str, typer.Option("--at", help="Time of day, HH:MM (local).")] = "02:30",
    json_out: opt.Json = False,
) -> None:
    """Print the crontab line that runs `ds4sync nightly` on this repository (refused where nightly cannot run)."""
    from ds4sync.loop.nightly import cron_line

    line = cron_line(where.open(), at=at)
    done(json_out, {"line": line, "at": at}, text=lambda: out.print(line, markup=False))


@app.command()
@opt.workspace("repo", "config", "state_dir")
def status(
    where: opt.Where = opt.HERE,
    run: opt.Run = None,
    all_runs: Annotated[bool, typer.Option("--all", help="List every run.")] = False,
    json_out: opt.Json = False,
) -> None:
    """Show the current run and what to do next (and end servers a killed ds4sync left behind, saying so)."""
    from ds4sync.cli import views as ui
    from ds4sync.serving.runs import children

    ws = where.open()
    from ds4sync.runner import stop_dead_run_children

    stop_dead_run_children(ws, _progress(json_out), note=False)  # status reads; it takes no lock to write notes
    children(ws, announce=lambda line: err.print(line, markup=False))  # servers of a killed serving command
    if all_runs:
        records = [ws.store.load(run_id) for run_id in ws.store.run_ids()]
        rows = [ui.run_row(record) for record in records]
        done(json_out, {"runs": rows}, text=lambda: ui.run_list(out, rows))
        return
    record = ws.store.resolve(run)
    path = str(ws.store.record_path(record.run_id))
    report = ws.store.run_dir(record.run_id) / "report.md"
    fork_head = ws.repo.resolve_commit(f"refs/heads/{record.fork.branch}") if record.status == "done" else None
    green = _last_green(ws, record.upstream.branch)
    from ds4sync.loop.handoff import handoff

    stands = handoff(ws, record)

    def text() -> None:
        ui.run_status(
            out,
            record,
            record_path=path,
            report_path=str(report) if report.is_file() else None,
            fork_head=fork_head,
            interrupted=ws.store.interrupted(record),
            handoff=stands,
        )
        if green is not None:
            out.print(
                f"last green upstream {green.branch}: {green.sha[:12]} ({green.ref}), {green.age()} old", markup=False
            )

    done(
        json_out,
        lambda: {
            **record.model_dump(mode="json"),
            "last_green": green.model_dump(mode="json") if green else None,
            **stands.as_json(),
        },
        text=text,
    )


def _last_green(ws, recorded_branch: str | None):  # -> loop.lastgreen.LastGreen | None
    from ds4sync.loop.lastgreen import last_green, upstream_branch

    branch = upstream_branch(ws, recorded_branch)
    return last_green(ws, branch) if branch else None


@config_app.command("check")
@opt.workspace("repo", "config", "branch")
def config_check(where: opt.Where = opt.HERE, json_out: opt.Json = False) -> None:
    """Validate ds4sync.yaml and print what it resolves to, and every problem that stops `ds4sync nightly`
    before it changes anything (the night's own preflight); exit 2 when there is one."""
    from ds4sync.loop.preflight import preflight
    from ds4sync.models.config import CONFIG_NAME

    ws = where.open()
    fork_branch = ws.fork_branch or ws.repo.current_branch()
    problems = [exc.one_line() for exc in preflight(ws)]
    data = {
        "ok": not problems,
        "problems": problems,
        "config": str(ws.config.source) if ws.config.source else None,
        "upstream": {"remote": ws.config.upstream.remote, "url": ws.config.upstream.url, "ref": ws.config.upstream.ref},
        "fork_branch": fork_branch,
        "fork_branch_from": "config" if ws.fork_branch else ("checkout" if fork_branch else None),
        "profile": str(ws.profile),
        "state_dir": str(ws.store.root),
        "resolution_rules": len(ws.config.merge.rules),
    }

    def text() -> None:
        source = ws.config.source or f"(no {CONFIG_NAME}; defaults)"
        where = "" if ws.fork_branch or not fork_branch else " (the checked-out branch; no fork.branch in config)"
        verdict = "ok" if not problems else f"{len(problems)} problem(s) that stop `ds4sync nightly`"
        lines = [
            f"config: {source}: {verdict}",
            *(f"problem: {line}" for line in problems),
            f"upstream: {ws.config.upstream.remote} {ws.config.upstream.url or ''} ref {ws.config.upstream.ref}",
            f"fork branch: {fork_branch or '(not set; pass --branch)'}{where}",
            f"profile: {ws.profile}",
            f"state dir: {ws.store.root}",
            f"resolution rules: {len(ws.config.merge.rules)}",
        ]
        for line in lines:
            out.print(line, markup=False)

    done(json_out, data, exit_code=ExitCode.USAGE if problems else ExitCode.OK, text=text)


@app.command()
def demo(
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Folder for the demo repos (default: a new temporary folder).")
    ] = None,
    json_out: opt.Json = False,
) -> None:
    """Build a small upstream and fork with realistic history, and run a sync end to end."""
    from ds4sync.demo import run as demo_mod

    result = demo_mod.run_demo(workdir, progress=_progress(json_out))
    data = {
        "workdir": str(result.workdir),
        "syncs": [{"title": title, **summary.brief()} for title, summary in result.summaries],
        "lines": result.lines,
    }

    def text() -> None:
        from ds4sync.cli import views as ui

        for title, summary in result.summaries:
            ui.merge_summary(out, summary, title=title)
        for line in result.lines:
            out.print(line, markup=False)

    done(json_out, data, exit_code=int(result.exit_code), text=text)


def _finish(ws, outcome, *, json_out: bool) -> None:
    record = outcome.record
    path = str(ws.store.record_path(record.run_id))
    summary = record.results.merge

    def data() -> dict[str, Any]:
        body: dict[str, Any] = summary.brief() if summary else {}
        body.update(
            {
                "run_id": record.run_id,
                "status": record.status,
                "worktree": record.worktree,
                "sync_branch": record.sync_branch,
                "record": path,
                "report": record.results.report.path if record.results.report else None,
            }
        )
        for key in ("replay", "verify"):
            entry = getattr(record.results, key)
            if entry is not None:
                body[key] = entry.model_dump(mode="json")
        return body

    def text() -> None:
        from ds4sync.cli import views as ui

        if summary:
            ui.merge_summary(out, summary, title=f"merge {record.upstream.ref} into {record.fork.branch}")
        ui.run_outcome(out, outcome, record_path=path)

    code = {"needs-person": ExitCode.NEEDS_PERSON, "failed": ExitCode.FAILED}.get(record.status, ExitCode.OK)
    done(json_out, data, exit_code=int(code), text=text)
