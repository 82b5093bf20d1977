"""`ds4sync gate` and `ds4sync kernels check`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ds4sync.cli import options as opt
from ds4sync.cli._app import _progress, app, done, err, fail, kernels_app, out
from ds4sync.core.errors import ExitCode
from ds4sync.core.names import ExecutorName, KernelOp, Tier

if TYPE_CHECKING:
    from ds4sync.gates.runner import TierOptions
    from ds4sync.models.gates_results import TierResult
    from ds4sync.models.record import RunRecord
    from ds4sync.runner import Workspace


@app.command()
@opt.workspace("repo", "config", "state_dir", "profile")
def gate(
    tier: Annotated[Tier, typer.Option("--tier", help="The tier to run.")],
    names: Annotated[list[str] | None, typer.Option("--gate", help="Run only this gate (repeatable).")] = None,
    where: opt.Where = opt.HERE,
    changed_since: Annotated[
        str | None, typer.Option("--changed-since", help="Select gates affected by changes since REF (vLLM CI rules).")
    ] = None,
    all_gates: Annotated[bool, typer.Option("--all", help="Run every gate of the tier.")] = False,
    jobs: Annotated[int | None, typer.Option("--jobs", min=1, help="CPU gates run at once.")] = None,
    gpus: Annotated[str | None, typer.Option("--gpus", help="GPU ids for GPU gates, e.g. 0,1.")] = None,
    python: Annotated[str | None, typer.Option("--python", help="Target environment's python.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Run even gates whose inputs passed before.")] = False,
    bench: Annotated[
        bool, typer.Option("--bench", help="Kernel gates: also run the benchmarks (never served from the cache).")
    ] = False,
    executor: Annotated[
        ExecutorName | None,
        typer.Option("--executor", help="Where gates run (default: gates.executor in ds4sync.yaml)."),
    ] = None,
    address: Annotated[
        str | None, typer.Option("--address", help="The Ray cluster (default: gates.ray_address).")
    ] = None,
    merge_results: Annotated[
        list[Path] | None,
        typer.Option("--merge-results", help="Read results produced elsewhere (CI artefacts) into the run instead."),
    ] = None,
    json_out: opt.Json = False,
) -> None:
    """Run the gates of one tier on this checkout (or the active run's worktree, recording the results)."""
    from ds4sync.gates import render
    from ds4sync.gates.collect import run_of_worktree
    from ds4sync.gates.runner import TierOptions

    ws = where.open()
    record = ws.store.current()
    # In the worktree of a run that is no longer active (a failed run): the result is added to that run
    # when it proves the run's head (same commit and tree), else refused in one line.
    ended = run_of_worktree(ws.store, ws.repo.path) if record is None else None
    if merge_results:
        _merge_results(ws, record or ended, merge_results, json_out=json_out)
        return
    options = TierOptions(
        tier=tier.value,
        names=tuple(names or ()),
        changed_since=changed_since,
        run_all=all_gates,
        jobs=jobs,
        gpus=_gpu_ids(gpus) if gpus is not None else None,
        use_cache=not (no_cache or bench),
        python=python,
        bench=bench,
        executor=executor,
        address=address,
    )
    result, path = _run_tier_recorded(ws, record or ended, ended, options, tier=tier, json_out=json_out)
    code = ExitCode.OK if result else ExitCode.FAILED if result.status == "failed" else ExitCode.NEEDS_PERSON
    done(
        json_out,
        lambda: {**result.model_dump(mode="json"), "status": result.status, "green": bool(result), "record": path},
        exit_code=int(code),
        text=lambda: render.tier_table(out, result, record_path=path),
    )


@kernels_app.command("check")
def kernels_check(
    op: Annotated[
        list[KernelOp] | None,
        typer.Option("--op", help="An op to check (repeatable; default: all)."),
    ] = None,
    candidate: Annotated[
        str | None,
        typer.Option(
            "--candidate", help="module:function[@adapter] or deepgemm, checked instead of our kernels (one --op)."
        ),
    ] = None,
    bench: Annotated[bool, typer.Option("--bench", help="Also benchmark against the reference (GPU).")] = False,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            help="cuda or cpu (default: cuda if present; cpu runs the Triton interpreter on the small grid).",
        ),
    ] = None,
    profile: opt.Profile = None,
    json_out: opt.Json = False,
) -> None:
    """Check the DeepSeek ops (indexer logits, top-k, routing) against exact torch references."""
    from ds4sync.gates import kernelsuite

    ops = [o.value for o in op] if op is not None else None
    result = kernelsuite.run_kernel_suite(ops=ops, candidate=candidate, bench=bench, device=device, profile=profile)
    done(
        json_out,
        lambda: result.model_dump(mode="json"),
        exit_code=0 if result.ok else int(ExitCode.FAILED),
        text=lambda: _render_kernels(result),
    )


