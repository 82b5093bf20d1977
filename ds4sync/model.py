"""The base of every config and result model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    """Immutable, and unknown keys are rejected (a typo in a file is an error, not a silent default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
