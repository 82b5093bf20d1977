"""A small OpenAI-compatible HTTP client (httpx) whose failures are values, not surprises.

Every call returns a :class:`Reply` or raises :class:`RequestFailed` with a ``kind`` a probe
can score: ``timeout``, ``connect``, ``http`` (status >= 400), ``malformed`` (not JSON, or a
field the OpenAI schema promises is missing). Streaming calls measure TTFT and per-chunk
gaps (an ITL proxy). Only ``http://127.0.0.1``-style base URLs are ever built by ds4sync;
the client talks to whatever it is given.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

FailureKind = Literal["timeout", "connect", "http", "malformed", "deadline"]


class Deadline:
    """An overall limit on a series of requests: ``limit_s`` seconds from creation (None: no limit).

    Every request of a client that holds one waits at most the time left; once it has passed,
    requests fail at once with kind ``deadline``, so a probe of many requests cannot outlast it.
    """

    def __init__(self, limit_s: float | None) -> None:
        self.limit_s = limit_s
        self._end = None if limit_s is None else time.monotonic() + limit_s

    def remaining(self) -> float | None:
        """Seconds left (never negative), or None without a limit."""
        return None if self._end is None else max(0.0, self._end - time.monotonic())

    @property
    def expired(self) -> bool:
        """Whether the limit has passed."""
        left = self.remaining()
        return left is not None and left <= 0

    def clamp(self, timeout_s: float) -> float:
        """``timeout_s`` cut to the time left.

        Raises:
            RequestFailed: kind ``deadline`` when no time is left.
        """
        left = self.remaining()
        if left is None:
            return timeout_s
        if left <= 0:
            raise RequestFailed("deadline", f"the overall deadline of {self.limit_s:g} s has passed")
        return min(timeout_s, left)


class RequestFailed(Exception):
    """One request that did not give a usable answer; ``kind`` says how, ``status`` the HTTP status
    (kind ``http``) and ``server_message`` what the server said about it (its JSON error's
    ``message``, else the start of its body)."""

    def __init__(self, kind: FailureKind, message: str, *, status: int | None = None, server_message: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.server_message = server_message

    def brief(self) -> dict[str, Any]:
        """``{"kind", "status", "message"}``: the JSON form a probe result carries."""
        return {"kind": self.kind, "status": self.status, "message": self.server_message or str(self)}

    def line(self) -> str:
        """``HTTP 400 from POST /v1/chat/completions: <the server's message>`` or the transport failure."""
        if self.kind == "http":
            return f"{self}"
        return f"{self.kind}: {self}"


@dataclass(frozen=True)
class Reply:
    """One parsed chat/completion answer.

    Times are seconds; ``ttft_s`` and ``chunk_gaps_s`` are set for streamed calls only.
    """

    content: str
    reasoning: str | None
    finish_reason: str | None
    tool_calls: tuple[dict[str, Any], ...]
    prompt_tokens: int | None
    completion_tokens: int | None
    elapsed_s: float
    ttft_s: float | None = None
    chunk_gaps_s: tuple[float, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict)


