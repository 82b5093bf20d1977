"""``ds4sync drift``: which open upstream PRs will conflict with the fork or break it, before they merge."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ds4sync.cli import options as opt
from ds4sync.cli._app import _progress, app, done, out
from ds4sync.core.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from ds4sync.models.drift_results import DriftResult


@app.command()
@opt.workspace("repo", "config", "branch", "state_dir", "profile")
def drift(
    where: opt.Where = opt.HERE,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many open PRs.")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", help="Only PRs with this label (repeatable).")] = None,
    updated_since: Annotated[
        str | None, typer.Option("--updated-since", help="Only PRs updated since this date (YYYY-MM-DD or ISO time).")
    ] = None,
    json_out: opt.Json = False,
) -> None:
    """Merge each open upstream PR three-way into the fork (from objects): conflicts, violated invariants, ranked."""
    from ds4sync.drift.watch import DriftOptions, run_drift

    if updated_since is not None and not _iso(updated_since):
        raise ConfigError(
            f"'{updated_since}' is not a date", where="--updated-since", fix="use YYYY-MM-DD or an ISO 8601 time"
        )
    ws = where.open()
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
    """The ranked PRs, one block each (what, title, author, state, labels, last update; files and invariants
    below), then the unfetched ones and a count of the quiet ones."""
    console.print(
        f"drift: {result.listed} open PRs of {result.upstream_repo} against {result.fork_branch} "
        f"{result.fork_head[:12]} ({result.fork_files} fork files); {result.merges} merged, "
        f"{result.cache_hits} from cache, {result.seconds:.1f} s",
        markup=False,
    )
    for entry in result.entries:
        f, pull = entry.findings, entry.pull
        labels = f"; {', '.join(pull.labels)}" if pull.labels else ""
        console.print(
            f"{entry.line()}: {pull.title} ({pull.author}; {pull.state_words}{labels}; updated {pull.updated_at[:10]})",
            markup=False,
        )
        details = [f"{c.path} ({c.kind})" for c in f.conflicts]
        details += [f"{v.patchset} / {v.invariant}: {v.detail}" for v in f.violations]
        details += list(f.semantic or ())
        if not details:
            details = [f"touches {p}" for p in (*f.fork_files, *(f"patch-set {i}" for i in f.patchsets))]
        for line in details:
            console.print(f"    {line}", markup=False)
    for gone in result.unfetched:
        console.print(f"#{gone.number} {gone.title}: {gone.reason}", markup=False)
    console.print(f"{len(result.quiet)} PRs touch nothing of the fork", markup=False)
    if not result.semantic_check:
        console.print("semantic check: not installed (conflicts and invariants only)", markup=False)
