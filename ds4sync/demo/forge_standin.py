"""A stand-in for the few GitHub REST endpoints publishing uses, and a webhook that keeps what it got.

GitHub cannot be reached from the demo, so the demo's fork lives on a local HTTP server on
127.0.0.1 that answers like GitHub's REST API for one repository (list, create and update pull
requests, their commits, comments, labels) and records every request it received. The same
server takes the night's notification (apprise ``json://``) on ``/notify``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


@dataclass
class StandinState:
    """What the stand-in holds: the repository's pull requests, their comments, and every request seen."""

    repo: str
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    commits: dict[int, list[str]] = field(default_factory=dict)
    comments: dict[int, list[str]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    next_number: int = 50
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_pull(self, number: int, title: str, *, head: str, base: str, author: str, updated_at: str) -> None:
        """Seed an open pull request (someone else's work the duplicate-work check will see)."""
        self.pulls[number] = {
            "number": number,
            "title": title,
            "state": "open",
            "draft": False,
            "html_url": f"https://github.com/{self.repo}/pull/{number}",
            "user": {"login": author},
            "updated_at": updated_at,
            "head": {"ref": head, "repo": {"full_name": self.repo}},
            "base": {"ref": base},
            "body": "",
            "labels": [],
        }
        self.commits.setdefault(number, [])


class ForgeStandin:
    """The stand-in server; ``url`` is its API root (``http://127.0.0.1:PORT/``). Use as a context manager."""

    def __init__(self, repo: str) -> None:
        self.state = StandinState(repo=repo)
        handler = _handler(self.state)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The API root."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    @property
    def notify_url(self) -> str:
        """An apprise URL that posts the notification here as JSON."""
        return f"json://127.0.0.1:{self._server.server_address[1]}/notify"

    def __enter__(self) -> ForgeStandin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _handler(state: StandinState) -> type[BaseHTTPRequestHandler]:
    prefix = f"/repos/{state.repo}"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet: the demo prints its own lines
            return

        def _reply(self, status: int, data: Any) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            return json.loads(raw) if raw else None

        def _route(self, method: str) -> None:
            url = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            body = self._body()
            with state.lock:
                if url.path == "/notify":
                    state.notifications.append(body or {})
                    return self._reply(200, {"ok": True})
                state.requests.append({"method": method, "path": url.path, "query": query, "json": body})
                if self.headers.get("Authorization", "").split(" ")[0] not in ("token", "Bearer"):
                    return self._reply(401, {"message": "Requires authentication"})
                if not url.path.startswith(prefix):
                    return self._reply(404, {"message": "Not Found"})
                status, data = _answer(state, method, url.path[len(prefix) :], query, body)
            self._reply(status, data)

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

        def do_PATCH(self) -> None:
            self._route("PATCH")

    return Handler


def _answer(state: StandinState, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
    parts = [p for p in path.split("/") if p]
    if method == "GET" and parts == []:
        return 200, {"full_name": state.repo}
    if parts == ["pulls"]:
        return _pulls(state, method, query, body)
    number = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None
    if number is None or number not in state.pulls:
        return 404, {"message": "Not Found"}
    pull = state.pulls[number]
    if parts == ["pulls", str(number), "commits"]:
        return 200, [{"sha": sha} for sha in state.commits.get(number, [])]
    if parts == ["pulls", str(number)] and method == "PATCH":
        pull.update({k: v for k, v in (body or {}).items() if k in ("title", "body")})
        return 200, pull
    if parts == ["issues", str(number), "comments"] and method == "POST":
        state.comments.setdefault(number, []).append(body["body"])
        n = len(state.comments[number])
        return 201, {"html_url": f"https://github.com/{state.repo}/pull/{number}#issuecomment-{n}"}
    if parts == ["issues", str(number), "labels"] and method == "POST":
        pull["labels"] = sorted({*pull["labels"], *body["labels"]})
        return 200, [{"name": name} for name in pull["labels"]]
    return 404, {"message": "Not Found"}


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pulls(state: StandinState, method: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
    if method == "GET":
        pulls = [p for p in state.pulls.values() if p["state"] == "open"]
        if "head" in query:
            owner = state.repo.split("/")[0]
            pulls = [p for p in pulls if f"{owner}:{p['head']['ref']}" == query["head"]]
        page, per_page = int(query.get("page", 1)), int(query.get("per_page", 30))
        return 200, pulls[(page - 1) * per_page : page * per_page]
    if method != "POST":
        return 404, {"message": "Not Found"}
    if any(p["head"]["ref"] == body["head"] and p["state"] == "open" for p in state.pulls.values()):
        return 422, {
            "message": "Validation Failed",
            "errors": [{"message": f"A pull request already exists for {body['head']}."}],
        }
    number = state.next_number = state.next_number + 1
    state.add_pull(number, body["title"], head=body["head"], base=body["base"], author="ds4sync-bot", updated_at=_now())
    state.pulls[number].update(body=body["body"], draft=body.get("draft", False))
    return 201, state.pulls[number]
