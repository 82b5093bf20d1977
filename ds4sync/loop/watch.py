"""What the nightly does after the sync besides promote and deploy: move the last-green ref, watch drift.

Both add their lines to the night's notes (and to the run's record and report when a run took place):
``last green main: 1a2b3c4d5e6f -> 7a8b9c0d1e2f`` and, with ``nightly.drift``, one line per drift entry new
since the previous watch (``drift: #51234 will conflict in 2 files, violates sm120-sparse-attention``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ds4sync.core.errors import Ds4syncError
from ds4sync.runner import Workspace

if TYPE_CHECKING:
    from ds4sync.loop.sync import Progress
    from ds4sync.models.record import RunRecord


def watch_night(ws: Workspace, record: RunRecord | None, *, green: bool, progress: Progress | None = None) -> list[str]:
    """Move the last-green ref after a ``green`` night, then (``nightly.drift``) run drift; returns the notes.

    ``green`` is the nightly's own verdict on the run (nothing here decides what green is). The notes are also
    added to ``record`` and its report when a run took place.
    """
    notes: list[str] = []
    green_note = _last_green_note(ws, record) if green and record is not None else None
    if green_note:
        notes.append(green_note)
    if ws.config.nightly.drift:
        notes += _drift_notes(ws, progress)
    if notes and record is not None:
        from ds4sync.runner import update_run

        record.notes.extend(notes)
        update_run(ws, record, report=True)
    return notes


def _last_green_note(ws: Workspace, record: RunRecord) -> str:
    from ds4sync.loop.lastgreen import move_last_green, upstream_branch

    branch = upstream_branch(ws, record.upstream.branch)
    if branch is None:
        return f"last green: not moved ({record.upstream.ref} names no upstream branch)"
    tip = ws.repo.resolve_commit(f"refs/remotes/{ws.config.upstream.remote}/{branch}")
    try:
        move = move_last_green(ws, branch, record.upstream.sha, run_id=record.run_id, upstream_tip=tip)
    except Ds4syncError as exc:
        return f"last green {branch}: not moved ({exc.one_line()})"
    return move.line()


def _drift_notes(ws: Workspace, progress: Progress | None) -> list[str]:
    from ds4sync.drift.watch import run_drift

    try:
        result = run_drift(ws, progress=progress)
    except Ds4syncError as exc:
        return [f"drift: could not run ({exc.one_line()})"]
    lines = [f"drift: {line}" for line in result.new]
    if result.unfetched:
        lines.append(f"drift: {len(result.unfetched)} PR head(s) could not be fetched")
    return lines
