"""Rich rendering of core results for the terminal. Only the CLI calls this module."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ds4sync.core.words import many
from ds4sync.loop.handoff import Handoff
from ds4sync.loop.handoff import shown as shown_paths
from ds4sync.models.merge_results import MergeSummary
from ds4sync.models.record import RunRecord
from ds4sync.runner import RunOutcome

if TYPE_CHECKING:
    from ds4sync.loop.bisect import BisectResult

MAX_ROWS = 40


def print_json(console: Console, data: Any) -> None:
    """One JSON object on stdout, nothing else."""
    console.file.write(json.dumps(data, indent=2, default=str) + "\n")


def merge_summary(console: Console, summary: MergeSummary, *, title: str) -> None:
    """Counts, conflicts (kind and resolution) and semantic overlaps as tables."""
    head = Table(title=title, show_header=False, box=None)
    source = f" (read from {summary.upstream_resolved_from})" if summary.upstream_resolved_from else ""
    head.add_row("upstream", summary.upstream_sha + source)
    head.add_row("fork", summary.fork_sha + (f" (head of {summary.fork_branch})" if summary.fork_branch else ""))
    head.add_row("merge-base", summary.merge_base)
    head.add_row("upstream commits", str(summary.upstream_commits))
    head.add_row("fork-only commits", str(summary.fork_commits))
    head.add_row(  # git diff --name-status --no-renames: a rename counts as the path it left and the one it made
        "paths changed", f"upstream {len(summary.upstream_files)}, fork {len(summary.fork_files)} (a rename counts two)"
    )
    head.add_row("conflicts", str(len(summary.conflicts)) + _kinds(summary))
    head.add_row("semantic overlaps", str(len(summary.overlaps)))
    if summary.merge_commit:
        head.add_row("merge commit", summary.merge_commit)
        head.add_row("remerge-diff paths", str(len(summary.remerge_diff_paths)))
    console.print(head)
    if summary.conflicts:
        table = Table(title="Conflicts")
        for column in ("path", "kind", "resolution", "upstream PRs", "patch-sets"):
            table.add_column(column)
        for conflict in summary.conflicts[:MAX_ROWS]:
            how: str = conflict.resolution or "-"
            if conflict.rule:
                how += f" ({conflict.rule})"
            if conflict.proposal:
                how += f" ({conflict.proposal})"
            prs = ", ".join(dict.fromkeys(f"#{n}" for h in conflict.hunks for n in h.upstream_prs))
            owners = ", ".join(dict.fromkeys(o.patchset for h in conflict.hunks for o in h.owners))
            table.add_row(conflict.path, conflict.kind, how, prs or "-", owners or "-")
        _more(table, len(summary.conflicts))
        console.print(table)
    if summary.overlaps:
        table = Table(title="Semantic overlaps: changed on both sides, merged without conflict")
        for column in ("path", "upstream lines", "fork lines"):
            table.add_column(column, justify="right" if "lines" in column else "left")
        ranked = sorted(summary.overlaps, key=lambda o: -(o.upstream_lines + o.fork_lines))
        for overlap in ranked[:MAX_ROWS]:
            table.add_row(overlap.path, str(overlap.upstream_lines), str(overlap.fork_lines))
        _more(table, len(summary.overlaps))
        console.print(table)


def run_outcome(console: Console, outcome: RunOutcome, *, record_path: str) -> None:
    """Where a run stopped: status, the last phase's message, details and next steps."""
    record = outcome.record
    style = {"done": "green", "promoted": "green", "paused": "green", "needs-person": "yellow", "failed": "red"}.get(
        record.status, ""
    )
    console.print(Text(f"run {record.run_id}: {record.status}", style=f"bold {style}".strip()))
    if outcome.outcome is not None:
        if outcome.outcome.message:
            console.print(f"  {outcome.last_phase}: {outcome.outcome.message}")
        for line in outcome.outcome.details:
            console.print(f"    {line}")
        for step in outcome.outcome.next_steps:
            console.print(f"  next: {step}")
    console.print(f"  worktree: {record.worktree}")
    console.print(f"  record: {record_path}")


