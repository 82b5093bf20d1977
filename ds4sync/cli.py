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
kernels_app = typer.Typer(no_args_is_help=True, help="Kernel tier: DeepSeek op checks and benchmarks.")
app.add_typer(kernels_app, name="kernels")
patches_app = typer.Typer(no_args_is_help=True, help="Semantic patch-sets: list, check, capture, refresh.")
app.add_typer(patches_app, name="patches")

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
FetchOpt = Annotated[bool, typer.Option("--fetch", help="Fetch the ref from the upstream remote first.")]


def _workspace(repo: Path, config: Path | None, branch: str | None = None, state_dir: Path | None = None,
               profile: Path | None = None):
    from ds4sync.pipeline import open_workspace

    return open_workspace(repo, config_path=config, branch=branch, state_dir=state_dir, profile=profile)


@app.command()
def plan(ref: Annotated[str, typer.Argument(help="Upstream ref or SHA to merge.")], repo: RepoOpt = Path("."),
         config: ConfigOpt = None, branch: BranchOpt = None, state_dir: StateOpt = None,
         fetch: FetchOpt = False, json_out: JsonOpt = False) -> None:
    """Predict a merge (conflicts, kinds, overlaps) without touching any work tree."""
    from ds4sync import sync, ui

    summary = sync.plan(_workspace(repo, config, branch, state_dir), ref, fetch=fetch)
    if json_out:
        ui.print_json(out, summary.brief())
    else:
        ui.merge_summary(out, summary, title=f"plan: merge {ref} into the fork")


@app.command()
def merge(ref: Annotated[str, typer.Argument(help="Upstream ref or SHA to merge.")], repo: RepoOpt = Path("."),
          config: ConfigOpt = None, branch: BranchOpt = None, state_dir: StateOpt = None,
          profile: ProfileOpt = None, fetch: FetchOpt = False, json_out: JsonOpt = False) -> None:
    """Merge an upstream SHA into the fork in a new sync worktree, reusing recorded resolutions."""
    from ds4sync import sync

    ws = _workspace(repo, config, branch, state_dir, profile)
    outcome = sync.start_merge(ws, ref, progress=_progress(json_out), fetch=fetch)
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
def promote(repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
            run: Annotated[str | None, typer.Option("--run", help="Run id (default: active, else latest).")] = None,
            allow_blockers: Annotated[bool, typer.Option("--allow-blockers",
                                                         help="Promote despite failed gates (recorded).")] = False,
            ) -> None:
    """Fast-forward the fork branch to a green sync (keeps a rollback ref). Nothing else moves it."""
    from ds4sync import promote as promote_mod

    result = promote_mod.promote(_workspace(repo, config, None, state_dir), run_id=run, allow=allow_blockers)
    out.print(f"{result.branch}: {result.old_head[:12]} -> {result.new_head[:12]}; rollback: {result.rollback_ref}")


@app.command()
def nightly(repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
            profile: ProfileOpt = None,
            ref: Annotated[str | None, typer.Option("--ref", help="Upstream ref (default: upstream.ref).")] = None,
            ) -> None:
    """Fetch upstream and run a whole sync (merge, patch-sets, build, gates, report); for cron."""
    from ds4sync.nightly import run_nightly

    ws = _workspace(repo, config, None, state_dir, profile)
    result = run_nightly(ws, ref=ref, progress=_progress(False))
    out.print(result.message, markup=False)
    if result.outcome is not None and "report" in result.outcome.record.results:
        out.print(f"report: {result.outcome.record.results['report'].get('path')}", markup=False)
    if result.exit_code:
        raise typer.Exit(int(result.exit_code))


