"""``ds4sync conflicts``: every conflict hunk with its three texts, its provenance, and whether the shared
store or a path rule has an answer, in one place for a person or an agent."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ds4sync.cli import options as opt
from ds4sync.cli._app import app, done, out
from ds4sync.core.errors import StateError


@app.command()
@opt.workspace("repo", "config", "branch", "state_dir")
def conflicts(
    ref: Annotated[
        str | None, typer.Argument(help="Upstream ref to plan against (default: the run's recorded merge).")
    ] = None,
    where: opt.Where = opt.HERE,
    run: opt.Run = None,
    fetch: opt.Fetch = False,
    json_out: opt.Json = False,
) -> None:
    """Show each conflict hunk: base, fork and upstream text, who changed it, and what already answers it."""
    from ds4sync.merge.rerere import ResolutionStore
    from ds4sync.merge.resolvers import StoreResolver, known_answers

    ws = where.open()
    if ref is not None:
        from ds4sync.loop import sync

        summary = sync.plan(ws, ref, fetch=fetch, semantic=False)  # hunks only: no findings shown
    else:
        record = ws.store.resolve(run)
        if record.results.merge is None:
            raise StateError(
                f"run {record.run_id} has no merge result",
                where=record.worktree,
                fix="pass an upstream ref to plan one",
            )
        summary = record.results.merge
    store = StoreResolver.from_store(ResolutionStore(ws.resolutions_dir))
    rows: list[dict[str, Any]] = []
    for conflict in summary.conflicts:
        hunks = []
        for hunk in conflict.hunks:
            answers = known_answers(conflict.path, hunk, store=store, rules=ws.config.merge.rules)
            hunks.append(
                hunk.brief()
                | {"base": hunk.base, "fork": hunk.fork, "upstream": hunk.upstream, "answers": answers}
                | {"owners": [o.model_dump() for o in hunk.owners]}
            )
        rows.append({"path": conflict.path, "kind": conflict.kind, "resolution": conflict.resolution, "hunks": hunks})
    data = {
        "merge_base": summary.merge_base,
        "fork_sha": summary.fork_sha,
        "upstream_sha": summary.upstream_sha,
        "conflicts": rows,
    }

    done(json_out, data, text=lambda: _show(rows))


def _show(rows: list[dict[str, Any]]) -> None:
    """Each hunk as a heading (path, lines, PRs, patch-sets, answers) and its three texts."""
    from rich.rule import Rule
    from rich.syntax import Syntax

    if not rows:
        out.print("no conflicts")
    for row in rows:
        if not row["hunks"]:
            out.print(f"[bold]{row['path']}[/] ({row['kind']}): no hunks (git writes no markers for this kind)")
        for hunk in row["hunks"]:
            lines = hunk["lines"]
            prs = ", ".join(f"#{n}" for n in hunk["upstream_prs"]) or "none named"
            forks = ", ".join(f"{c['sha'][:10]} {c['subject']}" for c in hunk["fork_commits"]) or "-"
            owners = "; ".join(
                f"{o['patchset']} ({', '.join(o['matched_by'])}): {o['rationale']}" for o in hunk["owners"]
            )
            answers = ", ".join(f"{k}: {v}" for k, v in hunk["answers"].items() if v) or "none (a person, or a model)"
            out.print(
                Rule(f"{row['path']} hunk {hunk['index']} (merge-base lines {lines['base'][0]}+{lines['base'][1]})")
            )
            out.print(f"upstream PRs: {prs}", markup=False)
            out.print(f"upstream commits: {len(hunk['upstream_commits'])}; fork commits: {forks}", markup=False)
            out.print(f"patch-sets: {owners or '-'}", markup=False)
            out.print(f"answers: {answers}", markup=False)
            for side in ("base", "fork", "upstream"):
                out.print(f"--- {side}", markup=False)
                out.print(Syntax(hunk[side] or "(nothing)\n", "text", line_numbers=False))