def run_status(
    console: Console,
    record: RunRecord,
    *,
    record_path: str,
    report_path: str | None = None,
    fork_head: str | None = None,
    interrupted: str | None = None,
    handoff: Handoff | None = None,
) -> None:
    """A run's phases and what to do next; ``report_path``: the run's written report, where there is one
    (a run that stopped failed or for a person gets one while its report phase stays pending); ``handoff``:
    the files waiting for a person, and what resume and promote would refuse."""
    shown = f"interrupted {interrupted}" if interrupted else record.status
    table = Table(title=f"run {record.run_id} ({shown})")
    for column in ("phase", "status", "message"):
        table.add_column(column)
    for name, state in record.phases.items():
        table.add_row(name, state.status, state.message)
    console.print(table)
    console.print(
        f"upstream {record.upstream.ref} @ {record.upstream.sha[:12]} -> {record.fork.branch} "
        f"@ {record.fork.head_before[:12]}"
    )
    for tier, result in record.results.gates.items():  # the same line the gate phase and the report print
        console.print(f"tier {tier}: {result.line()}", markup=False)
    for conflict in record.results.merge.conflicts if record.results.merge else ():
        if conflict.hunks:  # provenance: `ds4sync conflicts` shows the texts
            prs = ", ".join(dict.fromkeys(f"#{n}" for h in conflict.hunks for n in h.upstream_prs)) or "-"
            owners = ", ".join(dict.fromkeys(o.patchset for h in conflict.hunks for o in h.owners)) or "-"
            how = f"{conflict.resolution or 'unresolved'}{f' ({conflict.proposal})' if conflict.proposal else ''}"
            console.print(f"conflict {conflict.path}: {how}; upstream PRs {prs}; patch-sets {owners}", markup=False)
    gone = " (removed by the abort)" if record.status == "aborted" else ""
    absent = "" if (Path(record.worktree) / ".git").exists() else gone or " (not there)"
    console.print(f"worktree: {record.worktree}{absent}", markup=False)
    console.print(f"sync branch: {record.sync_branch}{gone and ' (deleted by the abort)'}", markup=False)
    console.print(f"backup: {record.backup_ref}", markup=False)
    console.print(f"record: {record_path}")
    if report_path:
        early = (
            ""
            if getattr(record.phases.get("report"), "status", None) == "done"
            else " (of the run as it stopped; the report phase has not run)"
        )
        console.print(f"report: {report_path}{early}", markup=False)
    if handoff is not None and handoff.waiting:
        console.print(f"waiting for a person: {shown_paths(handoff.waiting)}", markup=False)
    step = next_step(record, fork_head=fork_head, interrupted=interrupted, handoff=handoff)
    console.print(f"next: {step}", markup=False)


def run_row(record: RunRecord) -> dict[str, Any]:
    """One run as a row of ``status --all`` (also its JSON form)."""
    promoted = record.results.promote
    return {
        "run_id": record.run_id,
        "status": record.status,
        "branch": record.fork.branch,
        "upstream_ref": record.upstream.ref,
        "upstream_sha": record.upstream.sha,
        "created_at": record.created_at,
        "promoted_at": promoted.promoted_at if promoted else None,
    }


def run_list(console: Console, rows: list[dict[str, Any]]) -> None:
    """The runs of a repository, oldest first, as a table."""
    if not rows:
        console.print("no runs yet; start one with `ds4sync merge <upstream-ref>`")
        return
    table = Table(title=f"{len(rows)} run{'s' if len(rows) != 1 else ''}")
    widest = max((len(row["run_id"]) for row in rows), default=3)
    table.add_column("run", no_wrap=True, min_width=widest)  # whole: it is what --run takes
    for column in ("status", "fork branch", "upstream", "created"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["run_id"],
            row["status"],
            row["branch"],
            f"{row['upstream_ref']} @ {row['upstream_sha'][:12]}",
            row["created_at"],
        )
    console.print(table)


