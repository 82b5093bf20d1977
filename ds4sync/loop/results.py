"""Result models of the loop's steps (promote), held typed by the run record."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class PromoteResult(BaseModel):
    """What promote did: old and new heads of the fork branch and the rollback ref."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    branch: str
    old_head: str
    new_head: str
    rollback_ref: str
    promoted_at: str
    worktree_updated: str | None = None
