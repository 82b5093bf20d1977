"""``ds4sync ci export``: the gate tiers as a Buildkite pipeline or a GitHub Actions workflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ds4sync.cli import options as opt
from ds4sync.cli._app import app, done, fail, out
from ds4sync.core.names import Tier

ci_app = typer.Typer(no_args_is_help=True, help="Run the gate tiers on the CI engines forks already run.")
app.add_typer(ci_app, name="ci")


@ci_app.command("export")
@opt.workspace("repo", "config", "state_dir", "profile")
def export(
    buildkite: Annotated[bool, typer.Option("--buildkite", help="A Buildkite pipeline (as vLLM's CI).")] = False,
    github_actions: Annotated[bool, typer.Option("--github-actions", help="A GitHub Actions workflow.")] = False,
    tiers: Annotated[list[Tier] | None, typer.Option("--tier", help="Tiers to export (default: gates.tiers).")] = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write here instead of standard output.")] = None,
    install: Annotated[
        str | None,
        typer.Option(
            "--install",
            help="The pip requirement each job installs ds4sync from (default: the git commit this ds4sync was "
            "installed from).",
        ),
    ] = None,
    where: opt.Where = opt.HERE,
    json_out: opt.Json = False,
) -> None:
    """One CI step per gate, each running `ds4sync gate --tier T --gate NAME --json`, with queues, paths, timeouts."""
    from ds4sync.core.files import write_output
    from ds4sync.gates.ciexport import buildkite_pipeline, github_actions_workflow, install_spec
    from ds4sync.gates.tiers import load_tier

    if buildkite == github_actions:
        fail("pass exactly one of --buildkite and --github-actions")
    ws = where.open()
    names = tuple(t.value for t in tiers) if tiers else tuple(ws.config.gates.tiers)
    if not names:
        fail("no tiers to export: pass --tier or set gates.tiers in ds4sync.yaml")
    gates = [gate for tier in names for gate in load_tier(ws.profile, tier)]
    spec = install_spec(install)
    text = (
        buildkite_pipeline(gates, install=spec)
        if buildkite
        else github_actions_workflow(gates, install=spec, base_branch=ws.config.upstream.ref)
    )
    if out_file is not None:
        write_output(out_file, text)
    data = {"format": "buildkite" if buildkite else "github-actions", "gates": len(gates), "tiers": list(names)}
    data["file" if out_file else "pipeline"] = str(out_file) if out_file else text
    done(json_out, data, text=lambda: out.print(text if out_file is None else f"wrote {out_file}", markup=False))
