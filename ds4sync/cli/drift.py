"""``ds4sync drift``: which open upstream PRs will conflict with the fork or break it, before they merge."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ds4sync.cli._app import (
    BranchOpt,
    ConfigOpt,
    JsonOpt,
    ProfileOpt,
    RepoOpt,
    StateOpt,
    _progress,
    _workspace,
    app,
    done,
    out,
)
from ds4sync.core.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from ds4sync.drift.results import DriftResult


@app.command()
def drift(
    repo: RepoOpt = Path("."),
    config: ConfigOpt = None,
    branch: BranchOpt = None,
    state_dir: StateOpt = None,
    profile: ProfileOpt = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many open PRs.")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", help="Only PRs with this label (repeatable).")] = None,
    updated_since: Annotated[
        str | None, typer.Option("--updated-since", help="Only PRs updated since this date (YYYY-MM-DD or ISO time).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Merge each open upstream PR three-way into the fork (from objects): conflicts, violated invariants, ranked."""
    from ds4sync.drift.watch import DriftOptions, run_drift

    if updated_since is not None and not _iso(updated_since):
        raise ConfigError(
            f"'{updated_since}' is not a date", where="--updated-since", fix="use YYYY-MM-DD or an ISO 8601 time"
        )
    ws = _workspace(repo, config, branch, state_dir, profile)
    options = DriftOptions(limit=limit, labels=tuple(label or ()), updated_since=updated_since)
    result = run_drift(ws, options, progress=_progress(json_out))
    done(json_out, result.model_dump(mode="json"), text=lambda: render(out, result))


def _iso(text: str) -> bool:
    from datetime import datetime

    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def render(console: Console, result: DriftResult) -> None:
    """The ranked table of flagged PRs, then the unfetched ones and a count of the quiet ones."""
    from rich.table import Table

    console.print(
        f"drift: {result.listed} open PRs of {result.upstream_repo} against {result.fork_branch} "
        f"{result.fork_head[:12]} ({result.fork_files} fork files); {result.merges} merged, "
        f"{result.cache_hits} from cache, {result.seconds:.1f} s",
        markup=False,
    )
    table = Table(show_lines=False)
    for column in ("PR", "what", "files", "title", "author", "state", "labels", "updated"):
        table.add_column(column)
    for entry in result.entries:
        f, pull = entry.findings, entry.pull
        files = [f"{c.path} ({c.kind})" for c in f.conflicts] or list(f.fork_files)
        what = entry.line().split(" ", 1)[1]
        if f.violations:
            what += "".join(f"\n  {v.invariant}: {v.detail}" for v in f.violations)
        table.add_row(
            f"#{pull.number}",
            what,
            "\n".join(files),
            pull.title,
            pull.author,
            pull.state_words,
            ", ".join(pull.labels),
            pull.updated_at[:10],
        )
    if result.entries:
        console.print(table)
    for gone in result.unfetched:
        console.print(f"#{gone.number} {gone.title}: {gone.reason}", markup=False)
    console.print(f"{len(result.quiet)} PRs touch nothing of the fork", markup=False)
    if not result.semantic_check:
        console.print("semantic check: not installed (conflicts and invariants only)", markup=False)
