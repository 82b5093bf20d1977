"""`ds4sync serving gate`, `ds4sync ab` and backport evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ds4sync.cli import options as opt
from ds4sync.cli._app import _progress, app, done, err, out, serving_app
from ds4sync.core.errors import ExitCode

if TYPE_CHECKING:
    from ds4sync.models.serving_results import ABResult
    from ds4sync.serving.ab import Interrupted

OutOpt = Annotated[
    Path | None, typer.Option("--out", file_okay=False, help="Folder for server logs and bench results.")
]
# Progress goes to stderr, so it is shown with --json too (a 20-minute command is never silent).
progress = _progress(False)


def _announce(line: str) -> None:
    err.print(line, markup=False)


def gate_exit(result: object) -> int:
    """``serving gate``: 0 passed; 1 a probe failed or erred; 7 (could not measure) the server did not start
    or no probe ran."""
    if getattr(result, "startup_error", None) or getattr(result, "status", None) == "not-run":
        return int(ExitCode.NOT_MEASURED)
    return 0 if result else int(ExitCode.FAILED)


def ab_exit(result: object) -> int:
    """``ab``: 1 a regression (lost candidate requests included); 7 nothing trustworthy measured; else 0."""
    if getattr(result, "error", None):
        return int(ExitCode.NOT_MEASURED)
    return int(ExitCode.FAILED) if getattr(result, "verdict", None) == "regression" else 0


def backport_exit(decision: object) -> int:
    """``backport evaluate``: 0 included; 1 excluded on a measured harm; 7 excluded as not measured or undecided."""
    if getattr(decision, "decision", None) == "include":
        return 0
    return int(ExitCode.FAILED) if getattr(decision, "basis", None) == "measured" else int(ExitCode.NOT_MEASURED)


@serving_app.command("gate")
@opt.workspace("repo", "config", "state_dir")
def serving_gate(
    where: opt.Where = opt.HERE,
    serving_config: opt.ServingConfig = None,
    out_dir: OutOpt = None,
    probe: Annotated[list[str] | None, typer.Option("--probe", help="Run only this probe (repeatable).")] = None,
    json_out: opt.Json = False,
) -> None:
    """Start (or attach to) the server and run the serving probes.

    Exit 1 when a probe failed or got no answer (error), 7 when the server did not start or no probe ran
    (nothing measured).
    The result, every bench number included, is kept as ``<out>/serving.json``.
    """
    from ds4sync.core.files import write_json_atomic
    from ds4sync.serving import render, runs
    from ds4sync.serving.gate import GateInterrupted, run_serving_gate

    ws = where.open()
    cfg = runs.load_serving_config(ws, serving_config)
    registry = runs.children(ws, announce=_announce)
    folder = runs.output_dir(ws, "serving", out_dir)
    try:
        result = run_serving_gate(cfg, out_dir=folder, names=probe, progress=progress, registry=registry)
    except GateInterrupted as stop:
        for done_probe in stop.results:
            _announce(f"measured before the interrupt: {done_probe.name} {done_probe.status}: {done_probe.summary}")
        _announce(f"interrupted after {len(stop.results)} probe(s); server stopped")
        raise
    write_json_atomic(folder / "serving.json", result.model_dump(mode="json"))
    run_id = runs.record_result(ws, "serving", result)

    def text() -> None:
        for line in render.serving_lines(result):
            out.print(line, markup=False)
        out.print(render.summary_line(result), markup=False)
        out.print(f"kept: {folder / 'serving.json'}", markup=False)

    done(
        json_out,
        lambda: {**result.brief(), "run_id": run_id, "result": str(folder / "serving.json")},
        exit_code=gate_exit(result),
        text=text,
    )


@app.command("ab")
@opt.workspace("repo", "config", "state_dir")
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
    where: opt.Where = opt.HERE,
    serving_config: opt.ServingConfig = None,
    out_dir: OutOpt = None,
    json_out: opt.Json = False,
) -> None:
    """Compare a baseline and a candidate measured alike: medians, paired t intervals, verdict per metric and overall.

    Exit 1 on a regression (requests the candidate lost included); 7 when nothing trustworthy was measured
    (a server did not start, the baseline lost requests, a run gave no readable result); Ctrl-C keeps the
    runs measured so far (``<out>/steps.jsonl``, ``<out>/ab.json``) and prints them.
    """
    from ds4sync.models.serving_settings import ABConfig
    from ds4sync.serving import runs
    from ds4sync.serving.ab import Interrupted, run_ab

    if servers not in (None, "alternate", "both"):
        raise typer.BadParameter("alternate or both", param_hint="--servers")
    ws = where.open()
    cfg = ws.config.serving if serving_config is None else runs.load_serving_config(ws, serving_config)
    settings = cfg.ab if cfg else ABConfig()
    folder = runs.output_dir(ws, "ab", out_dir)
    registry = runs.children(ws, announce=_announce)
    try:
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
            registry=registry,
            progress=progress,
        )
    except Interrupted as stop:
        _announce_interrupted(stop, folder)
        raise
    kept = runs.record_ab(ws, result, out_dir=folder)
    done(json_out, lambda: {**result.brief(), **kept}, exit_code=ab_exit(result), text=lambda: _print_ab(result, kept))


def _announce_interrupted(stop: Interrupted, folder: Path) -> None:
    """Say what an interrupted A/B measured so far, when it was judged, and where its runs are kept."""
    from ds4sync.serving import render

    if stop.result is not None:
        for line in [*stop.result.lines(), *render.ab_measured_lines(stop.result)]:
            _announce(line)
        _announce(f"interrupted: {len(stop.steps)} measured run(s) kept in {folder / 'steps.jsonl'} and {stop.path}")


def _print_ab(result: ABResult, kept: dict[str, Any]) -> None:
    """The A/B as text: its lines, the measured runs, the summary and where it was kept."""
    from ds4sync.serving import render

    for line in [*result.lines(), *render.ab_measured_lines(result)]:
        out.print(line, markup=False)
    out.print(result.summary(), markup=False)
    out.print(f"kept: {kept['result']} (history {kept['history']})", markup=False)