@app.command()
def cron(repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
         at: Annotated[str, typer.Option("--at", help="Time of day, HH:MM (local).")] = "02:30") -> None:
    """Print the crontab line that runs `ds4sync nightly` on this repository."""
    from ds4sync.nightly import cron_line

    out.print(cron_line(_workspace(repo, config, None, state_dir), at=at), markup=False)


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
def build(profile: Annotated[str | None, typer.Option("--profile", help="Build profile name, e.g. sm120 or sm90 "
                                                      "(default: build.profile in config).")] = None,
          repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
          profile_dir: Annotated[Path | None, typer.Option("--profile-dir", help="Profile folder (kernels/ holds "
                                                           "build_profiles.yaml and manifest.yaml).")] = None,
          manifest: Annotated[Path | None, typer.Option("--manifest", help="Manifest of modules and op schemas "
                                                        "(default: the profile's).", dir_okay=False)] = None,
          json_out: JsonOpt = False) -> None:
    """Build the native kernels with a target profile, then prove imports and op schemas."""
    from ds4sync import ui
    from ds4sync.build import view
    from ds4sync.build.phase import build_workspace

    ws = _workspace(repo, config, None, state_dir, profile_dir)
    with view.live_status(err, enabled=not json_out) as progress:
        result, record = build_workspace(ws, profile_name=profile, manifest_path=manifest, progress=progress)
    if json_out:
        data = result.model_dump(mode="json")
        data["run_id"] = record.run_id if record else None
        ui.print_json(out, data)
    else:
        view.build_result(out, result)
        if record:
            out.print(f"recorded in run {record.run_id}: {ws.store.record_path(record.run_id)}")
    if not result:
        raise typer.Exit(int(ExitCode.FAILED))


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
        out.print(render.summary_line(result), markup=False)
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


@app.command("backport-evaluate")
def backport_evaluate(ref: Annotated[str, typer.Argument(help="Upstream commit to backport.")],
                      onto: Annotated[str | None, typer.Option("--onto", help="Branch to apply on (default: the "
                                                               "active run's sync branch).")] = None,
                      repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
                      profile: ProfileOpt = None, serving_config: ServingConfigOpt = None,
                      json_out: JsonOpt = False) -> None:
    """Measure a backport: apply it on the sync branch, build, A/B against the branch without it, include or not."""
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
@kernels_app.command("check")
def kernels_check(
        op: Annotated[list[str] | None, typer.Option("--op", help="prefill, decode, topk, routing, mhc_pre, "
                                                     "mhc_post (repeatable; default: the first four).")] = None,
        candidate: Annotated[str | None, typer.Option("--candidate", help="module:function[@adapter] to check "
                                                      "instead of our kernels (one --op).")] = None,
        bench: Annotated[bool, typer.Option("--bench", help="Also benchmark against the reference (GPU).")] = False,
        device: Annotated[str | None, typer.Option("--device", help="cuda or cpu (default: cuda if present; "
                                                   "cpu runs the Triton interpreter on the small grid).")] = None,
        profile: ProfileOpt = None, json_out: JsonOpt = False) -> None:
    """Check the DeepSeek ops (indexer logits, top-k, routing) against exact torch references."""
    from ds4sync import kernelsuite, ui

    result = kernelsuite.run_kernel_suite(ops=op, candidate=candidate, bench=bench, device=device, profile=profile)
    if json_out:
        ui.print_json(out, result.model_dump(mode="json"))
    else:
        _render_kernels(result)
    if not result.ok:
        raise typer.Exit(int(ExitCode.FAILED))


def _render_kernels(result) -> None:
    from rich.table import Table

    env = result.environment
    out.print(f"kernel suite on {env.gpu or env.device} (torch {env.torch}, triton {env.triton}, "
              f"{'interpreter, ' if env.interpreter else ''}grid {result.scale})")
    table = Table("op", "implementation", "pass", "fail", "error", "skip")
    for op in result.ops:
        table.add_row(op.op, op.impl, *(str(op.count(s)) for s in ("pass", "fail", "error", "skip")))
    out.print(table)
    for op in result.ops:
        for case in op.cases:
            if case.status in ("fail", "error"):
                out.print(f"[red]{op.op} {case.name}: {case.status}[/]: {case.detail}")
    if result.bench:
        bench = Table("op", "case", "µs", "ref µs", "speed-up", "GB/s", "TFLOP/s", "% roofline", "flags")
        for r in result.bench:
            bench.add_row(r.op, r.case, f"{r.time_us:.1f}", f"{r.ref_time_us:.1f}", f"{r.speedup:.1f}x",
                          f"{r.gb_per_s:.0f}", f"{r.tflop_per_s:.1f}", f"{r.pct_roof:.1%}", "; ".join(r.flags) or "ok")
        out.print(bench)
    out.print("[green]kernels: ok[/]" if result.ok else "[red]kernels: FAILED[/]")


