"""Result values of the serving tier: one per probe, one per gate run, one per A/B and per backport
decision. JSON via model_dump.

Models only, apart from the code that produces them (``probes``, ``gate``, ``abstats``, ``ab``,
``backport``), so that the run record can name them without importing the client and the server.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field

from ds4sync.core.model import FrozenModel

#: ``error``: the probe's requests got no answer (HTTP error, server exception, timeout), so it measured nothing.
ProbeStatus = Literal["passed", "failed", "error", "skipped"]
StartupKind = Literal["ready", "died", "still-loading", "unreachable", "port-busy", "tool-missing"]
SCHEMA_VERSION = 2

Verdict = Literal["improvement", "neutral", "regression", "inconclusive"]
Direction = Literal["higher", "lower"]
Side = Literal["A", "B"]
Mode = Literal["recorded", "attached", "started-alternate", "started-both"]
#: The A/B statistic's defaults (see :mod:`ds4sync.models.serving_abstats`), recorded in every comparison.
MIN_PAIRS = 3
CONFIDENCE = 0.99
METHOD = "paired t on log ratios"


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
        return self.status not in ("failed", "error")

    @property
    def reason(self) -> str:
        """Why the probe failed or was skipped ('' when it passed)."""
        if self.status == "passed":
            return ""
        return str(self.details.get("reason") or self.summary)

    def brief(self) -> dict[str, Any]:
        """The documented JSON contract of a probe in ``serving gate --json``: numbers, summary and reason;
        an ``error`` (kind, HTTP status, the server's message) when a request failed; for bench rows every
        measured number (``rows``: name, ok, metrics with every percentile and the /metrics values)."""
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "value": self.value,
            "baseline": self.baseline,
            "unit": self.unit,
            "summary": self.summary,
            "reason": self.reason,
            "duration_s": round(self.duration_s, 3),
        }
        if isinstance(self.details.get("error"), dict):
            out["error"] = self.details["error"]
        if self.details.get("rows"):
            out["rows"] = [
                {"name": r.get("name"), "ok": r.get("ok"), "metrics": r.get("metrics") or {}}
                for r in self.details["rows"]
            ]
        return out


class ServingResult(FrozenModel):
    """A serving gate run: the server it used, how it started, each probe's result, and why later probes
    were skipped (``wedged``: the server stopped answering; ``deadline``: the overall limit passed).

    ``status`` is ``failed`` when the server did not start or any probe failed or erred, ``not-run`` when
    no probe ran (every one skipped, or none asked for): nothing was checked, so never ``passed``.
    """

    schema_version: int = SCHEMA_VERSION
    status: Literal["passed", "failed", "not-run"]
    base_url: str
    started: bool = Field(description="ds4sync started the server (False: attached)")
    cold_boot_s: float | None = None
    server_log: str | None = None
    startup_error: str | None = None
    wedged: str | None = None
    deadline_s: float | None = None
    deadline_passed: bool = False
    startup: StartupOutcome | None = None
    probes: tuple[ProbeResult, ...] = ()

    def __bool__(self) -> bool:
        return self.status == "passed"

    def counts(self) -> dict[str, int]:
        """Probes per status."""
        out = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
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
            "server_log": self.server_log,
            "counts": self.counts(),
            "probes": [p.brief() for p in self.probes],
        }


class MetricComparison(FrozenModel):
    """The A/B verdict of one metric; the JSON shape of ``ds4sync ab --json`` rows.

    Percentages are of the baseline. ``mean_delta_pct`` is the geometric mean of the per-pair
    ratios minus 1; the interval is of that, at ``confidence`` (already adjusted for
    the number of metrics judged together). ``reason`` says why the verdict is what it is;
    ``pairs_needed`` (inconclusive rows) how many pairs the measured spread would need to decide
    (None: more than 500, or a verdict was reached).
    """

    metric: str
    unit: str = ""
    direction: Direction = "higher"
    threshold_pct: float = 1.0
    pairs: int
    baseline_median: float
    candidate_median: float
    delta_pct: float = Field(description="candidate median vs baseline median, percent")
    mean_delta_pct: float = Field(description="geometric mean of the per-pair ratios, percent")
    ci_low_pct: float
    ci_high_pct: float
    confidence: float = CONFIDENCE
    method: str = METHOD
    verdict: Verdict
    reason: str = ""
    pairs_needed: int | None = None
    baseline: tuple[float, ...] = ()
    candidate: tuple[float, ...] = ()

    def brief(self) -> dict[str, object]:
        """The documented JSON contract of one row."""
        return {
            k: getattr(self, k)
            for k in (
                "metric",
                "unit",
                "direction",
                "pairs",
                "baseline_median",
                "candidate_median",
                "delta_pct",
                "mean_delta_pct",
                "ci_low_pct",
                "ci_high_pct",
                "confidence",
                "threshold_pct",
                "verdict",
                "reason",
                "pairs_needed",
            )
        }

    def line(self) -> str:
        """One report line, e.g. ``d.output_throughput: 292.7 vs 298.9 tok/s median (-2.1 %; mean ..., CI ...)``."""
        unit = f" {self.unit}" if self.unit else ""
        return (
            f"{self.metric}: {_num(self.candidate_median)}{unit} vs {_num(self.baseline_median)}{unit} median "
            f"({self.delta_pct:+.2f}%; mean {self.mean_delta_pct:+.2f}%, {100 * self.confidence:.4g}% CI "
            f"[{self.ci_low_pct:+.2f}%, {self.ci_high_pct:+.2f}%], {self.pairs} pairs): {self.verdict}"
            + (f" ({self.reason})" if self.reason else "")
        )


class StepRecord(FrozenModel):
    """One measured run: its place in the order, side, seed, how the prefix cache was handled, its values.

    ``pair`` is the pair it belongs to (the k-th A and k-th B runs form pair k); ``replaced`` marks a run
    whose pair was re-run (an outlier, :func:`ds4sync.models.serving_abstats.outlying_pairs`): it is kept, not
    judged; ``unreadable`` names the bench rows of the run that gave no readable result.
    """

    step: int
    side: Side
    pair: int | None = None
    replaced: bool = False
    unreadable: tuple[str, ...] = ()
    seed: int | None = None
    prefix_cache: str | None = None
    boot_s: float | None = None
    ok: bool = True
    detail: str = ""
    values: dict[str, float] = Field(default_factory=dict)


class ABResult(FrozenModel):
    """An A/B comparison: one row per judged metric, an overall verdict, and how it was measured.

    ``confidence`` is the family-wise level of the whole verdict; each row's interval is at
    ``row.confidence`` (Bonferroni over the judged metrics). ``lost`` counts requests each side
    lost; ``reported`` holds unjudged metrics' rows. ``error`` says why nothing could be measured
    (a server that did not start, a baseline that lost requests, a run without a readable result):
    then the verdict is no verdict, whatever the rows say. ``reruns`` names each pair re-run as an
    outlier and why.
    """

    schema_version: int = 2
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    baseline: str
    candidate: str
    mode: Mode = "recorded"
    pairs: int
    order: tuple[str, ...] = ()
    seed: int | None = None
    confidence: float = CONFIDENCE
    min_pairs: int = MIN_PAIRS
    method: str = METHOD
    verdict: Verdict
    reasons: tuple[str, ...] = ()
    lost: dict[str, float] = Field(default_factory=dict)
    rows: tuple[MetricComparison, ...]
    reported: tuple[MetricComparison, ...] = ()
    steps: tuple[StepRecord, ...] = ()
    notes: tuple[str, ...] = ()
    error: str | None = None
    reruns: tuple[str, ...] = ()

    @property
    def measured(self) -> bool:
        """Whether both sides were measured (no :attr:`error`)."""
        return self.error is None

    def brief(self) -> dict[str, Any]:
        """``ds4sync ab --json``: the overall verdict, pairs, order, seed, levels, every judged and reported row,
        and every measured run (its values: percentiles, /metrics, boot time)."""
        return {
            "verdict": self.verdict,
            "error": self.error,
            "reasons": list(self.reasons),
            "reruns": list(self.reruns),
            "baseline": self.baseline,
            "candidate": self.candidate,
            "mode": self.mode,
            "pairs": self.pairs,
            "order": list(self.order),
            "seed": self.seed,
            "confidence": self.confidence,
            "min_pairs": self.min_pairs,
            "method": self.method,
            "lost": self.lost,
            "rows": [row.brief() for row in self.rows],
            "reported": [row.brief() for row in self.reported],
            "steps": [step.model_dump(mode="json") for step in self.steps],
            "notes": list(self.notes),
        }

    def lines(self) -> list[str]:
        """Report lines, one per judged metric."""
        return [row.line() for row in self.rows]

    def summary(self) -> str:
        """``verdict: regression (6 pairs, 99% family-wise; candidate lost 2 of 16 requests)``, or
        ``could not measure: ...``."""
        why = "; ".join(self.reasons)
        if self.error:
            return f"could not measure: {self.error} ({self.pairs} pair(s) measured, {self.mode})"
        return (
            f"verdict: {self.verdict} ({self.pairs} pairs, {100 * self.confidence:g}% family-wise over "
            f"{len(self.rows)} metric(s), {self.mode}" + (f"; {why}" if why else "") + ")"
        )


class BackportDecision(FrozenModel):
    """Include or exclude, the measured reasons, and the evidence (A/B rows, KV change in percent).

    ``basis`` says what the decision rests on: ``measured`` (a verdict), ``undecided`` (the interval of a
    metric decided nothing: excluded, with the pairs it would need) or ``unmeasured`` (nothing could be
    measured: it did not apply, build or start, or the A/B was an error).
    """

    schema_version: int = 1
    upstream_sha: str
    base_sha: str | None = None
    candidate_sha: str | None = None
    decision: Literal["include", "exclude"]
    basis: Literal["measured", "undecided", "unmeasured"] = "measured"
    reasons: tuple[str, ...]
    kv_change_pct: float | None = None
    ab: ABResult | None = None
    patchset: str | None = None

    def line(self) -> str:
        """``<sha10> excluded: reason; reason`` as the report says it."""
        word = "included" if self.decision == "include" else "excluded"
        return f"{self.upstream_sha[:10]} {word}: {'; '.join(self.reasons)}"


def _num(value: float) -> str:
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
