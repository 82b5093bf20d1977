"""The replay and verify phases' record entries (the run record holds them typed).

Apart from :mod:`ds4sync.patchsets.replay` so that the record can name them without
importing the phases that write them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from ds4sync.core.model import FrozenModel
from ds4sync.patchsets.check import CheckReport
from ds4sync.patchsets.invariants import InvariantResult

REPLAY_SCHEMA_VERSION = 1
ReplayStatus = Literal[
    "retained", "unconfirmed", "landed-upstream", "not-carried", "reapplied", "needs-adaptation", "adapted"
]


class ReplayEntry(FrozenModel):
    """What replay did with one patch-set.

    ``evidence``: upstream facts for landed-upstream; ``conflicted``/``rejects``: what a
    person must adapt; ``invariants``: the results that decided it.
    """

    id: str
    title: str
    status: ReplayStatus
    detail: str
    commit: str | None = None
    evidence: tuple[str, ...] = ()
    conflicted: tuple[str, ...] = ()
    rejects: tuple[str, ...] = ()
    invariants: tuple[InvariantResult, ...] = ()


class ReplayResult(FrozenModel):
    """The replay phase's record entry; ``pending`` names the patch-set waiting for a person."""

    schema_version: int = REPLAY_SCHEMA_VERSION
    patches_dir: str
    applicable: bool = True
    applies_detail: str = ""
    entries: tuple[ReplayEntry, ...] = ()
    pending: str | None = None

    def counts(self) -> dict[str, int]:
        """Patch-sets per replay status."""
        out: dict[str, int] = {}
        for entry in self.entries:
            out[entry.status] = out.get(entry.status, 0) + 1
        return out


class VerifyResult(CheckReport):
    """The verify phase's record entry: the check report plus its counts, and what it checked.

    ``commit`` is the sync worktree's HEAD it ran on; ``dirty`` the tracked paths that differed
    from that commit (then the check was not a check of the commit, and promote refuses it).
    """

    totals: dict[str, int] = Field(default_factory=dict)
    commit: str | None = None
    dirty: tuple[str, ...] = ()

    @classmethod
    def of(cls, report: CheckReport, *, commit: str | None = None, dirty: Sequence[str] = ()) -> VerifyResult:
        """Wrap a check report, freezing its counts into the JSON form."""
        return cls(**report.model_dump(), totals=report.counts(), commit=commit, dirty=tuple(dirty))
