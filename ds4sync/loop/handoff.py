"""What a stopped run hands to a person, and what it takes back: the files waiting for them, the uncommitted
changes ``resume`` refuses to prove, and the next step as promote itself would judge it.

``status``, ``resume`` and ``nightly`` all ask here, so that none of them says one thing while another does
the opposite (a ``status`` that says "promote" for a run promote refuses).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ds4sync.core.errors import Ds4syncError, StateError
from ds4sync.core.git import GitRepo

if TYPE_CHECKING:
    from ds4sync.models.record import RunRecord
    from ds4sync.runner import Workspace

#: Phases that take a person's work from the worktree as it is (a merge being resolved, a patch-set being
#: adapted) and commit it themselves; after them, what a phase proves must be a commit.
TAKES_WORK = ("prepare", "merge", "resolve", "commit", "replay")
_SHOWN = 10


@dataclass(frozen=True)
class Handoff:
    """Where a run stands with its person: ``waiting`` files to fix (:func:`waiting_files`), ``unproven``
    changes ``resume`` refuses (:func:`unproven_changes`), ``blockers`` promote refuses on
    (:func:`promote_blockers`)."""

    waiting: list[str] = field(default_factory=list)
    unproven: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, list[str]]:
        """``{waiting_for_person, uncommitted, promote_blockers}``."""
        return {"waiting_for_person": self.waiting, "uncommitted": self.unproven, "promote_blockers": self.blockers}


def handoff(ws: Workspace, record: RunRecord) -> Handoff:
    """:class:`Handoff` of ``record`` now (reads the worktree and, for a finished run, promote's proof)."""
    return Handoff(waiting_files(record), unproven_changes(record), promote_blockers(ws, record))


def waiting_files(record: RunRecord) -> list[str]:
    """The files a person must fix before the run can go on, in the order the run met them: conflicts the
    resolve phase left unresolved, then the conflicted and rejected files and the files ``git apply`` left
    out of the patch-set replay waits on. Empty when nothing waits on a file."""
    files: list[str] = []
    merge = record.results.merge
    if merge is not None and _waits(record, "resolve"):
        files += [c.path for c in merge.conflicts if c.resolution in (None, "unresolved")]
    replay = record.results.replay
    if replay is not None and replay.pending and _waits(record, "replay"):
        for entry in replay.entries:
            if entry.id == replay.pending:
                files += [*entry.conflicted, *entry.rejects, *entry.not_applied]
    return list(dict.fromkeys(files))


def uncommitted(record: RunRecord) -> list[str]:
    """Paths of the run's sync worktree that no commit holds: tracked changes and files git neither tracks nor
    ignores (sorted); empty when the worktree is clean or gone."""
    path = Path(record.worktree)
    if not (path / ".git").exists():
        return []
    worktree = GitRepo(path)
    return sorted({*worktree.tracked_changes(), *worktree.untracked_paths()})


def unproven_changes(record: RunRecord) -> list[str]:
    """The worktree's paths no commit holds that ``resume`` refuses to prove (empty: it goes on).

    While a phase of :data:`TAKES_WORK` waits, the worktree's changes are the person's work and resume takes
    them. After that, a phase proves a commit: gates run on an uncommitted fix would prove a tree promote
    cannot move the fork branch to.
    """
    if any(_waits(record, name) for name in TAKES_WORK):
        return []
    return uncommitted(record)


def refuse_uncommitted(record: RunRecord) -> None:
    """Refuse to resume a run whose proving phases would run on changes no commit holds
    (:func:`unproven_changes`).

    Raises:
        StateError: the worktree has uncommitted or untracked files (named, with the commit to make).
    """
    changed = unproven_changes(record)
    if not changed:
        return
    raise StateError(
        f"run {record.run_id}: the sync worktree has changes no commit holds ({shown(changed)}); "
        "resume proves commits only",
        where=record.worktree,
        fix=f"commit them there (`git -C {record.worktree} add -A && git -C {record.worktree} commit`), "
        "then `ds4sync resume` runs the proving phases on the new commit",
    )


def shown(paths: list[str]) -> str:
    """``a, b, c and N more``: the first paths of a list, for one line."""
    return ", ".join(paths[:_SHOWN]) + (f" and {len(paths) - _SHOWN} more" if len(paths) > _SHOWN else "")


def promote_blockers(ws: Workspace, record: RunRecord) -> list[str]:
    """Why ``ds4sync promote`` would refuse ``record`` now: the blockers promote itself checks
    (:func:`ds4sync.loop.promote.blockers`), or the one line of the error that stops it reading them.
    Empty for a run that is not ``done`` (promote's question does not arise) or that promote would take."""
    if record.status != "done":
        return []
    from ds4sync.loop.promote import blockers

    try:
        return blockers(ws, record)
    except Ds4syncError as exc:
        return [exc.one_line()]


def _waits(record: RunRecord, phase: str) -> bool:
    state = record.phases.get(phase)
    return state is not None and state.status != "done"
