"""KV-cache capacity: read it from the server, compare it with a baseline, say it in one line.

Sources, in order: the ``vllm:cache_config_info`` info gauge (labels ``kv_cache_size_tokens``
and ``kv_cache_memory_bytes``; ``vllm/v1/metrics/loggers.py``), then the server log lines
``GPU KV cache size: 1,778,916 tokens`` (``CPU`` on the CPU backend;
``vllm/v1/core/kv_cache_utils.py``) and ``Available KV cache memory: 9.63 GiB``
(``vllm/v1/worker/gpu_worker.py``).
"""

from __future__ import annotations

import re
import time

from ds4sync.core.model import FrozenModel
from ds4sync.models.serving_results import ProbeResult
from ds4sync.models.serving_settings import KvBaseline
from ds4sync.serving.client import OpenAIClient, RequestFailed
from ds4sync.serving.metrics import cache_info, parse

GIB = 1024**3
_TOKENS_LINE = re.compile(r"(?:GPU|CPU|XPU|TPU)? ?KV cache size: ([\d,]+) tokens")
_MEMORY_LINE = re.compile(r"Available KV cache memory: ([\d.]+) GiB")


class KvCapacity(FrozenModel):
    """KV-cache capacity: tokens and bytes (either may be unknown) and where they were read."""

    tokens: int | None
    bytes: int | None
    source: str

    def render(self) -> str:
        """``9.63 GiB / 1,778,916 tokens`` (parts that are unknown are left out)."""
        parts = []
        if self.bytes is not None:
            parts.append(f"{self.bytes / GIB:.2f} GiB")
        if self.tokens is not None:
            parts.append(f"{self.tokens:,} tokens")
        return " / ".join(parts) or "unknown"


def from_metrics_text(text: str) -> KvCapacity | None:
    """Capacity from ``vllm:cache_config_info`` labels, or None when the gauge is absent."""
    labels = cache_info(parse(text))
    if not labels:
        return None
    tokens = _int(labels.get("kv_cache_size_tokens"))
    if tokens is None:
        blocks, size = _int(labels.get("num_gpu_blocks")), _int(labels.get("block_size"))
        tokens = blocks * size if blocks is not None and size is not None else None
    memory = _int(labels.get("kv_cache_memory_bytes"))
    if tokens is None and memory is None:
        return None
    return KvCapacity(tokens=tokens, bytes=memory, source="metrics:vllm:cache_config_info")


def from_log(text: str) -> KvCapacity | None:
    """Capacity from the server log's last ``KV cache size`` / ``Available KV cache memory`` lines."""
    tokens = _TOKENS_LINE.findall(text)
    memory = _MEMORY_LINE.findall(text)
    if not tokens and not memory:
        return None
    return KvCapacity(
        tokens=int(tokens[-1].replace(",", "")) if tokens else None,
        bytes=round(float(memory[-1]) * GIB) if memory else None,
        source="server log",
    )


def read_capacity(client: OpenAIClient, log_text: str | None) -> KvCapacity | None:
    """Capacity from /metrics, else from ``log_text`` (the live server's own log lines); merged when each
    knows a different half.

    The log is read only when /metrics answered: a server that does not answer proves nothing,
    and an old log describes an old server.

    Raises:
        RequestFailed: /metrics did not answer (connection, timeout, HTTP error).
    """
    text = client.metrics_text()
    try:
        found = from_metrics_text(text)
    except ValueError:
        found = None
    if (found is None or found.tokens is None or found.bytes is None) and log_text:
        logged = from_log(log_text)
        if logged and found:
            found = KvCapacity(
                tokens=found.tokens if found.tokens is not None else logged.tokens,
                bytes=found.bytes if found.bytes is not None else logged.bytes,
                source=f"{found.source} + {logged.source}",
            )
        found = found or logged
    return found


def compare(current: KvCapacity, baseline: KvBaseline) -> tuple[bool, str]:
    """Pass/fail and the report line: ``unchanged 9.63 GiB / 1,778,916 tokens`` or ``down 3.80% ...``.

    Fails when tokens or bytes dropped by more than ``baseline.tolerance_pct`` percent, or when a
    baselined quantity could not be read.
    """
    changes, ok = [], True
    for label, now, then in (("tokens", current.tokens, baseline.tokens), ("bytes", current.bytes, baseline.bytes)):
        if then is None:
            continue
        if now is None:
            return False, f"{label} not readable from the server (baseline {then:,})"
        pct = 100.0 * (now - then) / then if then else 0.0
        if pct < -baseline.tolerance_pct:
            ok = False
        if now != then:
            changes.append(pct)
    if baseline.tokens is None and baseline.bytes is None:
        return True, f"{current.render()} (no baseline)"
    if not changes:
        return ok, f"unchanged {current.render()}"
    worst = min(changes)
    word = "down" if worst < 0 else "up"
    was = KvCapacity(tokens=baseline.tokens, bytes=baseline.bytes, source="baseline").render()
    return ok, f"{word} {abs(worst):.2f}% {current.render()} (baseline {was})"


def probe_kv_capacity(
    client: OpenAIClient, log_text: str | None, baseline: KvBaseline, *, dead: str | None = None
) -> ProbeResult:
    """The KV-capacity probe: value = tokens (bytes in details), baseline = baseline tokens.

    ``log_text`` is the live server's own log (None when attached); ``dead`` says why the server is
    known to be gone (the probe then fails without reading anything).
    """
    start = time.monotonic()
    if dead:
        return _kv_failed(f"server not running ({dead}); KV capacity not read", baseline, start)
    try:
        current = read_capacity(client, log_text)
    except RequestFailed as exc:
        return _kv_failed(f"server did not answer /metrics ({exc.kind}: {exc})", baseline, start)
    if current is None:
        return ProbeResult(
            name="kv_capacity",
            status="failed",
            unit="tokens",
            baseline=_f(baseline.tokens),
            summary="KV cache capacity not found in /metrics or the server log",
            duration_s=time.monotonic() - start,
        )
    ok, line = compare(current, baseline)
    return ProbeResult(
        name="kv_capacity",
        status="passed" if ok else "failed",
        value=_f(current.tokens),
        baseline=_f(baseline.tokens),
        unit="tokens",
        summary=line,
        duration_s=time.monotonic() - start,
        details={
            "tokens": current.tokens,
            "bytes": current.bytes,
            "source": current.source,
            "baseline_bytes": baseline.bytes,
            "tolerance_pct": baseline.tolerance_pct,
        },
    )


def _kv_failed(reason: str, baseline: KvBaseline, start: float) -> ProbeResult:
    return ProbeResult(
        name="kv_capacity",
        status="failed",
        unit="tokens",
        baseline=_f(baseline.tokens),
        summary=reason,
        duration_s=time.monotonic() - start,
        details={"reason": reason},
    )


def _int(value: str | None) -> int | None:
    try:
        return int(float(value)) if value not in (None, "", "None") else None
    except ValueError:
        return None


def _f(value: int | None) -> float | None:
    return float(value) if value is not None else None