class OpenAIClient:
    """Calls ``/health``, ``/v1/models``, ``/metrics``, chat and completions on one base URL.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000`` (no trailing ``/v1``).
        model: the served model name sent in every request.
        timeout_s: per-request limit in seconds (connect, read and write).
        deadline: an overall limit every request is cut to (see :class:`Deadline`).
        reasoning_fields: message fields that may carry reasoning, first non-empty wins
            (vLLM: ``reasoning``; older servers and DeepSeek's API: ``reasoning_content``).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        timeout_s: float = 120.0,
        deadline: Deadline | None = None,
        reasoning_fields: tuple[str, ...] = ("reasoning", "reasoning_content"),
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.deadline = deadline
        self.reasoning_fields = reasoning_fields
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s, trust_env=False)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> OpenAIClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, path: str, *, timeout_s: float | None = None) -> httpx.Response:
        """GET ``path``; any status is returned, transport failures raise RequestFailed."""
        return self._send("GET", path, timeout_s=timeout_s)

    def health(self, *, timeout_s: float | None = None) -> int:
        """The status code of ``GET /health``."""
        return self.get("/health", timeout_s=timeout_s).status_code

    def models(self, *, timeout_s: float | None = None) -> list[str]:
        """Model ids listed by ``GET /v1/models``."""
        data = _json(self._ok(self.get("/v1/models", timeout_s=timeout_s)))
        try:
            return [str(item["id"]) for item in data["data"]]
        except (KeyError, TypeError) as exc:
            raise RequestFailed("malformed", f"/v1/models: no data[].id ({exc})") from exc

    def metrics_text(self, *, timeout_s: float | None = None) -> str:
        """The Prometheus text of ``GET /metrics``."""
        return self._ok(self.get("/metrics", timeout_s=timeout_s)).text

    def post_json(self, path: str, body: Mapping[str, Any], *, timeout_s: float | None = None) -> dict[str, Any]:
        """POST a JSON body and return the JSON object answered (status >= 400 raises ``http``)."""
        return _json(self._ok(self._send("POST", path, json_body=dict(body), timeout_s=timeout_s)))

    def complete(
        self,
        prompt: str,
        *,
        max_tokens: int = 1,
        timeout_s: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Reply:
        """``POST /v1/completions`` (temperature 0 unless ``extra`` says otherwise)."""
        body = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **(extra or {})}
        start = time.monotonic()
        data = _json(self._ok(self._send("POST", "/v1/completions", json_body=body, timeout_s=timeout_s)))
        choice = _first_choice(data)
        if "text" not in choice:
            raise RequestFailed("malformed", "/v1/completions: choices[0].text is missing")
        return _reply(str(choice.get("text") or ""), None, choice, data, time.monotonic() - start)

    def chat(
        self, messages: list[dict[str, Any]], *, timeout_s: float | None = None, extra: Mapping[str, Any] | None = None
    ) -> Reply:
        """``POST /v1/chat/completions``, not streamed; ``extra`` is merged into the body."""
        body = {"model": self.model, "messages": messages, **(extra or {})}
        start = time.monotonic()
        data = _json(self._ok(self._send("POST", "/v1/chat/completions", json_body=body, timeout_s=timeout_s)))
        choice = _first_choice(data)
        message = choice.get("message")
        if not isinstance(message, dict):
            raise RequestFailed("malformed", "/v1/chat/completions: choices[0].message is missing")
        reasoning = next((str(message[f]) for f in self.reasoning_fields if message.get(f)), None)
        tools = tuple(message.get("tool_calls") or ())
        reply = _reply(str(message.get("content") or ""), reasoning, choice, data, time.monotonic() - start)
        return Reply(**{**reply.__dict__, "tool_calls": tools})

    def chat_stream(
        self, messages: list[dict[str, Any]], *, timeout_s: float | None = None, extra: Mapping[str, Any] | None = None
    ) -> Reply:
        """Streamed chat: TTFT (first content or reasoning chunk) and gaps between chunks, in seconds."""
        body = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            **(extra or {}),
        }
        start = time.monotonic()
        parts: list[str] = []
        stamps: list[float] = []
        finish: str | None = None
        usage: dict[str, Any] = {}
        limit = self._limit(timeout_s)
        try:
            with self._http.stream("POST", "/v1/chat/completions", json=body, timeout=limit) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    self._ok(resp)
                for line in resp.iter_lines():
                    if not line.startswith("data:") or line.strip() == "data: [DONE]":
                        continue
                    event = _loads(line[5:], "stream chunk")
                    usage = event.get("usage") or usage
                    for choice in event.get("choices") or ():
                        delta = choice.get("delta") or {}
                        text = delta.get("content") or next(
                            (delta[f] for f in self.reasoning_fields if delta.get(f)), None
                        )
                        if text:
                            stamps.append(time.monotonic())
                            parts.append(str(delta.get("content") or ""))
                        finish = choice.get("finish_reason") or finish
        except httpx.TimeoutException as exc:
            raise RequestFailed("timeout", f"stream timed out after {time.monotonic() - start:.1f} s") from exc
        except httpx.TransportError as exc:
            raise RequestFailed("connect", f"stream broke: {exc}") from exc
        gaps = tuple(b - a for a, b in itertools.pairwise(stamps))
        return Reply(
            content="".join(parts),
            reasoning=None,
            finish_reason=finish,
            tool_calls=(),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            elapsed_s=time.monotonic() - start,
            ttft_s=(stamps[0] - start) if stamps else None,
            chunk_gaps_s=gaps,
        )

    def _limit(self, timeout_s: float | None) -> float:
        limit = timeout_s or self.timeout_s
        return self.deadline.clamp(limit) if self.deadline is not None else limit

    def _send(self, method: str, path: str, *, json_body: Any = None, timeout_s: float | None = None) -> httpx.Response:
        limit = self._limit(timeout_s)
        try:
            return self._http.request(method, path, json=json_body, timeout=limit)
        except httpx.TimeoutException as exc:
            if self.deadline is not None and self.deadline.expired:
                raise RequestFailed(
                    "deadline", f"{method} {path}: the overall deadline of {self.deadline.limit_s:g} s passed"
                ) from exc
            raise RequestFailed("timeout", f"{method} {path}: no answer within {limit:g} s") from exc
        except httpx.TransportError as exc:
            raise RequestFailed("connect", f"{method} {path}: {type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _ok(resp: httpx.Response) -> httpx.Response:
        if resp.status_code >= 400:
            said = server_message(resp.text)
            raise RequestFailed(
                "http",
                f"HTTP {resp.status_code} from {resp.request.method} {resp.request.url.path}: {said}",
                status=resp.status_code,
                server_message=said,
            )
        return resp


def server_message(body: str, limit: int = 300) -> str:
    """What an error answer says: the OpenAI-style ``{"error": {"message": ...}}`` (vLLM), a top-level
    ``message`` or ``detail``, else the body's start (``limit`` characters)."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:limit]
    if isinstance(data, dict):
        inner = data.get("error")
        for source in (inner if isinstance(inner, dict) else {}, data):
            for key in ("message", "detail"):
                if isinstance(source.get(key), str) and source[key]:
                    return source[key][:limit]
        if isinstance(inner, str) and inner:
            return inner[:limit]
    return body.strip()[:limit]


def _loads(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RequestFailed("malformed", f"{what} is not JSON: {text[:120]!r}") from exc
    if not isinstance(data, dict):
        raise RequestFailed("malformed", f"{what} is not a JSON object")
    return data


def _json(resp: httpx.Response) -> dict[str, Any]:
    return _loads(resp.text, f"{resp.request.url.path} answer")


def _first_choice(data: Mapping[str, Any]) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise RequestFailed("malformed", "answer has no choices[0]")
    return choices[0]


def _reply(
    content: str, reasoning: str | None, choice: Mapping[str, Any], data: Mapping[str, Any], elapsed_s: float
) -> Reply:
    usage = data.get("usage") or {}
    return Reply(
        content=content,
        reasoning=reasoning,
        finish_reason=choice.get("finish_reason"),
        tool_calls=(),
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        elapsed_s=elapsed_s,
        raw=dict(data),
    )
