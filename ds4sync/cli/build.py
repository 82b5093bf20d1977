"""`ds4sync build`: the native kernels with a build profile."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ds4sync.cli import options as opt
from ds4sync.cli._app import app, done, err, out
from ds4sync.core.errors import ExitCode


@app.command()
@opt.workspace("repo", "config", "state_dir", "profile")
def build(
    build_profile: Annotated[
        str | None,
        typer.Option(
            "--build-profile", help="Build profile name, e.g. sm120 or sm90 (default: build.profile in config)."
        ),
    ] = None,
    where: opt.Where = opt.HERE,
    manifest: Annotated[
        Path | None,
        typer.Option("--manifest", help="Manifest of modules and op schemas (default: the profile's).", dir_okay=False),
    ] = None,
    json_out: opt.Json = False,
) -> None:
    """Build the native kernels with a target profile, then prove imports and op schemas."""
    from ds4sync.native import view
    from ds4sync.native.phase import build_workspace

    ws = where.open()
    with view.live_status(err, enabled=not json_out) as progress:
        result, record = build_workspace(ws, profile_name=build_profile, manifest_path=manifest, progress=progress)

    def text() -> None:
        view.build_result(out, result)
        if record:
            out.print(f"recorded in run {record.run_id}: {ws.store.record_path(record.run_id)}", markup=False)

    done(
        json_out,
        lambda: {**result.model_dump(mode="json"), "run_id": record.run_id if record else None},
        exit_code=0 if result else int(ExitCode.FAILED),
        text=text,
    )
