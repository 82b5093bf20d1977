"""``ds4sync bisect`` and ``ds4sync sync --to-green``: which upstream commit broke the fork, and how far is green."""

from __future__ import annotations

from typing import Annotated

import typer

from ds4sync.cli import options as opt
from ds4sync.cli._app import _progress, app, done, out
from ds4sync.core.errors import ExitCode
from ds4sync.core.names import Tier

TierOpt = Annotated[
    Tier | None, typer.Option("--tier", help="Also run this gate tier on each step (needs a worktree per step).")
]
GoodOpt = Annotated[
    str | None, typer.Option("--good", help="Upstream commit known to hold (default: the last green sync).")
]


@app.command()
@opt.workspace("repo", "config", "branch", "state_dir", "profile")
def bisect(
    where: opt.Where = opt.HERE,
    good: GoodOpt = None,
    bad: Annotated[
        str | None, typer.Option("--bad", help="Upstream commit that breaks the fork (default: upstream.ref).")
    ] = None,
    tier: TierOpt = None,
    patchset: Annotated[
        list[str] | None, typer.Option("--patchset", help="Only this patch-set's invariants (repeatable).")
    ] = None,
    json_out: opt.Json = False,
) -> None:
    """Find the first upstream commit (first-parent) whose merge breaks the fork; name its PR and what broke."""
    from ds4sync.cli import views as ui
    from ds4sync.loop import bisect as bisect_mod

    ws = where.open()
    result = bisect_mod.run_bisect(
        ws,
        good=good,
        bad=bad,
        tier=tier.value if tier else None,
        patchsets=tuple(patchset or ()),
        progress=_progress(json_out),
    )
    code = ExitCode.NEEDS_PERSON if result.status == "ambiguous" else ExitCode.OK
    done(json_out, result.model_dump(mode="json"), exit_code=int(code), text=lambda: ui.bisect_result(out, result))


@app.command()
@opt.workspace("repo", "config", "branch", "state_dir", "profile")
def sync(
    target: Annotated[
        str | None, typer.Argument(help="Upstream ref or SHA to go at most to (default: upstream.ref).")
    ] = None,
    to_green: Annotated[
        bool, typer.Option("--to-green", help="Sync to the furthest first-parent upstream commit that holds.")
    ] = False,
    where: opt.Where = opt.HERE,
    good: GoodOpt = None,
    tier: TierOpt = None,
    json_out: opt.Json = False,
) -> None:
    """Sync the fork to TARGET; with --to-green, to the last upstream commit before the one that breaks it."""
    from ds4sync.cli.run import _finish
    from ds4sync.loop import bisect as bisect_mod
    from ds4sync.loop import sync as sync_mod

    ws = where.open()
    if not to_green:
        _finish(
            ws,
            sync_mod.start_merge(ws, target or ws.config.upstream.ref, progress=_progress(json_out)),
            json_out=json_out,
        )
        return
    outcome = bisect_mod.sync_to_green(
        ws, target, good=good, tier=tier.value if tier else None, progress=_progress(json_out)
    )
    _finish(ws, outcome, json_out=json_out)
