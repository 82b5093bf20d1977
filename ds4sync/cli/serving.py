"""`ds4sync serving gate`, `ds4sync ab` and backport evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ds4sync.cli._app import (
    ConfigOpt,
    JsonOpt,
    RepoOpt,
    ServingConfigOpt,
    StateOpt,
    _progress,
    _workspace,
    app,
    done,
    out,
    serving_app,
)
from ds4sync.core.errors import ExitCode

OutOpt = Annotated[
    Path | None, typer.Option("--out", file_okay=False, help="Folder for server logs and bench results.")
]


@serving_app.command("gate")
def serving_gate(
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    state_dir: StateOpt = None,
    serving_config: ServingConfigOpt = None,
    out_dir: OutOpt = None,
    probe: Annotated[list[str] | None, typer.Option("--probe", help="Run only this probe (repeatable).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Start (or attach to) the server and run the serving probes; exit 1 when any probe fails."""
    from ds4sync.serving import render, runs
    from ds4sync.serving.gate import run_serving_gate

    ws = _workspace(repo, config, None, state_dir)
    cfg = runs.load_serving_config(ws, serving_config)
    result = run_serving_gate(
        cfg, out_dir=runs.output_dir(ws, "serving", out_dir), names=probe, progress=_progress(json_out)
    )
    run_id = runs.record_result(ws, "serving", result)

    def text() -> None:
        for line in render.serving_lines(result):
            out.print(line, markup=False)
        out.print(render.summary_line(result), markup=False)

    done(
        json_out,
        lambda: {"status": result.status, "run_id": run_id, "probes": [p.brief() for p in result.probes]},
        exit_code=0 if result else int(ExitCode.FAILED),
        text=text,
    )


@app.command("ab")
def ab(
    baseline: Annotated[
        list[str], typer.Option("--baseline", help="Recorded JSON file(s), a base URL, or a serving-config YAML.")
    ],
    candidate: Annotated[list[str], typer.Option("--candidate", help="Same kinds as --baseline.")],
    pairs: Annotated[int, typer.Option("--pairs", min=1, help="Interleaved pairs for live sides.")] = 5,
    model: Annotated[str | None, typer.Option("--model", help="Served model name (URL sides).")] = None,
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    state_dir: StateOpt = None,
    serving_config: ServingConfigOpt = None,
    out_dir: OutOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Compare a baseline and a candidate: medians, mean deltas, bootstrap 95% CI, verdict per metric."""
    from ds4sync.serving import runs
    from ds4sync.serving.ab import run_ab

    ws = _workspace(repo, config, None, state_dir)
    cfg = ws.config.serving if serving_config is None else runs.load_serving_config(ws, serving_config)
    result = run_ab(
        baseline,
        candidate,
        pairs=pairs,
        out_dir=runs.output_dir(ws, "ab", out_dir),
        model=model,
        bench_config=cfg.bench if cfg else None,
        rules=cfg.ab_metrics if cfg else None,
    )
    runs.record_result(ws, "ab", result)

    def text() -> None:
        for line in result.lines():
            out.print(line, markup=False)
        out.print(f"verdict: {result.verdict}", markup=False)

    done(
        json_out,
        lambda: {"verdict": result.verdict, "rows": result.brief()},
        exit_code=int(ExitCode.FAILED) if result.verdict == "regression" else 0,
        text=text,
    )
