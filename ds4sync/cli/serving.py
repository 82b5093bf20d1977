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
    registry = runs.children(ws)
    result = run_serving_gate(
        cfg,
        out_dir=runs.output_dir(ws, "serving", out_dir),
        names=probe,
        progress=_progress(json_out),
        registry=registry,
    )
    run_id = runs.record_result(ws, "serving", result)

    def text() -> None:
        for line in render.serving_lines(result):
            out.print(line, markup=False)
        out.print(render.summary_line(result), markup=False)

    done(
        json_out,
        lambda: {**result.brief(), "run_id": run_id},
        exit_code=0 if result else int(ExitCode.FAILED),
        text=text,
    )


@app.command("ab")
def ab(
    baseline: Annotated[
        list[str], typer.Option("--baseline", help="Recorded JSON file(s), a base URL, or a serving-config YAML.")
    ],
    candidate: Annotated[list[str], typer.Option("--candidate", help="Same kinds as --baseline.")],
    pairs: Annotated[
        int | None, typer.Option("--pairs", min=1, help="Pairs for live sides (default serving.ab.pairs).")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Served model name (URL sides).")] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Order and prompt seed (default: a fresh one, recorded).")
    ] = None,
    confidence: Annotated[
        float | None, typer.Option("--confidence", min=0.5, max=0.9999, help="Family-wise level (default 0.99).")
    ] = None,
    servers: Annotated[
        str | None, typer.Option("--servers", help="Started sides: alternate (restart per run) or both (both up).")
    ] = None,
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    state_dir: StateOpt = None,
    serving_config: ServingConfigOpt = None,
    out_dir: OutOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Compare a baseline and a candidate measured alike: medians, paired t intervals, verdict per metric and overall.

    Exit 1 on a regression (lost requests included).
    """
    from ds4sync.serving import runs
    from ds4sync.serving.ab import run_ab
    from ds4sync.serving.config import ABConfig

    if servers not in (None, "alternate", "both"):
        raise typer.BadParameter("alternate or both", param_hint="--servers")
    ws = _workspace(repo, config, None, state_dir)
    cfg = ws.config.serving if serving_config is None else runs.load_serving_config(ws, serving_config)
    settings = cfg.ab if cfg else ABConfig()
    folder = runs.output_dir(ws, "ab", out_dir)
    result = run_ab(
        baseline,
        candidate,
        pairs=pairs or settings.pairs,
        out_dir=folder,
        model=model,
        bench_config=cfg.bench if cfg else None,
        rules=cfg.ab_metrics if cfg else None,
        confidence=confidence or settings.confidence,
        min_pairs=settings.min_pairs,
        seed=seed,
        servers=servers or settings.servers,  # type: ignore[arg-type]
        warmup_runs=settings.warmup_runs,
        registry=runs.children(ws),
        progress=_progress(json_out),
    )
    kept = runs.record_ab(ws, result, out_dir=folder)

    def text() -> None:
        for line in result.lines():
            out.print(line, markup=False)
        out.print(result.summary(), markup=False)
        out.print(f"kept: {kept['result']} (history {kept['history']})", markup=False)

    done(
        json_out,
        lambda: {**result.brief(), **kept},
        exit_code=int(ExitCode.FAILED) if result.verdict == "regression" else 0,
        text=text,
    )
