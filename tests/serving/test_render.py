"""Serving report lines: golden text from constructed results."""

from __future__ import annotations

from ds4sync.models.serving_results import ProbeResult, ServingResult
from ds4sync.serving.render import serving_lines, summary_line


def _result() -> ServingResult:
    return ServingResult(
        status="failed",
        base_url="http://127.0.0.1:8000",
        started=True,
        cold_boot_s=41.25,
        server_log="logs/server.log",
        probes=(
            ProbeResult(
                name="health", status="passed", value=1, baseline=1, unit="ok", summary="health 200; model 'ds4' listed"
            ),
            ProbeResult(name="exact", status="passed", value=1, baseline=1, unit="cases", summary="1/1 exact"),
            ProbeResult(
                name="kv_capacity",
                status="passed",
                value=1778916,
                baseline=1778916,
                unit="tokens",
                summary="unchanged 9.63 GiB / 1,778,916 tokens",
            ),
            ProbeResult(
                name="eval",
                status="failed",
                value=110,
                baseline=120,
                unit="correct",
                summary="110/120; 5 length caps, 5 incorrect",
            ),
            ProbeResult(name="recall", status="skipped", summary="skipped: server unresponsive"),
        ),
    )


def test_summary_line() -> None:
    assert summary_line(_result()) == (
        "cold boot 41.2 s; health 200; 1/1 exact; unchanged 9.63 GiB / 1,778,916 "
        "tokens; eval FAILED (110/120; 5 length caps, 5 incorrect)"
    )


def test_serving_lines() -> None:
    assert serving_lines(_result()) == [
        "serving failed: 3 passed, 1 failed, 1 skipped (http://127.0.0.1:8000; cold boot 41.2 s)",
        "health       passed   health 200; model 'ds4' listed",
        "exact        passed   1/1 exact",
        "kv_capacity  passed   unchanged 9.63 GiB / 1,778,916 tokens",
        "eval         failed   110/120; 5 length caps, 5 incorrect",
        "recall       skipped  skipped: server unresponsive",
        "server log: logs/server.log",
    ]
