"""Correctness probes against a live server: health, exact answers, tool call, reasoning routing.

Each probe takes an :class:`~ds4sync.serving.client.OpenAIClient` and its settings and returns a
:class:`~ds4sync.models.serving_results.ProbeResult` with a number. A request that got no answer (an HTTP
error such as a chat template's 400, a server-side exception's 500, a timeout, a broken connection)
is an ``error`` result naming the status and the server's message, never a wrong answer and never
an exception.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from ds4sync.models.serving_results import ProbeResult
from ds4sync.models.serving_settings import ExactCase, ReasoningCase, ToolCallCase
from ds4sync.serving.client import OpenAIClient, Reply, RequestFailed


def probe_health(client: OpenAIClient) -> ProbeResult:
    """``/health`` answers 200 and ``/v1/models`` lists the configured model (value 1 or 0)."""
    start = time.monotonic()
    try:
        status = client.health()
        models = client.models() if status == 200 else []
    except RequestFailed as exc:
        return request_error("health", exc, start)
    ok = status == 200 and client.model in models
    summary = f"health {status}; model {client.model!r} {'listed' if client.model in models else 'not listed'}"
    return ProbeResult(
        name="health",
        status="passed" if ok else "failed",
        value=1.0 if ok else 0.0,
        baseline=1.0,
        unit="ok",
        summary=summary,
        duration_s=time.monotonic() - start,
        details={"status_code": status, "models": models},
    )


def check_exact(case: ExactCase, content: str) -> bool:
    """Whether ``content`` meets the case: exact text after strip, or the pattern found by ``re.search``."""
    if case.expect is not None:
        return content.strip() == case.expect.strip()
    return re.search(case.pattern or "", content) is not None


def probe_exact(client: OpenAIClient, cases: Sequence[ExactCase]) -> ProbeResult:
    """Known-answer cases; value = cases answered exactly, baseline = number of cases.

    A case whose request failed is no wrong answer: the probe is then an ``error`` naming the first
    failure (HTTP status and the server's message) and how many cases got no answer.
    """
    start = time.monotonic()
    rows: list[dict[str, Any]] = []
    errors: list[RequestFailed] = []
    for case in cases:
        try:
            reply = client.chat(list(case.messages), extra=case.sampling)
            ok = check_exact(case, reply.content)
            rows.append(
                {"case": case.name, "ok": ok, "content": reply.content[:500], "finish_reason": reply.finish_reason}
            )
        except RequestFailed as exc:
            errors.append(exc)
            rows.append({"case": case.name, "ok": False, "error": exc.brief()})
    passed = sum(row["ok"] for row in rows)
    wrong = [row["case"] for row in rows if not row["ok"] and "error" not in row]
    summary = f"{passed}/{len(rows)} exact" + (f"; wrong: {', '.join(wrong)}" if wrong else "")
    if errors:
        summary = f"error: {errors[0].line()} ({len(errors)}/{len(rows)} case(s) got no answer); {summary}"
    return ProbeResult(
        name="exact",
        status="error" if errors else "passed" if rows and not wrong else "failed",
        value=float(passed),
        baseline=float(len(rows)),
        unit="cases",
        summary=summary,
        duration_s=time.monotonic() - start,
        details={"cases": rows, **({"error": errors[0].brief()} if errors else {})},
    )


def probe_tool_call(client: OpenAIClient, case: ToolCallCase) -> ProbeResult:
    """One structured tool call: expected function name, arguments valid JSON (and equal when given)."""
    start = time.monotonic()
    try:
        reply = client.chat(list(case.messages), extra={"tools": list(case.tools), **case.sampling})
    except RequestFailed as exc:
        return request_error("tool_call", exc, start)
    problems, call = _tool_problems(reply, case)
    return _checked(
        "tool_call",
        problems,
        passed=f"tool call {case.expect_name}({json.dumps(call.get('arguments'), sort_keys=True)})",
        failed="tool call wrong",
        start=start,
        details={"problems": problems, "call": call, "finish_reason": reply.finish_reason},
    )


def _checked(
    name: str, problems: list[str], *, passed: str, failed: str, start: float, details: dict[str, Any]
) -> ProbeResult:
    """A yes/no probe: ``passed`` (value 1.0 of baseline 1.0, unit ``ok``) when ``problems`` is empty, else
    failed with ``"<failed>: <problems joined>"``; ``start`` is its ``time.monotonic()`` start."""
    ok = not problems
    return ProbeResult(
        name=name,
        status="passed" if ok else "failed",
        value=1.0 if ok else 0.0,
        baseline=1.0,
        unit="ok",
        summary=passed if ok else f"{failed}: " + "; ".join(problems),
        duration_s=time.monotonic() - start,
        details=details,
    )


def _tool_problems(reply: Reply, case: ToolCallCase) -> tuple[list[str], dict[str, Any]]:
    if not reply.tool_calls:
        return [f"no tool_calls in the answer (content {reply.content[:80]!r})"], {}
    function = reply.tool_calls[0].get("function") or {}
    name, raw = function.get("name"), function.get("arguments")
    problems = [] if name == case.expect_name else [f"function {name!r}, expected {case.expect_name!r}"]
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
        if not isinstance(arguments, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        return [*problems, f"arguments are not valid JSON ({exc}): {str(raw)[:120]!r}"], {"name": name}
    if case.expect_arguments is not None and arguments != case.expect_arguments:
        problems.append(f"arguments {arguments}, expected {case.expect_arguments}")
    return problems, {"name": name, "arguments": arguments}


def probe_reasoning(client: OpenAIClient, case: ReasoningCase) -> ProbeResult:
    """With thinking on: a non-empty reasoning field (one of ``case.fields``) and a final answer in content."""
    start = time.monotonic()
    client_fields = client.reasoning_fields
    client.reasoning_fields = case.fields
    try:
        reply = client.chat(list(case.messages), extra=case.sampling)
    except RequestFailed as exc:
        return request_error("reasoning", exc, start)
    finally:
        client.reasoning_fields = client_fields
    problems = []
    if not (reply.reasoning or "").strip():
        problems.append(f"no reasoning in {'/'.join(case.fields)}")
    if not reply.content.strip():
        problems.append("empty content (final answer missing)")
    elif case.expect_pattern and not re.search(case.expect_pattern, reply.content):
        problems.append(f"content {reply.content[:80]!r} does not match {case.expect_pattern!r}")
    if "</think>" in reply.content or "<think>" in reply.content:
        problems.append("think tags leaked into content")
    return _checked(
        "reasoning",
        problems,
        passed=f"reasoning {len(reply.reasoning or '')} chars, final {len(reply.content)} chars",
        failed="routing wrong",
        start=start,
        details={"problems": problems, "content": reply.content[:300], "reasoning": (reply.reasoning or "")[:300]},
    )


def skipped(name: str, reason: str) -> ProbeResult:
    """A probe not run, with the reason."""
    return ProbeResult(name=name, status="skipped", summary=reason, details={"reason": reason})


def request_error(name: str, exc: RequestFailed, start: float) -> ProbeResult:
    """The ``error`` result of a probe whose request got no answer: ``error: HTTP 400 from POST ...: <message>``;
    ``details.error`` holds kind, status and the server's message."""
    return ProbeResult(
        name=name,
        status="error",
        value=0.0,
        baseline=1.0,
        unit="ok",
        summary=f"error: {exc.line()}",
        duration_s=time.monotonic() - start,
        details={"error": exc.brief(), "reason": f"error: {exc.line()}"},
    )
