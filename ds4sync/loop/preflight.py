"""What a night checks before it changes anything, in one function that ``nightly`` and ``config check`` share,
so that ``config check`` never says ok where the night refuses.

Each check is the one the run itself makes (the same verbs of :mod:`ds4sync.runner`, the same loaders), asked
without the network: the upstream ref's syntax, the fork branch (named, well formed, existing), a complete
clone, the gate files of the configured tiers and the patch-set catalogue of the profile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ds4sync.core.errors import Ds4syncError
from ds4sync.core.git import check_user_ref
from ds4sync.runner import require_branch, require_clone_complete

if TYPE_CHECKING:
    from ds4sync.runner import Workspace


def preflight(ws: Workspace, ref: str | None = None) -> list[Ds4syncError]:
    """Every problem that stops a night of ``ws`` syncing upstream ``ref`` (default ``upstream.ref``) before
    it changes anything, each as the error the night raises, in the order the night meets them (empty: it
    starts). Reads the repository and the profile; changes nothing, fetches nothing."""
    where = str(ws.repo.path)
    asked = ref or ws.config.upstream.ref
    checks: list[Callable[[], object]] = [
        lambda: check_user_ref(asked, what="upstream ref", where=where),
        lambda: _fork_branch(ws),
        lambda: require_clone_complete(ws.repo),
        lambda: _gate_files(ws),
        lambda: _catalogue(ws),
    ]
    problems: list[Ds4syncError] = []
    for check in checks:
        try:
            check()
        except Ds4syncError as exc:
            problems.append(exc)
    return problems


def require_preflight(ws: Workspace, ref: str | None = None) -> None:
    """Raise the first problem :func:`preflight` finds (nothing when the night may start).

    Raises:
        Ds4syncError: a ConfigError, GitError or StateError naming what, where and how to fix it.
    """
    problems = preflight(ws, ref)
    if problems:
        raise problems[0]


def _fork_branch(ws: Workspace) -> str:
    branch = require_branch(ws)
    check_user_ref(branch, what="fork branch", where=str(ws.repo.path))
    return ws.repo.branch_head(branch)


def _gate_files(ws: Workspace) -> None:
    from ds4sync.gates.tiers import load_tier

    settings, bisect = ws.config.gates, ws.config.nightly.bisect_tier
    for tier in dict.fromkeys((*settings.tiers, *settings.required_for_promote, *([bisect] if bisect else []))):
        load_tier(ws.profile, tier)


def _catalogue(ws: Workspace) -> None:
    from ds4sync.patchsets.model import load_catalogue

    load_catalogue(ws.profile / "patches")
