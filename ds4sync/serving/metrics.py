"""vLLM ``/metrics``: parse with prometheus_client, diff counters, sample during a run.

Names are vLLM v1's (``vllm/v1/metrics/loggers.py``, ``vllm/v1/spec_decode/metrics.py``):
counters carry a ``_total`` suffix in the text format; ``vllm:kv_cache_usage_perc`` is a
gauge where 1.0 = 100 % (``vllm:gpu_cache_usage_perc`` on older servers: both are read);
``vllm:num_requests_running`` / ``vllm:num_requests_waiting`` are the scheduler's gauges;
``vllm:cache_config_info`` is an info gauge whose labels include ``kv_cache_size_tokens``
and, on recent vLLM, ``kv_cache_memory_bytes``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pydantic import Field

from ds4sync.core.model import FrozenModel, updated

Key = tuple[str, tuple[tuple[str, str], ...]]

COUNTERS = {
    "prompt_tokens": "vllm:prompt_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
    "request_success": "vllm:request_success_total",
    "preemptions": "vllm:num_preemptions_total",
    "prefix_cache_queries": "vllm:prefix_cache_queries_total",
    "prefix_cache_hits": "vllm:prefix_cache_hits_total",
    "spec_decode_num_drafts": "vllm:spec_decode_num_drafts_total",
    "spec_decode_num_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "spec_decode_num_accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
}
KV_USAGE_NAMES = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
CACHE_INFO = "vllm:cache_config_info"


@dataclass(frozen=True)
class Snapshot:
    """One scrape: every sample keyed by (name, sorted labels), with its monotonic time in seconds."""

    at_s: float
    samples: Mapping[Key, float]
    labels_of: Mapping[str, tuple[Mapping[str, str], ...]] = field(default_factory=dict)

    def total(self, name: str) -> float | None:
        """Sum of a sample over all label sets (None when absent)."""
        values = [v for (n, _), v in self.samples.items() if n == name]
        return sum(values) if values else None


class MetricsSummary(FrozenModel):
    """Counter deltas and gauge extremes over a sampled window.

    ``deltas`` maps short names (``generation_tokens``, ...) to counter increases; a counter
    that went down (server restart) counts from 0. KV usage is in percent.
    """

    samples: int
    window_s: float
    deltas: dict[str, float]
    kv_usage_max_pct: float | None = None
    kv_usage_mean_pct: float | None = None
    kv_usage_metric: str | None = None
    running_max: float | None = None
    waiting_max: float | None = None
    spec_acceptance_rate: float | None = None
    spec_acceptance_length: float | None = None
    max_gap_s: float | None = Field(
        default=None, description="longest time between answered scrapes, s: a stopped or starved server shows here"
    )


def parse(text: str, *, at_s: float | None = None) -> Snapshot:
    """Parse Prometheus text into a :class:`Snapshot`.

    Raises:
        ValueError: the text is not the Prometheus exposition format.
    """
    samples: dict[Key, float] = {}
    labels_of: dict[str, list[Mapping[str, str]]] = {}
    from prometheus_client.parser import text_string_to_metric_families  # only when metrics are read

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
            labels_of.setdefault(sample.name, []).append(dict(sample.labels))
    return Snapshot(
        at_s=time.monotonic() if at_s is None else at_s,
        samples=samples,
        labels_of={k: tuple(v) for k, v in labels_of.items()},
    )


def wait_idle(scrape: Callable[[], str], *, timeout_s: float, interval_s: float = 0.2) -> bool:
    """Poll ``scrape`` (the /metrics text) until the scheduler runs and queues no request; False at the deadline.

    Idle is ``vllm:num_requests_running`` and ``vllm:num_requests_waiting`` both 0 (summed over engines). A
    server that exposes neither gauge counts as idle: there is nothing to wait on. ``timeout_s`` 0 asks once.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        snapshot = parse(scrape())
        busy = [snapshot.total(name) for name in (RUNNING, WAITING)]
        if not any(busy):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def counter_delta(first: Snapshot, last: Snapshot, name: str) -> float | None:
    """``last - first`` of a counter summed over labels; a reset (negative) counts from 0."""
    a, b = first.total(name), last.total(name)
    if b is None:
        return None
    if a is None or b < a:
        return b
    return b - a


def cache_info(snapshot: Snapshot) -> dict[str, str] | None:
    """The labels of ``vllm:cache_config_info`` (first engine), or None when not exposed."""
    labels = snapshot.labels_of.get(CACHE_INFO)
    return dict(labels[0]) if labels else None


def summarize(snapshots: list[Snapshot]) -> MetricsSummary:
    """Deltas between the first and last snapshot, KV usage max/mean, spec-decode acceptance.

    Acceptance rate = Δaccepted / Δdraft tokens; mean acceptance length = 1 + Δaccepted / Δdrafts.
    """
    if not snapshots:
        return MetricsSummary(samples=0, window_s=0.0, deltas={})
    first, last = snapshots[0], snapshots[-1]
    deltas = {short: d for short, name in COUNTERS.items() if (d := counter_delta(first, last, name)) is not None}
    usage_name = next((n for n in KV_USAGE_NAMES if any(s.total(n) is not None for s in snapshots)), None)
    usage = [u * 100.0 for s in snapshots if usage_name and (u := s.total(usage_name)) is not None]
    running = [v for s in snapshots if (v := s.total(RUNNING)) is not None]
    waiting = [v for s in snapshots if (v := s.total(WAITING)) is not None]
    drafts, draft_tokens = deltas.get("spec_decode_num_drafts"), deltas.get("spec_decode_num_draft_tokens")
    accepted = deltas.get("spec_decode_num_accepted_tokens")
    rate = accepted / draft_tokens if accepted is not None and draft_tokens else None
    length = 1.0 + accepted / drafts if accepted is not None and drafts else None
    return MetricsSummary(
        samples=len(snapshots),
        window_s=last.at_s - first.at_s,
        deltas=deltas,
        kv_usage_max_pct=max(usage) if usage else None,
        kv_usage_mean_pct=sum(usage) / len(usage) if usage else None,
        kv_usage_metric=usage_name,
        running_max=max(running) if running else None,
        waiting_max=max(waiting) if waiting else None,
        spec_acceptance_rate=rate,
        spec_acceptance_length=length,
    )


class MetricsSampler:
    """Scrape ``/metrics`` every ``interval_s`` seconds on a thread while a block runs.

    ``fetch`` returns the Prometheus text (e.g. ``OpenAIClient.metrics_text``). Failed or
    unparsable scrapes are counted in ``errors`` and skipped; one scrape is always taken at
    start and at stop so short runs still get a delta.
    """

    def __init__(self, fetch: Callable[[], str], *, interval_s: float = 1.0) -> None:
        self._fetch = fetch
        self.interval_s = interval_s
        self.snapshots: list[Snapshot] = []
        self.errors: list[str] = []
        self.answered_at: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _scrape(self) -> None:
        try:
            self.snapshots.append(parse(self._fetch()))
            self.answered_at.append(time.monotonic())
        except Exception as exc:  # a failed scrape is data, never a crash of the run
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._scrape()

    def __enter__(self) -> MetricsSampler:
        self._scrape()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 30)
        with contextlib.suppress(Exception):
            self._scrape()

    def summary(self) -> MetricsSummary:
        """The summary of what was sampled so far, with the longest gap between answered scrapes."""
        gaps = [b - a for a, b in zip(self.answered_at, self.answered_at[1:], strict=False)]
        return updated(summarize(self.snapshots), max_gap_s=max(gaps) if gaps else None)