def _render_kernels(result) -> None:
    from rich.table import Table
    from rich.text import Text

    env = result.environment
    out.print(
        f"kernel suite on {env.gpu or env.device} (torch {env.torch}, triton {env.triton}, "
        f"{'interpreter, ' if env.interpreter else ''}grid {result.scale})"
    )
    table = Table("op", "implementation", "pass", "fail", "error", "skip")
    for op in result.ops:
        table.add_row(op.op, op.impl, *(str(op.count(s)) for s in ("pass", "fail", "error", "skip")))
    out.print(table)
    for op in result.ops:
        for case in op.cases:
            if case.status in ("fail", "error"):
                out.print(Text.assemble((f"{op.op} {case.name}: {case.status}", "red"), f": {case.detail}"))
    if result.bench:
        bench = Table("op", "case", "µs", "ref µs", "speed-up", "GB/s", "TFLOP/s", "% roofline", "flags")
        for r in result.bench:
            bench.add_row(
                r.op,
                r.case,
                f"{r.time_us:.1f}",
                f"{r.ref_time_us:.1f}",
                f"{r.speedup:.1f}x",
                f"{r.gb_per_s:.0f}",
                f"{r.tflop_per_s:.1f}",
                f"{r.pct_roof:.1%}",
                "; ".join(r.flags) or "ok",
            )
        out.print(bench)
    out.print(Text("kernels: ok", style="green") if result.ok else Text("kernels: FAILED", style="red"))


def _run_tier_recorded(
    ws: Workspace,
    record: RunRecord | None,
    ended: RunRecord | None,
    options: TierOptions,
    *,
    tier: Tier,
    json_out: bool,
) -> tuple[TierResult, str | None]:
    """Run the tier, into ``record`` when there is one (under the store's gate lock), and say where it was kept.

    ``ended`` is a run no longer active whose worktree this is: it takes only a result that proves its head.
    """
    import contextlib

    from ds4sync.gates import render
    from ds4sync.gates.collect import check_proof, run_head
    from ds4sync.gates.runner import run_tier, run_tier_in_run

    with ws.store.lock("gate") if record else contextlib.nullcontext():
        if record is not None:  # stored into the run; never beside a killed run's gate children
            record = ws.store.load(record.run_id)
        check = None
        if ended is not None:  # a run no longer active takes only a result that proves its head
            head, tree = run_head(ws.repo, ended)

            def check(result) -> None:
                check_proof(ended.worktree, result, run_id=ended.run_id, head=head, tree=tree)

        with contextlib.ExitStack() as stack:
            live = None if json_out else stack.enter_context(render.LiveGates(err, f"tier {tier}"))
            if record is not None:
                result = run_tier_in_run(ws, record, options, progress=live, say=_progress(json_out), check=check)
            else:
                result = run_tier(ws, options, progress=live)
        path = str(ws.store.record_path(record.run_id)) if record else None
    return result, path


def _merge_results(ws, record, paths: list[Path], *, json_out: bool) -> None:
    from ds4sync.gates.collect import check_proof, merge_into, read_results, run_head
    from ds4sync.runner import record_by_hand

    if record is None:
        fail(
            "no run to merge gate results into: no active run, and --repo is no run's worktree"
            " (start one with `ds4sync merge`, or pass --repo <the run's worktree>)"
        )
    found = read_results(paths)
    if not found:
        fail(f"no gate results in {', '.join(map(str, paths))}")
    head, tree = run_head(ws.repo, record)
    for file, result in found:  # every file proves the head, or nothing is merged
        check_proof(str(file), result, run_id=record.run_id, head=head, tree=tree)

    def merge(fresh) -> None:
        for _file, result in found:
            fresh.results.gates[result.tier] = merge_into(fresh.results.gates.get(result.tier), result)

    with ws.store.lock("gate --merge-results"):
        fresh = record_by_hand(ws, merge, run_id=record.run_id)
    if fresh is None:
        fail(f"run {record.run_id} is gone from the state folder: nothing merged")
    path = ws.store.record_path(fresh.run_id)
    merged = {t: r.status for t, r in fresh.results.gates.items()}
    done(
        json_out,
        {"merged": [str(f) for f, _ in found], "tiers": merged, "record": str(path)},
        text=lambda: out.print(f"merged {len(found)} result file(s) into {path}: {merged}", markup=False),
    )


def _gpu_ids(text: str) -> tuple[str, ...]:
    """``--gpus``: device indices or UUIDs as CUDA_VISIBLE_DEVICES takes them (``0,1``, ``GPU-...``, ``MIG-...``)."""
    ids = tuple(part.strip() for part in text.split(",") if part.strip())
    bad = [i for i in ids if not (i.isdigit() or i.startswith(("GPU-", "MIG-")))]
    if bad:
        from ds4sync.core.errors import ConfigError

        raise ConfigError(
            f"not a GPU id: {', '.join(repr(b) for b in bad)}",
            where="--gpus",
            fix="pass device indices or UUIDs separated by commas, e.g. --gpus 0,1 (see nvidia-smi -L)",
        )
    return ids
