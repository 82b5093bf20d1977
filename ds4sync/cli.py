"""The ds4sync command line: thin adapters from options to one core function each.

Core modules never print or exit; this module renders their results and maps errors
to exit codes (see :mod:`ds4sync.errors`).
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ds4sync.errors import Ds4syncError, ExitCode

app = typer.Typer(name="ds4sync", no_args_is_help=True, add_completion=False,
                  help="Keep a fork in sync with its upstream, and prove each sync.")
config_app = typer.Typer(no_args_is_help=True, help="Inspect ds4sync.yaml.")
app.add_typer(config_app, name="config")
serving_app = typer.Typer(no_args_is_help=True, help="Serving gates against an OpenAI-compatible server.")
app.add_typer(serving_app, name="serving")
backport_app = typer.Typer(no_args_is_help=True, help="Decide upstream backports by measurement.")
app.add_typer(backport_app, name="backport")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

RepoOpt = Annotated[Path, typer.Option("--repo", help="The fork checkout (default: current directory).",
                                       file_okay=False)]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="ds4sync.yaml to use (default: <repo>/ds4sync.yaml).",
                                                dir_okay=False)]
BranchOpt = Annotated[str | None, typer.Option("--branch", help="The fork branch (default: fork.branch in config).")]
StateOpt = Annotated[Path | None, typer.Option("--state-dir",
                                               help="Where runs live (default: <git-common-dir>/ds4sync).")]
ProfileOpt = Annotated[Path | None, typer.Option("--profile",
                                                 help="Profile folder (patches/, gates/, reports/, kernels/).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]


def _workspace(repo: Path, config: Path | None, branch: str | None = None, state_dir: Path | None = None,
               profile: Path | None = None):
    from ds4sync.pipeline import open_workspace

    return open_workspace(repo, config_path=config, branch=branch, state_dir=state_dir, profile=profile)


@app.command()
def plan(ref: Annotated[str, typer.Argument(help="Upstream ref or SHA to merge.")], repo: RepoOpt = Path("."),
         config: ConfigOpt = None, branch: BranchOpt = None, state_dir: StateOpt = None,
         json_out: JsonOpt = False) -> None:
    """Predict a merge (conflicts, kinds, overlaps) without touching any work tree."""
    from ds4sync import sync, ui

    summary = sync.plan(_workspace(repo, config, branch, state_dir), ref)
    if json_out:
        ui.print_json(out, summary.brief())
    else:
        ui.merge_summary(out, summary, title=f"plan: merge {ref} into the fork")


@app.command()
def merge(ref: Annotated[str, typer.Argument(help="Upstream ref or SHA to merge.")], repo: RepoOpt = Path("."),
          config: ConfigOpt = None, branch: BranchOpt = None, state_dir: StateOpt = None,
          profile: ProfileOpt = None, json_out: JsonOpt = False) -> None:
    """Merge an upstream SHA into the fork in a new sync worktree, reusing recorded resolutions."""
    from ds4sync import sync

    ws = _workspace(repo, config, branch, state_dir, profile)
    outcome = sync.start_merge(ws, ref, progress=_progress(json_out))
    _finish(ws, outcome, json_out=json_out)


@app.command()
def resume(repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
           profile: ProfileOpt = None, json_out: JsonOpt = False) -> None:
    """Go on with the active run: accept resolved conflicts, record them, and continue."""
    from ds4sync import sync

    ws = _workspace(repo, config, None, state_dir, profile)
    _finish(ws, sync.resume(ws, progress=_progress(json_out)), json_out=json_out)


@app.command()
def abort(repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
          run: Annotated[str | None, typer.Option("--run", help="Run id (default: the active run).")] = None) -> None:
    """Drop the active run: remove its worktree and sync branch; the fork branch is untouched."""
    from ds4sync import sync

    record = sync.abort(_workspace(repo, config, None, state_dir), run_id=run)
    out.print(f"run {record.run_id} aborted; {record.fork.branch} untouched; backup kept at {record.backup_ref}")


@app.command()
def status(repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
           run: Annotated[str | None, typer.Option("--run", help="Run id (default: active, else latest).")] = None,
           all_runs: Annotated[bool, typer.Option("--all", help="List every run.")] = False,
           json_out: JsonOpt = False) -> None:
    """Show the current run and what to do next."""
    from ds4sync import ui

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
    from ds4sync.pipeline import open_workspace

    ws = open_workspace(repo, config_path=config)
    source = ws.config.source or f"(no {CONFIG_NAME}; defaults)"
    out.print(f"config: {source}: ok")
    out.print(f"upstream: {ws.config.upstream.remote} {ws.config.upstream.url or ''} ref {ws.config.upstream.ref}")
    out.print(f"fork branch: {ws.fork_branch or '(not set; pass --branch)'}")
    out.print(f"profile: {ws.profile}")
    out.print(f"state dir: {ws.store.root}")
    out.print(f"resolution rules: {len(ws.config.merge.rules)}")


@app.command()
def demo(workdir: Annotated[Path | None, typer.Option("--workdir", help="Folder for the demo repos "
                                                      "(default: a new temporary folder).")] = None) -> None:
    """Build a small upstream and fork with realistic history, and run a sync end to end."""
    from ds4sync import demo as demo_mod
    from ds4sync import ui

    result = demo_mod.run_demo(workdir, progress=_progress(False))
    for title, summary in result.summaries:
        ui.merge_summary(out, summary, title=title)
    for line in result.lines:
        out.print(line)
    if result.exit_code:
        raise typer.Exit(int(result.exit_code))


ServingConfigOpt = Annotated[Path | None, typer.Option("--serving-config", dir_okay=False,
                                                      help="YAML with the serving section (default: ds4sync.yaml).")]
OutOpt = Annotated[Path | None, typer.Option("--out", file_okay=False,
                                             help="Folder for server logs and bench results.")]


@serving_app.command("gate")
def serving_gate(repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
                 serving_config: ServingConfigOpt = None, out_dir: OutOpt = None,
                 probe: Annotated[list[str] | None, typer.Option("--probe", help="Run only this probe "
                                                                 "(repeatable).")] = None,
                 json_out: JsonOpt = False) -> None:
    """Start (or attach to) the server and run the serving probes; exit 1 when any probe fails."""
    from ds4sync.serving import render, runs
    from ds4sync.serving.gate import run_serving_gate

    ws = _workspace(repo, config, None, state_dir)
    cfg = runs.load_serving_config(ws, serving_config)
    result = run_serving_gate(cfg, out_dir=runs.output_dir(ws, "serving", out_dir), names=probe,
                              progress=_progress(json_out))
    run_id = runs.record_result(ws, "serving", result)
    if json_out:
        from ds4sync import ui

        ui.print_json(out, {"status": result.status, "run_id": run_id, "probes": [p.brief() for p in result.probes]})
    else:
        for line in render.serving_lines(result):
            out.print(line, markup=False)
    if not result:
        raise typer.Exit(int(ExitCode.FAILED))


@app.command("ab")
def ab(baseline: Annotated[list[str], typer.Option("--baseline", help="Recorded JSON file(s), a base URL, or a "
                                                   "serving-config YAML.")],
       candidate: Annotated[list[str], typer.Option("--candidate", help="Same kinds as --baseline.")],
       pairs: Annotated[int, typer.Option("--pairs", min=1, help="Interleaved pairs for live sides.")] = 5,
       model: Annotated[str | None, typer.Option("--model", help="Served model name (URL sides).")] = None,
       repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
       serving_config: ServingConfigOpt = None, out_dir: OutOpt = None, json_out: JsonOpt = False) -> None:
    """Compare a baseline and a candidate: medians, mean deltas, bootstrap 95% CI, verdict per metric."""
    from ds4sync.serving import runs
    from ds4sync.serving.ab import run_ab

    ws = _workspace(repo, config, None, state_dir)
    cfg = ws.config.serving if serving_config is None else runs.load_serving_config(ws, serving_config)
    result = run_ab(baseline, candidate, pairs=pairs, out_dir=runs.output_dir(ws, "ab", out_dir), model=model,
                    bench_config=cfg.bench if cfg else None, rules=cfg.ab_metrics if cfg else None)
    runs.record_result(ws, "ab", result)
    if json_out:
        from ds4sync import ui

        ui.print_json(out, result.brief())
    else:
        for line in result.lines():
            out.print(line, markup=False)
        out.print(f"verdict: {result.verdict}", markup=False)
    if result.verdict == "regression":
        raise typer.Exit(int(ExitCode.FAILED))


@backport_app.command("evaluate")
def backport_evaluate(ref: Annotated[str, typer.Argument(help="Upstream commit to backport.")],
                      onto: Annotated[str | None, typer.Option("--onto", help="Branch to apply on (default: the "
                                                               "active run's sync branch).")] = None,
                      repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
                      profile: ProfileOpt = None, serving_config: ServingConfigOpt = None,
                      json_out: JsonOpt = False) -> None:
    """Apply an upstream commit on the sync branch, build, A/B against the branch without it, decide."""
    from ds4sync.serving import runs
    from ds4sync.serving.backport import evaluate_backport

    ws = _workspace(repo, config, None, state_dir, profile)
    cfg = runs.load_serving_config(ws, serving_config)
    record = ws.store.current()
    base_ref = onto or (record.sync_branch if record else None)
    if base_ref is None:
        raise typer.BadParameter("no active run: pass --onto BRANCH", param_hint="--onto")
    sha = ws.repo.resolve_commit(ref)
    if sha is None:
        raise typer.BadParameter(f"{ref} is not a commit here (fetch it first)", param_hint="REF")
    decision = evaluate_backport(ws.repo, sha, cfg, base_ref=base_ref,
                                 base_tree=Path(record.worktree) if record and not onto else None,
                                 work_dir=runs.output_dir(ws, "backport"), python=sys.executable,
                                 patch_dir=ws.profile / "patches")
    runs.record_result(ws, "backports", decision)
    if json_out:
        from ds4sync import ui

        ui.print_json(out, decision.model_dump(mode="json"))
    else:
        out.print(decision.line(), markup=False)


def _progress(quiet: bool):
    if quiet:
        return lambda _message: None
    return lambda message: err.print(f"[dim]· {message}[/]")


def _finish(ws, outcome, *, json_out: bool) -> None:
    from ds4sync import ui
    from ds4sync.mergeplan import MergeSummary

    record = outcome.record
    path = str(ws.store.record_path(record.run_id))
    summary = MergeSummary.model_validate(record.results["merge"]) if "merge" in record.results else None
    if json_out:
        data = summary.brief() if summary else {}
        data.update({"run_id": record.run_id, "status": record.status, "worktree": record.worktree,
                     "sync_branch": record.sync_branch, "record": path})
        ui.print_json(out, data)
    else:
        if summary:
            ui.merge_summary(out, summary, title=f"merge {record.upstream.ref} into {record.fork.branch}")
        ui.run_outcome(out, outcome, record_path=path)
    code = {"needs-person": ExitCode.NEEDS_PERSON, "failed": ExitCode.FAILED}.get(record.status, ExitCode.OK)
    if code:
        raise typer.Exit(int(code))


def _save_traceback() -> str:
    folder = Path(os.environ.get("DS4SYNC_CRASH_DIR", tempfile.gettempdir())) / "ds4sync-crashes"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"crash-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    path.write_text(f"argv: {sys.argv}\n\n{traceback.format_exc()}")
    return str(path)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turn errors into one line and an exit code."""
    from typer.exceptions import TyperException

    try:
        result = app(args=argv, standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        err.print("ds4sync: interrupted")
        return 130
    except TyperException as exc:
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            err.print(f"ds4sync: error: {exc.format_message()}", markup=False)
        return int(ExitCode.USAGE)
    except Ds4syncError as exc:
        err.print(f"ds4sync: error: {exc.one_line()}", markup=False)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        err.print("ds4sync: interrupted; `ds4sync status` shows where the run stands")
        return 130
    except Exception as exc:
        path = _save_traceback()
        err.print(f"ds4sync: internal error: {type(exc).__name__}: {exc} (traceback: {path})", markup=False)
        return int(ExitCode.INTERNAL)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
