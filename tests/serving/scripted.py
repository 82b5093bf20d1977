"""A scripted OpenAI-like HTTP server on 127.0.0.1 for protocol edge cases.

Each route maps ``(method, path)`` to a function ``(body: dict) -> Response``. A response
can be JSON, raw bytes (malformed answers), a status code, a stream of SSE chunks, or a
hang that lasts until the server is closed (the hang waits on an event, never a timer).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Response:
    """What the scripted server answers."""

    status: int = 200
    json_body: Any = None
    raw: bytes | None = None
    stream: list[dict[str, Any]] | None = None
    stream_gap_s: float = 0.0
    hang: bool = False


Handler = Callable[[dict[str, Any]], Response]


def chat_answer(
    content: str = "",
    *,
    reasoning: str | None = None,
    finish: str = "stop",
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning_field: str = "reasoning",
) -> Response:
    """A chat.completion JSON answer."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message[reasoning_field] = reasoning
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return Response(
        json_body={
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3},
        }
    )


@dataclass
class ScriptedServer:
    """The running server: ``url``, the ``routes`` it serves, and the requests it saw."""

    routes: dict[tuple[str, str], Handler]
    seen: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else {}
                server.seen.append((method, self.path, body))
                handler = server.routes.get((method, self.path))
                resp = handler(body) if handler else Response(status=404, json_body={"error": "no route"})
                self._write(resp)

            def _write(self, resp: Response) -> None:
                if resp.hang:
                    server.released.wait()
                    return
                if resp.stream is not None:
                    self.send_response(resp.status)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    for event in _events(resp):
                        self.wfile.write(event)
                        self.wfile.flush()
                    return
                payload = resp.raw if resp.raw is not None else json.dumps(resp.json_body).encode()
                self.send_response(resp.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _events(resp: Response) -> Iterator[bytes]:
    for i, chunk in enumerate(resp.stream or ()):
        if i and resp.stream_gap_s:
            time.sleep(resp.stream_gap_s)  # the server is slow on purpose; tests never wait on timers
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    yield b"data: [DONE]\n\n"


def healthy_routes(model: str = "m") -> dict[tuple[str, str], Handler]:
    """/health 200, /v1/models listing ``model``, a 1-token completion that answers."""
    return {
        ("GET", "/health"): lambda _b: Response(json_body={}),
        ("GET", "/v1/models"): lambda _b: Response(json_body={"data": [{"id": model}]}),
        ("POST", "/v1/completions"): lambda _b: Response(
            json_body={"choices": [{"text": "x", "finish_reason": "length"}]}
        ),
    }
