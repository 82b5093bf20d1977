"""Move the fork branch, and the person's checkout of it, so that a kill at any step leaves a clean checkout.

With the fork branch checked out, moving it and the checkout cannot be one atomic step. Updating the
files first (``read-tree -u -m``) and the branch after leaves, if killed in between, the old HEAD with
the new tree staged: a checkout git calls dirty and the next promote refuses. Here every step is one git
command that git makes atomic, and between any two of them git sees a clean checkout:

1. the journal ``<state>/promote-journal.json`` (run, branch, old and new head, the checkout) is written;
2. the checkout goes to the new commit, detached (``git checkout --detach``: files, index and HEAD);
3. the branch moves, compare-and-swap (``git update-ref <branch> <new> <old>``);
4. the checkout's HEAD points at the branch again (``git symbolic-ref``), nothing else changes;
5. the journal is removed.

After a kill, :func:`recover` (run by ``promote`` and ``abort`` before anything else) finishes step 4
when the branch moved, or checks the branch out again at its old head when it did not.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from ds4sync.core import fault
from ds4sync.core.errors import GitError, StateError
from ds4sync.core.files import write_json_atomic
from ds4sync.core.git import GitRepo
from ds4sync.core.model import FrozenModel

JOURNAL = "promote-journal.json"


class ForkMove(FrozenModel):
    """One move of ``branch`` from ``old`` to ``new`` for run ``run_id``; ``holder`` is the checkout that has
    the branch checked out (None when no checkout has)."""

    run_id: str
    branch: str
    old: str
    new: str
    holder: str | None = None


def move_fork(repo: GitRepo, state: Path, move: ForkMove, *, message: str) -> None:
    """Fast-forward ``move.branch`` from ``move.old`` to ``move.new`` in ``repo``, and its clean checkout with it.

    Raises:
        GitError: git refused a step (the branch moved meanwhile, an untracked file in the checkout
            would be overwritten); what was done is undone, and the branch is where it was.
    """
    if move.holder is None:
        repo.update_ref(f"refs/heads/{move.branch}", move.new, message=message, expect=move.old)
        return
    holder = GitRepo(Path(move.holder))
    write_json_atomic(state / JOURNAL, move.model_dump(mode="json"))
    try:  # a Ctrl-C or a kill leaves the journal: the next command's recover() finishes or undoes
        holder.detach_at(move.new)  # git refuses before changing anything, e.g. for an untracked file
    except GitError:
        _clear(state)
        raise
    fault.point("promote.after-detach")
    try:
        repo.update_ref(f"refs/heads/{move.branch}", move.new, message=message, expect=move.old)
    except GitError:
        _back(holder, move)
        _clear(state)
        raise
    fault.point("promote.after-branch-move")
    holder.attach_to(move.branch)
    fault.point("promote.after-attach")
    _clear(state)


def recover(repo: GitRepo, state: Path) -> str | None:
    """Finish or undo a fork move a kill interrupted (see the module docstring); a line saying which, or None.

    Raises:
        StateError: the checkout was changed since (not where the move left it); nothing is touched.
    """
    move = _read(state)
    if move is None:
        return None
    if move.holder is None or not Path(move.holder).is_dir():
        _clear(state)
        return None
    holder = GitRepo(Path(move.holder))
    if holder.current_branch() is not None:  # before the detach, or after the attach: nothing half done
        _clear(state)
        return None
    head, branch_now = holder.head(), repo.resolve_commit(f"refs/heads/{move.branch}")
    if head != move.new or branch_now not in (move.old, move.new):
        raise StateError(
            f"a promote of run {move.run_id} was interrupted while moving the checkout of {move.branch}, "
            f"and it changed since (HEAD detached at {head[:12]}, {move.branch} at {str(branch_now)[:12]})",
            where=move.holder,
            fix=f"`git checkout {move.branch}` there once its changes are safe, then remove {state / JOURNAL}",
        )
    if branch_now == move.new:
        holder.attach_to(move.branch)
        line = f"finished an interrupted promote: the checkout {move.holder} is on {move.branch} at {move.new[:12]}"
    else:
        _back(holder, move)
        line = f"undid an interrupted promote: the checkout {move.holder} is back on {move.branch} at {move.old[:12]}"
    _clear(state)
    return line


def _back(holder: GitRepo, move: ForkMove) -> None:
    """The checkout, detached at ``move.new``, back on ``move.branch`` at ``move.old`` (git's own checkout)."""
    holder.checkout_branch(move.branch)


def _read(state: Path) -> ForkMove | None:
    path = state / JOURNAL
    try:
        return ForkMove.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StateError(
            f"the promote journal cannot be read ({exc})",
            where=str(path),
            fix="check the fork branch's checkout with `git status`, then remove the file",
        ) from exc


def _clear(state: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (state / JOURNAL).unlink()
