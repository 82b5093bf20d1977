"""The last green upstream commit, as a ref people and tools can pin: ``refs/ds4sync/last-green/<branch>``.

After a green night the nightly moves the ref to the upstream commit that night proved (and pushes it to the
publish remote when ``publish`` is configured). It only moves forward: to a descendant of where it stands. A
move to a commit that is not a descendant happens only with a reason, and the reason is kept: given by the
caller, or found here when upstream no longer contains the old commit (its branch was rewritten). Every move
(and every refusal) is kept in ``<state>/last-green/<branch>.json``, the source of its age for ``status``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from ds4sync.core.files import write_json_atomic
from ds4sync.core.model import FrozenModel, updated
from ds4sync.core.record import now_iso
from ds4sync.runner import Workspace

LAST_GREEN_PREFIX = "refs/ds4sync/last-green/"
MoveStatus = Literal["created", "moved", "unchanged", "kept", "moved-back"]


class LastGreenMove(FrozenModel):
    """One decision about the ref: ``kept`` when asked to go back without a reason (``reason`` says why not).

    ``pushed``: git's last line of the push to the publish remote, None when not pushed.
    """

    branch: str
    ref: str
    old: str | None
    new: str
    status: MoveStatus
    reason: str = ""
    run_id: str | None = None
    at: str
    pushed: str | None = None

    @property
    def moved(self) -> bool:
        """Whether the ref now points somewhere else."""
        return self.status in ("created", "moved", "moved-back")

    def line(self) -> str:
        """One line for the record's notes and the nightly notification."""
        old = self.old[:12] if self.old else "none"
        text = {
            "created": f"last green {self.branch}: {self.new[:12]}",
            "moved": f"last green {self.branch}: {old} -> {self.new[:12]}",
            "moved-back": f"last green {self.branch}: moved back {old} -> {self.new[:12]} ({self.reason})",
            "unchanged": f"last green {self.branch}: still {self.new[:12]}",
            "kept": f"last green {self.branch}: kept at {old}, not moved to {self.new[:12]} ({self.reason})",
        }[self.status]
        return text + (f"; pushed: {self.pushed}" if self.pushed else "")


class LastGreen(FrozenModel):
    """Where the ref stands: ``sha``, when it got there (``since``, ISO 8601) and from which run."""

    branch: str
    ref: str
    sha: str
    since: str | None = None
    run_id: str | None = None
    committed_at: str | None = None

    def age(self, now: datetime | None = None) -> str:
        """How long since the ref got there (or since the commit, without a recorded move), e.g. ``3 h``."""
        stamp = self.since or self.committed_at
        if not stamp:
            return "unknown"
        seconds = ((now or datetime.now(UTC)) - datetime.fromisoformat(stamp)).total_seconds()
        for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
            if seconds >= size:
                return f"{int(seconds // size)} {unit}"
        return f"{int(max(seconds, 0))} s"


def ref_name(branch: str) -> str:
    """``refs/ds4sync/last-green/<branch>`` (``branch`` as upstream names it, e.g. ``main``)."""
    return LAST_GREEN_PREFIX + branch


def _log_path(ws: Workspace, branch: str) -> Path:
    return ws.store.root / "last-green" / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', branch)}.json"


def moves(ws: Workspace, branch: str) -> list[LastGreenMove]:
    """Every recorded decision about ``branch``'s ref, oldest first (a damaged log reads as empty)."""
    path = _log_path(ws, branch)
    try:
        import json

        return [LastGreenMove.model_validate(item) for item in json.loads(path.read_text(encoding="utf-8"))]
    except (OSError, ValueError, ValidationError):
        return []


def move_last_green(
    ws: Workspace,
    branch: str,
    sha: str,
    *,
    run_id: str | None = None,
    reason: str | None = None,
    upstream_tip: str | None = None,
) -> LastGreenMove:
    """Move ``branch``'s last-green ref to ``sha`` (an upstream commit a green night proved).

    Forward (``sha`` descends from the ref) always; elsewhere only with ``reason``, or when ``upstream_tip``
    (upstream's branch now) no longer contains the old commit. Pushes a move to ``publish.remote`` when
    ``publish`` is configured, only if the remote ref is still where it was (a lease).
    """
    repo = ws.repo
    ref = ref_name(branch)
    old = repo.resolve_commit(ref)
    status: MoveStatus
    why = reason or ""
    if old is None:
        status = "created"
    elif old == sha:
        status = "unchanged"
    elif repo.is_ancestor(old, sha):
        status = "moved"
    elif reason:
        status = "moved-back"
    elif upstream_tip and not repo.is_ancestor(old, upstream_tip):
        status, why = "moved-back", f"upstream {branch} no longer contains {old[:12]}: its history was rewritten"
    else:
        status, why = "kept", f"{sha[:12]} does not descend from {old[:12]}; never moved back without a reason"
    move = LastGreenMove(
        branch=branch, ref=ref, old=old, new=sha, status=status, reason=why, run_id=run_id, at=now_iso()
    )
    if move.moved:
        repo.update_ref(ref, sha, message=f"ds4sync last green: {move.line()}")
        move = updated(move, pushed=_push(ws, ref, sha))
    if status != "unchanged":
        write_json_atomic(_log_path(ws, branch), [m.model_dump(mode="json") for m in [*moves(ws, branch), move]])
    return move


def _push(ws: Workspace, ref: str, sha: str) -> str | None:
    publish = ws.config.publish
    if publish is None or ws.repo.remote_url(publish.remote) is None:
        return None
    from ds4sync.core.errors import Ds4syncError

    try:
        there = ws.repo.remote_head(publish.remote, ref)
    except Ds4syncError as exc:
        return f"not pushed: {exc.one_line()}"
    pushed, line = ws.repo.push(publish.remote, sha, ref, expect=there)
    return f"{publish.remote} {line}" if pushed else f"not pushed: {line}"


def last_green(ws: Workspace, branch: str) -> LastGreen | None:
    """Where ``branch``'s last-green ref stands, with when it got there; None when there is no such ref."""
    ref = ref_name(branch)
    sha = ws.repo.resolve_commit(ref)
    if sha is None:
        return None
    landed = next((m for m in reversed(moves(ws, branch)) if m.moved and m.new == sha), None)
    committed = ws.repo.committer_date(sha)
    return LastGreen(
        branch=branch,
        ref=ref,
        sha=sha,
        since=landed.at if landed else None,
        run_id=landed.run_id if landed else None,
        committed_at=committed or None,
    )


def upstream_branch(ws: Workspace, recorded: str | None) -> str | None:
    """The upstream branch a run's SHA stands for: the record's, else ``upstream.ref`` when it names a branch."""
    from ds4sync.core.git import SHA_RE

    ref = recorded or ws.config.upstream.ref
    if not ref or SHA_RE.match(ref) or ref.startswith("refs/tags/"):
        return None
    return ref.removeprefix("refs/heads/").removeprefix(f"{ws.config.upstream.remote}/")
