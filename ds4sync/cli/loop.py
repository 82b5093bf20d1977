"""The unattended loop: `ds4sync nightly` (and `nightly install`), `deploy`, `rollback`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ds4sync.cli import options as opt
from ds4sync.cli._app import _progress, app, done, out

nightly_app = typer.Typer(
    help="Fetch upstream and run a whole sync, publish, promote, deploy, prune and notify; for a timer.",
    invoke_without_command=True,
)
app.add_typer(nightly_app, name="nightly")


@nightly_app.callback()
@opt.workspace("repo", "config", "branch", "state_dir", "profile")
def nightly(
    ctx: typer.Context,
    where: opt.Where = opt.HERE,
    ref: Annotated[str | None, typer.Option("--ref", help="Upstream ref (default: upstream.ref).")] = None,
    budget: Annotated[
        float | None, typer.Option("--budget", help="Time budget in seconds (default: nightly.budget_s).")
    ] = None,
    no_notify: Annotated[bool, typer.Option("--no-notify", help="Send no notification this time.")] = False,
    json_out: opt.Json = False,
) -> None:
    """One night's sync. Exit codes: 0 green or nothing moved, 1 failed, 4 needs a person,
    5 out of time budget, 6 forge or notification target unreachable (try later)."""
    if ctx.invoked_subcommand is not None:
        return
    from ds4sync.loop.handoff import shown, waiting_files
    from ds4sync.loop.nightly import run_nightly

    ws = where.open()
    result = run_nightly(ws, ref=ref, progress=_progress(json_out), budget_s=budget, notify=not no_notify)
    record = result.record
    waiting = waiting_files(record) if record is not None else []
    report = record.results.report.path if record is not None and record.results.report else None
    publish = record.results.publish if record is not None else None
    data = {
        "message": result.message,
        "skipped": result.skipped,
        "run_id": record.run_id if record else None,
        "status": record.status if record else None,
        "report": report,
        "log": result.log_path,
        "record": str(ws.store.record_path(record.run_id)) if record else None,
        "pr_url": publish.pr_url if publish else None,
        "promoted": result.promoted,
        "deployed": result.deployed,
        "pruned": list(result.pruned),
        "notified": getattr(result.notified, "sent", None),
        "notes": list(result.notes),
        "waiting_for_person": waiting,
    }

    def text() -> None:
        lines = [result.message]
        lines += [f"waiting for a person: {shown(waiting)}"] if waiting else []
        lines += [f"worktree: {record.worktree}"] if waiting and record is not None else []
        lines += [f"report: {report}"] if report else []
        lines += [f"log: {result.log_path}"] if result.log_path else []
        if publish is not None and publish.pr_url:
            lines.append(f"PR #{publish.pr_number} {publish.action}: {publish.pr_url}")
        lines += [f"promoted {result.promoted}"] if result.promoted else []
        lines += [f"deployed: {result.deployed}"] if result.deployed else []
        lines += list(result.notes)
        if result.pruned:
            lines.append(f"pruned {len(result.pruned)} old run(s): {', '.join(result.pruned)}")
        if result.notified is not None:
            lines.append(f"notification: {getattr(result.notified, 'message', '')}")
        for line in lines:
            out.print(line, markup=False)

    done(json_out, data, exit_code=int(result.exit_code), text=text)


@nightly_app.command("install")
@opt.workspace("repo", "config", "state_dir")
def nightly_install(
    where: opt.Where = opt.HERE,
    cron: Annotated[bool, typer.Option("--cron", help="Print the crontab line.")] = False,
    systemd: Annotated[bool, typer.Option("--systemd", help="A user service and timer (Persistent=true).")] = False,
    at: Annotated[str | None, typer.Option("--at", help="Time of day, HH:MM (default: nightly.at).")] = None,
    write: Annotated[
        Path | None,
        typer.Option(
            "--write", help="Write the unit files into this folder (e.g. ~/.config/systemd/user).", file_okay=False
        ),
    ] = None,
) -> None:
    """Print (or write) what runs `ds4sync nightly` every night: a crontab line or systemd user units."""
    from ds4sync.core.errors import ConfigError
    from ds4sync.loop.nightly import cron_line, systemd_units, unit_name

    if cron == systemd:
        raise ConfigError("choose one of --cron and --systemd", where="nightly install", fix="pass exactly one")
    ws = where.open()
    when = at or ws.config.nightly.at
    if cron:
        if write is not None:
            raise ConfigError("--write is for --systemd", where="--write", fix="add the printed line with `crontab -e`")
        out.print(cron_line(ws, at=when), markup=False)
        return
    units = systemd_units(ws, at=when)
    if write is None:
        for name, text in units.items():
            out.print(f"# {name}\n{text}", markup=False)
        return
    from ds4sync.core.files import write_output

    for name, text in units.items():
        write_output(write / name, text, option="--write")
        out.print(f"wrote {write / name}", markup=False)
    out.print(f"enable with: systemctl --user daemon-reload && systemctl --user enable --now {unit_name(ws)}.timer")


@app.command()
@opt.workspace("repo", "config", "state_dir")
def deploy(
    where: opt.Where = opt.HERE,
    run: Annotated[str | None, typer.Option("--run", help="Promoted run (default: active, else latest).")] = None,
) -> None:
    """Switch the llama-swap stanza to a promoted run's tree (flags checked unchanged; previous kept)."""
    from ds4sync.loop.deploy import deploy as deploy_run

    result = deploy_run(where.open(), run_id=run)
    out.print(
        f"{result.model}: {result.old.tree} -> {result.new.tree}; {len(result.flags)} serving flags unchanged; "
        f"`ds4sync rollback` restores the previous stanza",
        markup=False,
    )


@app.command()
@opt.workspace("repo", "config", "state_dir")
def rollback(
    where: opt.Where = opt.HERE,
    keep_branch: Annotated[
        bool, typer.Option("--keep-branch", help="Restore the serving stanza only; leave the fork branch.")
    ] = False,
) -> None:
    """Undo the last deploy: previous stanza back, fork branch back to its rollback ref."""
    from ds4sync.loop.deploy import rollback as rollback_run

    result = rollback_run(where.open(), keep_branch=keep_branch)
    out.print(f"{result.model}: back to {result.paths.tree}", markup=False)
    if result.branch:
        out.print(f"{result.branch}: back to {result.branch_head}", markup=False)
    if result.note:
        out.print(result.note, markup=False)