ReportFormat = Annotated[str, typer.Option("--format", help="md (GitHub Markdown), html, or json (the summary).",
                                           case_sensitive=False)]


@app.command()
def report(repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
           profile: ProfileOpt = None,
           run: Annotated[str | None, typer.Option("--run", help="Run id (default: active, else latest).")] = None,
           fmt: ReportFormat = "md",
           out_file: Annotated[Path | None, typer.Option("--out", help="Write here instead of stdout.",
                                                         dir_okay=False)] = None,
           public: Annotated[bool, typer.Option("--public", help="Also redact home directories, private "
                                                "hosts and addresses.")] = False,
           notes: Annotated[Path | None, typer.Option("--notes", help="Markdown notes to include.",
                                                      dir_okay=False)] = None,
           nightly: Annotated[bool, typer.Option("--nightly", help="The short nightly summary.")] = False,
           compare: Annotated[tuple[str, str] | None, typer.Option("--compare", metavar="RUN_A RUN_B",
                                                                   help="What changed between two runs.")] = None,
           ) -> None:
    """Render the PR description of a run from its record (secrets are always redacted)."""
    from ds4sync.errors import ConfigError
    from ds4sync.report import files

    if fmt not in ("md", "html", "json"):
        raise ConfigError(f"unknown format '{fmt}'", where="--format", fix="use md, html or json")
    ws = _workspace(repo, config, None, state_dir, profile)
    if compare:
        text = files.compare_text(ws.store, ws.profile, compare[0], compare[1],
                                  fmt="json" if fmt == "json" else "md", public=public)
    else:
        text = files.report_text(ws.store, ws.profile, run_id=run, fmt=fmt, public=public,  # type: ignore[arg-type]
                                 notes=files.read_notes(notes), kind="nightly" if nightly else "pr")
    if out_file is None:
        out.file.write(text)
    else:
        out_file.write_text(text, encoding="utf-8")
        err.print(f"report written to {out_file}", markup=False)


@app.command()
def schema() -> None:
    """Print the JSON schema of `ds4sync report --format json`."""
    from ds4sync import ui
    from ds4sync.report import report_schema

    ui.print_json(out, report_schema())

@patches_app.command("list")
def patches_list(repo: RepoOpt = Path("."), config: ConfigOpt = None, profile: ProfileOpt = None,
                 json_out: JsonOpt = False) -> None:
    """List the profile's patch-sets in dependency order."""
    from ds4sync import ui
    from ds4sync.patchsets import commands
    from ds4sync.patchsets import ui as ps_ui

    _catalogue, patchsets = commands.list_patchsets(_workspace(repo, config, profile=profile))
    if json_out:
        ui.print_json(out, [ps.model_dump(mode="json") for ps in patchsets])
    else:
        ps_ui.patchset_table(out, patchsets)


@patches_app.command("check")
def patches_check(repo: RepoOpt = Path("."), config: ConfigOpt = None, profile: ProfileOpt = None,
                  upstream: Annotated[str | None, typer.Option("--upstream", help="Upstream ref: report patch-sets "
                                                               "whose drop_when holds there.")] = None,
                  verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also list invariants that hold.")]
                  = False, json_out: JsonOpt = False) -> None:
    """Check every patch-set's invariants on a checkout (no merge); exit 1 on a blocking violation."""
    from ds4sync import ui
    from ds4sync.patchsets import commands
    from ds4sync.patchsets import ui as ps_ui

    report = commands.check_path(repo, config=config, profile=profile, upstream=upstream)
    if json_out:
        ui.print_json(out, report.summary())
    else:
        ps_ui.check_report(out, report, verbose=verbose)
    if not report.ok:
        raise typer.Exit(int(ExitCode.FAILED))


@patches_app.command("new")
def patches_new(patchset_id: Annotated[str, typer.Argument(metavar="ID", help="The new patch-set's id.")],
                rev_range: Annotated[str, typer.Option("--from", help="Fork commits to capture, BASE..HEAD.")],
                kind: Annotated[str, typer.Option("--kind", help="fork-feature, backport, fixup or removal.")]
                = "fork-feature", repo: RepoOpt = Path("."), config: ConfigOpt = None,
                profile: ProfileOpt = None) -> None:
    """Capture fork commits into <profile>/patches/ID/ (git format-patch + scaffolded patchset.yaml)."""
    from ds4sync.patchsets import authoring

    result = authoring.new_patchset(_workspace(repo, config, profile=profile), patchset_id, rev_range, kind=kind)
    out.print(f"patch-set {result.id}: {len(result.patches)} patch(es) in {result.folder}; {result.note}")


