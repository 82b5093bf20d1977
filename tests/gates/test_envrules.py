"""Environment-only rules match one failure's own text; the gated-model rule matches the hub's errors only.

The hub's errors are produced by the real libraries (huggingface_hub, httpx, requests) on
responses built in memory for huggingface.co URLs (no network), and a real 403 from a local
server on 127.0.0.1 stands for "any other 403".
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests
import yaml

from ds4sync.gates.definition import EnvFailureRule
from ds4sync.gates.envrules import HF_GATED, HF_GATED_RAISED, HF_GATED_RAISED_IN, classify, classify_startup
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
HF = "https://huggingface.co/meta-llama/Llama-3.2-1B/resolve/main/config.json"
RULE = EnvFailureRule(
    name="hf-gated-403",
    category="gated-model-403",
    pattern=HF_GATED,
    raised=HF_GATED_RAISED,
    raised_in=HF_GATED_RAISED_IN,
)


def _hub_error(code: int, error_code: str) -> str:
    import httpx2
    from huggingface_hub.utils import hf_raise_for_status

    response = httpx2.Response(code, headers={"X-Error-Code": error_code}, request=httpx2.Request("GET", HF))
    try:
        hf_raise_for_status(response)
    except Exception as exc:  # the library's own exception and message
        return f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    raise AssertionError("no error raised")


def _httpx_error(code: int, url: str) -> str:
    try:
        httpx.Response(code, request=httpx.Request("GET", url)).raise_for_status()
    except httpx.HTTPStatusError as exc:
        return f"httpx.HTTPStatusError: {exc}"
    raise AssertionError("no error raised")


def _requests_error(code: int, url: str) -> str:
    response = requests.models.Response()
    response.status_code, response.url, response.reason = code, url, "Forbidden" if code == 403 else "Unauthorized"
    try:
        response.raise_for_status()
    except requests.HTTPError as exc:
        return f"requests.exceptions.HTTPError: {exc}"
    raise AssertionError("no error raised")


@pytest.fixture
def local_403() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 answering 403 (stands for any non-hub server)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(403)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/models/x/config.json"
    server.shutdown()


@pytest.mark.parametrize(
    "make",
    [
        lambda: _hub_error(403, "GatedRepo"),
        lambda: _hub_error(401, "GatedRepo"),
        lambda: _httpx_error(403, HF),
        lambda: _requests_error(403, HF),
        lambda: _requests_error(403, "https://cdn-lfs.huggingface.co/repos/x/y"),
    ],
)
def test_the_hubs_own_errors_are_gated_model(make) -> None:
    text = make()
    assert classify([RULE], failure_text=text) is RULE, text
    traceback = f"{text}\n\n    def test_model():\n>       load()\n\n.venv/huggingface_hub/utils/_http.py:409: X"
    assert classify([RULE], failure_text=traceback) is RULE, "raised inside the hub's client"


@pytest.mark.parametrize(
    "make",
    [
        lambda: _hub_error(401, "RepoNotFound"),  # a mistyped model id: the repository does not exist
        lambda: _hub_error(404, "RepoNotFound"),
        lambda: _httpx_error(401, HF),
        lambda: _requests_error(401, "https://cdn-lfs.huggingface.co/repos/x/y"),
        lambda: "AssertionError: expected the warning, got: " + _hub_error(403, "GatedRepo").split(": ", 1)[1],
        lambda: "AssertionError: assert '403 Client Error: Forbidden for url: " + HF + "' in log",
        lambda: "E   ValueError: bad config\nE   (the hub said: Cannot access gated repo for url " + HF + ")",
    ],
)
def test_what_only_quotes_or_names_a_missing_repository_is_a_real_failure(make) -> None:
    """The exception type and where it was raised decide, not text anywhere in the failure."""
    text = make()
    assert classify([RULE], failure_text=text) is None, text


def test_a_hub_error_raised_outside_the_hubs_clients_is_a_real_failure() -> None:
    text = _hub_error(403, "GatedRepo") + "\n\ntests/test_fake_hub.py:12: GatedRepoError"
    assert classify([RULE], failure_text=text) is None


def test_a_403_from_any_other_server_is_a_real_failure(local_403: str) -> None:
    with pytest.raises(requests.HTTPError) as caught:
        requests.get(local_403, timeout=scaled(5)).raise_for_status()
    assert "403 Client Error" in str(caught.value)
    assert classify([RULE], failure_text=f"requests.exceptions.HTTPError: {caught.value}") is None
    with pytest.raises(httpx.HTTPStatusError) as caught_httpx:
        httpx.get(local_403, timeout=scaled(5)).raise_for_status()
    assert classify([RULE], failure_text=str(caught_httpx.value)) is None


@pytest.mark.parametrize("tier", ["unit", "gpu"])
def test_the_shipped_rule_is_the_hub_rule(tier: str) -> None:
    rules = yaml.safe_load((ROOT / "gates" / f"{tier}.yaml").read_text())["env_failures"]
    shipped = next(r for r in rules if r["name"] == "hf-gated-403")
    assert shipped["pattern"] == HF_GATED and shipped.get("where", "failure") == "failure"
    assert tuple(shipped["raised"]) == HF_GATED_RAISED and tuple(shipped["raised_in"]) == HF_GATED_RAISED_IN


def test_a_log_rule_never_classifies_one_test() -> None:
    log_rule = EnvFailureRule(name="net", category="network", pattern="Name or service not known", where="log")
    assert classify([log_rule], failure_text="Name or service not known") is None
    assert classify_startup([log_rule], log_text="...\nName or service not known\n") is log_rule
