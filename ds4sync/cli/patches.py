"""`ds4sync patches ...` and `ds4sync backport`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ds4sync.cli import options as opt
from ds4sync.cli._app import app, done, out, patches_app, state
from ds4sync.core.errors import ExitCode
from ds4sync.core.names import PatchSetKind


@patches_app.command("list")
@opt.workspace("repo", "config", "profile")
def patches_list(where: opt.Where = opt.HERE, json_out: opt.Json = False) -> None:
    """List the profile's patch-sets in dependency order."""
    from ds4sync.patchsets import commands
    from ds4sync.patchsets import ui as ps_ui

    _catalogue, patchsets = commands.list_patchsets(where.open())
    done(
        json_out,
        lambda: {"patchsets": [ps.model_dump(mode="json") for ps in patchsets]},
        text=lambda: ps_ui.patchset_table(out, patchsets),
    )


@patches_app.command("check")
def patches_check(
    repo: opt.Repo = Path("."),
    config: opt.Config = None,
    profile: opt.Profile = None,
    upstream: Annotated[
        str | None, typer.Option("--upstream", help="Upstream ref: report patch-sets whose drop_when holds there.")
    ] = None,
    rev: Annotated[
        str | None, typer.Option("--rev", help="Check this commit's tree (read from git) instead of the work tree.")
    ] = None,
    branch: Annotated[
        str | None,
        typer.Option(
            "--branch", help="The fork branch the tree is of, for catalogue.yaml `branches` (default: --rev or HEAD)."
        ),
    ] = None,
    json_out: opt.Json = False,
) -> None:
    """Check every patch-set's invariants on a checkout (no merge); exit 1 on a blocking violation.

    With ``-v`` the invariants that hold are listed too.
    """
    from ds4sync.patchsets import commands
    from ds4sync.patchsets import ui as ps_ui

    report = commands.check_path(repo, config=config, profile=profile, upstream=upstream, rev=rev, branch=branch)
    done(
        json_out,
        report.summary,
        exit_code=0 if report.ok else int(ExitCode.FAILED),
        text=lambda: ps_ui.check_report(out, report, verbose=state.verbose),
    )


@patches_app.command("new")
@opt.workspace("repo", "config", "profile")
def patches_new(
    patchset_id: Annotated[str, typer.Argument(metavar="ID", help="The new patch-set's id.")],
    rev_range: Annotated[str, typer.Option("--from", help="Fork commits to capture, BASE..HEAD.")],
    kind: Annotated[PatchSetKind, typer.Option("--kind", help="What the patch-set carries.")] = "fork-feature",
    where: opt.Where = opt.HERE,
    json_out: opt.Json = False,
) -> None:
    """Capture fork commits into <profile>/patches/ID/ (git format-patch + scaffolded patchset.yaml)."""
    from ds4sync.patchsets import authoring

    result = authoring.new_patchset(where.open(), patchset_id, rev_range, kind=kind)
    done(
        json_out,
        lambda: _authored(result),
        text=lambda: out.print(
            f"patch-set {result.id}: {_patches(len(result.patches))} in {result.folder}; {result.note}", markup=False
        ),
    )


@patches_app.command("refresh")
@opt.workspace("repo", "config", "state_dir", "profile")
def patches_refresh(
    patchset_id: Annotated[str, typer.Argument(metavar="ID", help="The patch-set to rewrite.")],
    where: opt.Where = opt.HERE,
    allow_drop: Annotated[
        bool,
        typer.Option("--allow-drop", help="Write the new patches even when they change fewer files (named)."),
    ] = False,
    json_out: opt.Json = False,
) -> None:
    """Rewrite a patch-set's patches from its adapted commit in the sync worktree."""
    from ds4sync.patchsets import authoring

    ws = where.open()
    result = authoring.refresh_patchset(ws, patchset_id, allow_drop=allow_drop)
    done(
        json_out,
        lambda: _authored(result),
        text=lambda: out.print(
            f"patch-set {result.id}: {_patches(len(result.patches))} rewritten in {result.folder} ({result.note})",
            markup=False,
        ),
    )


def _patches(count: int) -> str:
    return f"{count} patch" if count == 1 else f"{count} patches"


def _authored(result) -> dict:
    return {
        "id": result.id,
        "folder": str(result.folder),
        "patches": [str(p) for p in result.patches],
        "note": result.note,
    }


@app.command()
@opt.workspace("repo", "config", "state_dir", "profile")
def backport(
    commit: Annotated[
        str,
        typer.Argument(
            metavar="COMMIT|evaluate",
            help="Upstream commit to carry as a backport patch-set; or `evaluate` to measure one first.",
        ),
    ],
    ref: Annotated[
        str | None, typer.Argument(metavar="[REF]", help="With `evaluate`: the upstream commit to measure.")
    ] = None,
    patchset_id: Annotated[str | None, typer.Option("--id", help="Id of the new backport patch-set.")] = None,
    onto: Annotated[
        str | None, typer.Option("--onto", help="evaluate: branch to apply on (default: the active run's sync branch).")
    ] = None,
    serving_config: opt.ServingConfig = None,
    json_out: opt.Json = False,
    where: opt.Where = opt.HERE,
) -> None:
    """Carry an upstream commit as a backport patch-set, or `backport evaluate REF`: apply, build, A/B, decide."""
    ws = where.open()
    if commit == "evaluate":
        if ref is None:
            raise typer.BadParameter("`ds4sync backport evaluate REF` needs the upstream commit", param_hint="REF")
        from ds4sync.cli.serving import backport_exit, progress
        from ds4sync.serving.runs import evaluate_backport_in

        decision = evaluate_backport_in(ws, ref, onto=onto, serving_path=serving_config, progress=progress)
        done(
            json_out,
            lambda: decision.model_dump(mode="json"),
            exit_code=backport_exit(decision),
            text=lambda: out.print(decision.line(), markup=False),
        )
        return
    if ref is not None:
        raise typer.BadParameter(f"unexpected argument '{ref}'", param_hint="REF")
    if not patchset_id:
        raise typer.BadParameter("a backport patch-set needs an id", param_hint="--id")
    from ds4sync.patchsets import authoring

    result = authoring.backport(ws, commit, patchset_id)
    done(
        json_out,
        lambda: _authored(result),
        text=lambda: out.print(f"backport {result.id}: {result.note}; patch in {result.folder}", markup=False),
    )
