"""Result values of the serving tier: one per probe, one per gate run. JSON via model_dump."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ds4sync.core.model import FrozenModel

ProbeStatus = Literal["passed", "failed", "skipped"]
StartupKind = Literal["ready", "died", "still-loading", "unreachable", "port-busy", "tool-missing", "interrupted"]
SCHEMA_VERSION = 2


class StartupOutcome(FrozenModel):
    """How the server's start (or attach) ended.

    ``kind`` ``ready`` or why not; ``ready_s`` the cold-boot seconds (start until /health 200 and
    the model listed); ``waited_s`` how long ds4sync waited; ``exit_code`` the process's code when
    it exited (negative: killed by that signal); ``process_state`` its /proc state letter while it
    ran; ``log_tail`` the server log's last lines; ``stop_exit_code`` the code after ds4sync stopped it.
    """

    started: bool
    url: str
    kind: StartupKind
    ready_s: float | None = None
    waited_s: float | None = None
    exit_code: int | None = None
    pid: int | None = None
    process_state: str | None = None
    message: str = ""
    log_path: str | None = None
    log_tail: tuple[str, ...] = ()
    stop_exit_code: int | None = None

    def brief(self) -> dict[str, Any]:
        """The JSON contract of ``serving gate --json``'s ``startup``."""
        return {
            "started": self.started,
            "kind": self.kind,
            "ready_s": self.ready_s,
            "waited_s": self.waited_s,
            "exit_code": self.exit_code,
            "message": self.message,
            "log_tail": list(self.log_tail),
        }


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

    @property
    def reason(self) -> str:
        """Why the probe failed or was skipped ('' when it passed)."""
        if self.status == "passed":
            return ""
        return str(self.details.get("reason") or self.summary)

    def brief(self) -> dict[str, Any]:
        """The documented JSON contract of a probe in ``serving gate --json``: numbers, summary and reason."""
        return {
            "name": self.name,
            "status": self.status,
            "value": self.value,
            "baseline": self.baseline,
            "unit": self.unit,
            "summary": self.summary,
            "reason": self.reason,
            "duration_s": round(self.duration_s, 3),
        }


class ServingResult(FrozenModel):
    """A serving gate run: the server it used, how it started, each probe's result, and why later probes
    were skipped (``wedged``: the server stopped answering; ``deadline``: the overall limit passed).

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
    deadline_s: float | None = None
    deadline_passed: bool = False
    interrupted: bool = False
    startup: StartupOutcome | None = None
    probes: tuple[ProbeResult, ...] = ()

    def __bool__(self) -> bool:
        return self.status == "passed"

    def counts(self) -> dict[str, int]:
        """Probes per status."""
        out = {"passed": 0, "failed": 0, "skipped": 0}
        for probe in self.probes:
            out[probe.status] += 1
        return out

    def brief(self) -> dict[str, Any]:
        """The JSON contract of ``serving gate --json``: status, start-up outcome, wedge and each probe."""
        return {
            "status": self.status,
            "base_url": self.base_url,
            "started": self.started,
            "cold_boot_s": self.cold_boot_s,
            "startup": self.startup.brief() if self.startup else None,
            "startup_error": self.startup_error,
            "wedged": self.wedged,
            "deadline_s": self.deadline_s,
            "deadline_passed": self.deadline_passed,
            "interrupted": self.interrupted,
            "server_log": self.server_log,
            "counts": self.counts(),
            "probes": [p.brief() for p in self.probes],
        }