@patches_app.command("refresh")
def patches_refresh(patchset_id: Annotated[str, typer.Argument(metavar="ID", help="The patch-set to rewrite.")],
                    repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
                    profile: ProfileOpt = None) -> None:
    """Rewrite a patch-set's patches from its adapted commit in the sync worktree."""
    from ds4sync.patchsets import authoring

    result = authoring.refresh_patchset(_workspace(repo, config, None, state_dir, profile), patchset_id)
    out.print(f"patch-set {result.id}: {len(result.patches)} patch(es) rewritten in {result.folder} ({result.note})")


@app.command()
def backport(commit: Annotated[str, typer.Argument(help="Upstream commit to backport.")],
             patchset_id: Annotated[str, typer.Option("--id", help="Id of the new backport patch-set.")],
             repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None,
             profile: ProfileOpt = None) -> None:
    """Cherry-pick an upstream commit into the sync worktree and record it as a backport patch-set."""
    from ds4sync.patchsets import authoring

    result = authoring.backport(_workspace(repo, config, None, state_dir, profile), commit, patchset_id)
    out.print(f"backport {result.id}: {result.note}; patch in {result.folder}")


@app.command()
def gate(tier: Annotated[str, typer.Option("--tier", help="static, unit, gpu, kernel, serving or perf.")],
         names: Annotated[list[str] | None, typer.Option("--gate", help="Run only this gate (repeatable).")] = None,
         repo: RepoOpt = Path("."), config: ConfigOpt = None, state_dir: StateOpt = None, profile: ProfileOpt = None,
         changed_since: Annotated[str | None, typer.Option("--changed-since", help="Select gates affected by "
                                                           "changes since REF (vLLM CI rules).")] = None,
         all_gates: Annotated[bool, typer.Option("--all", help="Run every gate of the tier.")] = False,
         jobs: Annotated[int | None, typer.Option("--jobs", min=1, help="CPU gates run at once.")] = None,
         gpus: Annotated[str | None, typer.Option("--gpus", help="GPU ids for GPU gates, e.g. 0,1.")] = None,
         python: Annotated[str | None, typer.Option("--python", help="Target environment's python.")] = None,
         no_cache: Annotated[bool, typer.Option("--no-cache", help="Run even gates whose inputs passed before.")]
         = False, bench: Annotated[bool, typer.Option("--bench", help="Kernel gates: also run the benchmarks "
                                                      "(never served from the cache).")] = False,
         json_out: JsonOpt = False) -> None:
    """Run the gates of one tier on this checkout (or the active run's worktree, recording the results)."""
    import contextlib
    import json

    from ds4sync.gates.runner import TierOptions, record_tier, run_tier

    ws = _workspace(repo, config, None, state_dir, profile)
    record = ws.store.current()
    options = TierOptions(tier=tier, names=tuple(names or ()), changed_since=changed_since, run_all=all_gates,
                          jobs=jobs, gpus=tuple(g for g in gpus.split(",") if g) if gpus is not None else None,
                          use_cache=not (no_cache or bench), python=python, bench=bench)
    with ws.store.lock("gate") if record else contextlib.nullcontext():
        if json_out:
            result = run_tier(ws, options, record=record)
        else:
            from ds4sync.gates import render

            with render.LiveGates(err, f"tier {tier}") as live:
                result = run_tier(ws, options, record=record, progress=live)
        path = str(record_tier(ws, record, result)) if record else None
    if json_out:
        out.file.write(json.dumps({**result.model_dump(mode="json"), "status": result.status, "record": path},
                                  indent=2) + "\n")
    else:
        render.tier_table(out, result, record_path=path)
    code = {"failed": ExitCode.FAILED, "incomplete": ExitCode.NEEDS_PERSON}.get(result.status, ExitCode.OK)
    if code:
        raise typer.Exit(int(code))

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
        data.update({key: record.results[key] for key in ("replay", "verify") if key in record.results})
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
