"""The vocabulary of a run's state: phase and run statuses, the two sides' refs, run ids.

The run record itself (:mod:`ds4sync.models.record`) holds each phase's typed result, so it sits
above the phases; what lives here is what every layer, core included, may use.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PhaseStatus = Literal["pending", "running", "done", "needs-person", "failed", "skipped"]
# running: a process works on it; paused: phases remain (`ds4sync resume` goes on);
# needs-person: a phase waits for a person; failed / done / aborted: finished.
RunStatus = Literal["running", "paused", "needs-person", "failed", "done", "promoted", "aborted"]
ACTIVE_STATUSES: frozenset[str] = frozenset({"running", "paused", "needs-person"})


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


class PhaseState(BaseModel):
    """Where one phase of a run stands."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    status: PhaseStatus = "pending"
    started_at: str | None = None
    finished_at: str | None = None
    pid: int | None = None
    attempts: int = 0
    message: str = ""
    start_commit: str | None = Field(default=None, description="sync worktree HEAD when this attempt started")


class UpstreamRef(BaseModel):
    """The upstream side of a run: remote, ref as asked, the SHA it resolved to."""

    model_config = ConfigDict(extra="forbid")

    remote: str
    url: str | None = None
    ref: str
    sha: str
    name: str | None = None
    branch: str | None = Field(default=None, description="upstream's branch the SHA stands for, e.g. main")
    resolved_from: str | None = Field(
        default=None, description="what the ref was read from, e.g. refs/remotes/upstream/main or a fetch"
    )


class ForkRef(BaseModel):
    """The fork side of a run: branch and its head before the run."""

    model_config = ConfigDict(extra="forbid")

    branch: str
    head_before: str
    name: str | None = None


def make_run_id(upstream_sha: str, *, when: datetime | None = None) -> str:
    """``YYYYMMDD-HHMMSS-<upstream sha 10>``: sortable and unique per second."""
    stamp = (when or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{upstream_sha[:10]}"