def next_step(
    record: RunRecord,
    *,
    fork_head: str | None = None,
    interrupted: str | None = None,
    handoff: Handoff | None = None,
) -> str:
    """The command a person should run next for this run; ``fork_head`` is the fork branch's SHA now (git's),
    which tells a done run whose promote moved the branch but was stopped before it recorded that;
    ``interrupted``: how a ``running`` run's process died (``RecordStore.interrupted``), None while it lives;
    ``handoff``: what resume and promote would refuse now (:func:`ds4sync.loop.handoff.handoff`), so that the
    step named is one they take."""
    stopped = record.status in ("failed", "paused", "needs-person") or (record.status == "running" and interrupted)
    unproven = handoff.unproven if handoff is not None else []
    if unproven and stopped:
        return (
            f"commit what the worktree has that no commit holds ({shown_paths(unproven)}), then `ds4sync resume` "
            "(it proves commits only), or `ds4sync abort`"
        )
    if record.status == "needs-person":
        return "resolve what is listed above in the worktree, then `ds4sync resume` (or `ds4sync abort`)"
    if record.status in ("running",):
        if interrupted:
            return f"the run was interrupted {interrupted}: `ds4sync resume` to go on, or `ds4sync abort`"
        return "wait for the running command (its process is alive), or `ds4sync abort` once it stops"
    if record.status == "paused":
        return "`ds4sync resume` to run the remaining phases"
    if record.status == "promoted":
        at = record.results.promote.promoted_at if record.results.promote else "?"
        return f"nothing: promoted at {at} ({record.fork.branch} is the merge)"
    if record.status == "done":
        return _done_step(record, fork_head, handoff.blockers if handoff else [], unproven)
    if record.status == "failed" and not (Path(record.worktree) / ".git").exists():
        return "fix what the failed phase reports, then `ds4sync resume` (it runs again), or `ds4sync abort`"
    if record.status == "failed":
        return "look at the failed phase, fix it in the worktree, then `ds4sync resume` (or `ds4sync abort`)"
    return "nothing: the run is finished"


def _done_step(record: RunRecord, fork_head: str | None, blockers: list[str], unproven: list[str]) -> str:
    """The next step of a finished run: promote, unless promote's own blockers say it would refuse."""
    proven = record.results.verify.commit if record.results.verify else None
    if fork_head is not None and fork_head == proven != record.fork.head_before:
        return (
            f"{record.fork.branch} already is the proven commit {proven[:12]}: a promote moved it and stopped before "
            "it recorded that; `ds4sync promote` records it (it moves nothing)"
        )
    if blockers:
        return (
            f"`ds4sync promote` would refuse: {'; '.join(blockers)}; fix and commit in the worktree, then "
            "`ds4sync resume` (or `ds4sync abort --yes`)"
        )
    if unproven:
        return (
            f"`ds4sync promote` to fast-forward the fork branch to the proven commit; it leaves behind what no commit "
            f"holds ({shown_paths(unproven)}): to prove that too, commit it and `ds4sync resume` first"
        )
    return "`ds4sync promote` to fast-forward the fork branch (or `ds4sync abort --yes` to drop it)"


def _kinds(summary: MergeSummary) -> str:
    kinds = summary.conflict_kinds()
    return f" ({', '.join(f'{k} {n}' for k, n in kinds.items())})" if kinds else ""


def _more(table: Table, total: int) -> None:
    if total > MAX_ROWS:
        table.caption = f"{total - MAX_ROWS} more in the record / --json"


def bisect_result(console: Console, result: BisectResult) -> None:
    """The culprit line, then every step taken (oldest candidate first), as a table."""
    ends = f" (good: {result.good_from}; bad {result.bad[:12]}: {result.bad_from})" if result.good_from else ""
    title = f"bisect: {many(result.candidates, 'upstream commit')} after {result.good[:12]}{ends}"
    table = Table(title=title, show_lines=False)
    for column in ("upstream commit", "PR", "verdict", "mode", "why"):
        table.add_column(column)
    for step in sorted(result.steps, key=lambda s: s.upstream_sha == result.bad):
        pr = f"#{step.pr}" if step.pr else ""
        verdict = step.verdict + (" (cached)" if step.cached else "")
        table.add_row(step.upstream_sha[:12], pr, verdict, step.mode, step.reason)
    console.print(table)
    console.print(
        f"{result.culprit_line()}\n{result.evaluations} evaluations (bound {result.bound}) in {result.seconds:.1f} s",
        markup=False,
    )
