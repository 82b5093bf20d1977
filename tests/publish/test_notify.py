"""The nightly notification, sent through apprise to a local HTTP endpoint (json:// and form:// on 127.0.0.1).

A real chat service cannot run here; the endpoint is a local HTTP server (pytest-httpserver)
that records what apprise posted, so the test reads the message exactly as a webhook gets it.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import yaml
from pytest_httpserver import HTTPServer

from ds4sync.core.errors import ExitCode
from ds4sync.loop.nightly import run_nightly
from ds4sync.models.publish_settings import NotifyConfig
from ds4sync.publish.notify import Notice, send, target_urls
from ds4sync.runner import open_workspace
from tests.scenarios import BRANCH, lines, make_pair


def endpoint(httpserver: HTTPServer, scheme: str = "json") -> str:
    return f"{scheme}://127.0.0.1:{httpserver.port}/hook"


def test_one_message_per_night_with_what_happened(tmp_path: Path, httpserver: HTTPServer) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"a.py": lines("fork")}])
    (pair.repo / "ds4sync.yaml").write_text(
        yaml.safe_dump(
            {
                "upstream": {"remote": "upstream", "ref": "main"},
                "fork": {"branch": BRANCH, "name": "acme/vllm"},
                "notify": {"urls": [endpoint(httpserver)], "title_prefix": "nightly-test"},
            }
        )
    )
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    ws = open_workspace(pair.repo)

    night = run_nightly(ws)  # a.py conflicts: the run waits for a person

    assert night.exit_code == ExitCode.NEEDS_PERSON
    assert len(httpserver.log) == 1
    sent = json.loads(httpserver.log[0][0].get_data(as_text=True))
    assert sent["title"] == "nightly-test nightly: acme/vllm needs a person"
    assert sent["type"] == "warning"
    message = sent["message"]
    assert "Needs a person:" in message and "phase resolve:" in message and "a.py" in message
    assert f"run {night.record.run_id}" in message
    record = ws.store.load(night.record.run_id)
    assert record.results.notify.sent is True
    # The next night: nothing moved, the run still waits; one message again (no new run).
    night = run_nightly(ws)
    assert night.exit_code == ExitCode.NEEDS_PERSON and len(httpserver.log) == 2
    assert "still waiting for a person" in json.loads(httpserver.log[1][0].get_data(as_text=True))["message"]


def test_quiet_skip_sends_nothing_unless_asked(tmp_path: Path, httpserver: HTTPServer) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    config = {"upstream": {"remote": "upstream", "ref": "main"}, "fork": {"branch": BRANCH}}
    path = pair.repo / "ds4sync.yaml"
    path.write_text(yaml.safe_dump({**config, "notify": {"urls": [endpoint(httpserver)]}}))
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    ws = open_workspace(pair.repo)
    first = run_nightly(ws)
    assert first.exit_code == ExitCode.OK and len(httpserver.log) == 1
    sent = json.loads(httpserver.log[0][0].get_data(as_text=True))
    assert sent["type"] == "success" and "- Merge: 1 upstream commit into fork" in sent["message"]
    assert run_nightly(ws).skipped and len(httpserver.log) == 1
    path.write_text(yaml.safe_dump({**config, "notify": {"urls": [endpoint(httpserver)], "on_skip": True}}))
    assert run_nightly(open_workspace(pair.repo)).skipped and len(httpserver.log) == 2


def test_form_endpoint_and_urls_from_the_environment(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    config = NotifyConfig(urls_env="TEST_NOTIFY")
    env = {"TEST_NOTIFY": f"{endpoint(httpserver, 'form')}, "}
    assert target_urls(config, env) == (endpoint(httpserver, "form"),)
    result = send(config, Notice(title="t", body="b", kind="failure"), env=env)
    assert result.sent and result.targets == 1
    form = parse_qs(httpserver.log[0][0].get_data(as_text=True))
    assert form["title"] == ["t"] and form["message"] == ["b"] and form["type"] == ["failure"]


@pytest.mark.parametrize("reply", [500, 404])
def test_a_refusing_endpoint_is_not_sent(httpserver: HTTPServer, reply: int) -> None:
    httpserver.expect_request("/hook", method="POST").respond_with_data("no", status=reply)
    result = send(NotifyConfig(urls=(endpoint(httpserver),), urls_env=None), Notice(title="t", body="b"))
    assert not result.sent and "refused" in result.message


def test_unknown_url_scheme_is_reported_not_raised() -> None:
    result = send(NotifyConfig(urls=("nosuchscheme://x",), urls_env=None), Notice(title="t", body="b"))
    assert not result.sent and result.invalid == 1 and result.message == "no valid apprise URL"
