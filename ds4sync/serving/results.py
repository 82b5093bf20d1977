"""Result values of the serving tier: one per probe, one per gate run. JSON via model_dump."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ds4sync.core.model import FrozenModel

ProbeStatus = Literal["passed", "failed", "skipped"]
SCHEMA_VERSION = 1


class ProbeResult(FrozenModel):
    """One probe's numeric verdict.

    ``value`` and ``baseline`` are in ``unit``; ``summary`` is the report line
    (e.g. ``unchanged 9.63 GiB / 1,778,916 tokens``); ``details`` holds the evidence.
    """

    name: str
    status: ProbeStatus
    value: float | None = None
    baseline: float | None = None
    unit: str = ""
    summary: str = ""
    duration_s: float = 0.0
    details: dict[str, Any] = Field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.status != "failed"

    def brief(self) -> dict[str, Any]:
        """The documented JSON contract of ``ds4sync gate --tier serving --json``."""
        return {
            "name": self.name,
            "status": self.status,
            "value": self.value,
            "baseline": self.baseline,
            "unit": self.unit,
        }


class ServingResult(FrozenModel):
    """A serving gate run: the server it used, each probe's result, and why later probes were skipped.

    ``status`` is ``failed`` when the server did not start or any probe failed.
    """

    schema_version: int = SCHEMA_VERSION
    status: Literal["passed", "failed"]
    base_url: str
    started: bool = Field(description="ds4sync started the server (False: attached)")
    cold_boot_s: float | None = None
    server_log: str | None = None
    startup_error: str | None = None
    wedged: str | None = None
    probes: tuple[ProbeResult, ...] = ()

    def __bool__(self) -> bool:
        return self.status == "passed"

    def counts(self) -> dict[str, int]:
        """Probes per status."""
        out = {"passed": 0, "failed": 0, "skipped": 0}
        for probe in self.probes:
            out[probe.status] += 1
        return out
