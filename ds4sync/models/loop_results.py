"""Result models of the loop's steps (promote, deploy), held typed by the run record."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ds4sync.core.model import FrozenModel


class PromoteResult(BaseModel):
    """What promote did: old and new heads of the fork branch, the rollback ref, and what proved it.

    ``tree`` is the promoted commit's tree id; ``proven_by`` lists the tiers (``tier: N gates``)
    that passed on ``new_head``; ``ungated`` is True when it was promoted with ``--allow-ungated``
    and no tier proved it; ``overridden`` lists the blockers ``--allow-blockers`` promoted despite;
    ``left_behind``: paths the sync worktree had changed or untracked that no commit holds, so were not
    promoted (they stay in the worktree); ``completed_after_kill``: the branch had already moved before an
    interruption and this promote recorded it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    branch: str
    old_head: str
    new_head: str
    rollback_ref: str
    promoted_at: str
    worktree_updated: str | None = None
    tree: str | None = None
    proven_by: tuple[str, ...] = ()
    ungated: bool = False
    overridden: tuple[str, ...] = ()
    left_behind: tuple[str, ...] = ()
    completed_after_kill: bool = False


class StanzaPaths(FrozenModel):
    """What in a stanza points at a tree: the tree, the server binary, the cache folder."""

    tree: str
    binary: str
    cache: str | None = None


class StanzaSwitch(FrozenModel):
    """A switch of the llama-swap stanza ``model`` in the file ``config``, by the deploy of run ``run_id``."""

    model: str
    config: str
    run_id: str


class DeployResult(StanzaSwitch):
    """A switch of ``model`` in ``config`` from ``old`` paths to ``new``; ``flags`` serving flags checked equal."""

    old: StanzaPaths
    new: StanzaPaths
    flags: tuple[str, ...]
    previous_run: str | None = None
    deployed_at: str
