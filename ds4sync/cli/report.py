"""`ds4sync report` and `ds4sync schema`."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ds4sync.cli import options as opt
from ds4sync.cli._app import _progress, app, done, err, out

if TYPE_CHECKING:
    from ds4sync.runner import Workspace


class Format(StrEnum):
    """The report formats: GitHub Markdown, HTML, or the JSON summary."""

    md = "md"
    html = "html"
    json = "json"


ReportFormat = Annotated[
    Format, typer.Option("--format", help="md (GitHub Markdown), html, or json (the summary).", case_sensitive=False)
]


@app.command()
@opt.workspace("repo", "config", "state_dir", "profile")
def report(
    where: opt.Where = opt.HERE,
    run: Annotated[str | None, typer.Option("--run", help="Run id (default: active, else latest).")] = None,
    fmt: ReportFormat = Format.md,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write here instead of stdout.", dir_okay=False)
    ] = None,
    public: Annotated[
        bool, typer.Option("--public", help="Also redact home directories, private hosts and addresses.")
    ] = False,
    notes: Annotated[Path | None, typer.Option("--notes", help="Markdown notes to include.", dir_okay=False)] = None,
    nightly: Annotated[bool, typer.Option("--nightly", help="The short nightly summary.")] = False,
    compare: Annotated[
        tuple[str, str] | None, typer.Option("--compare", metavar="RUN_A RUN_B", help="What changed between two runs.")
    ] = None,
    trend: Annotated[
        bool,
        typer.Option(
            "--trend",
            help="A self-contained HTML page of plots over every recorded run (--out, default <state>/trend.html).",
        ),
    ] = False,
    json_out: opt.Json = False,
) -> None:
    """Render the PR description of a run from its record (secrets are always redacted).

    With ``--json``: the envelope, whose data is the JSON summary (or the comparison), or where ``--out`` /
    ``--trend`` wrote a file, that file's path.
    """
    ws = where.open()
    from ds4sync.runner import stop_dead_run_children

    stop_dead_run_children(ws, _progress(json_out), note=False)  # a report reads the run; it takes no lock
    if trend:
        _write_trend(ws, out_file or ws.store.root / "trend.html", public=public, json_out=json_out)
        return
    if json_out and out_file is None:  # the envelope holds the summary; a file keeps its --format
        fmt = Format.json
    text = _report_text(ws, run, fmt, compare=compare, public=public, notes=notes, nightly=nightly)
    _emit(text, out_file, json_out=json_out)


def _write_trend(ws: Workspace, target: Path, *, public: bool, json_out: bool) -> None:
    """Write the trend page of every recorded run to ``target`` and say where."""
    from ds4sync.report.trend import write_trend

    count = write_trend(ws.store, target, public=public)
    done(
        json_out,
        {"file": str(target), "runs": count},
        text=lambda: err.print(f"trend of {count} runs written to {target}", markup=False),
    )


def _report_text(
    ws: Workspace,
    run: str | None,
    fmt: Format,
    *,
    compare: tuple[str, str] | None,
    public: bool,
    notes: Path | None,
    nightly: bool,
) -> str:
    """The rendered comparison of two runs, else the report of ``run`` (PR description or nightly summary)."""
    from ds4sync.report import files

    if compare:
        return files.compare_text(
            ws.store, ws.profile, compare[0], compare[1], fmt="json" if fmt is Format.json else "md", public=public
        )
    return files.report_text(
        ws.store,
        ws.profile if ws.profile_explicit else None,  # else the run's own profile
        run_id=run,
        fmt=fmt.value,
        public=public,
        notes=files.read_notes(notes),
        kind="nightly" if nightly else "pr",
    )


def _emit(text: str, out_file: Path | None, *, json_out: bool) -> None:
    """Write the report to ``out_file``, else print it: in the JSON envelope, or as it is."""
    from ds4sync.core.files import write_output

    if out_file is not None:
        write_output(out_file, text)
        done(json_out, {"file": str(out_file)}, text=lambda: err.print(f"report written to {out_file}", markup=False))
    elif json_out:
        import json

        done(True, json.loads(text))
    else:
        out.file.write(text)


@app.command()
def schema() -> None:
    """Print the JSON schema of `ds4sync report --format json`."""
    from ds4sync.cli import views as ui
    from ds4sync.report import report_schema

    ui.print_json(out, report_schema())
