"""The publish phase against a stand-in for the GitHub REST API.

GitHub cannot run here, so a local HTTP server on 127.0.0.1 (pytest-httpserver) stands in for
it and asserts every request the phase makes: method, path, query and JSON body, the token
header, and the order. Git is real: the fork's remote is a bare repository in tmp_path.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import git
import pytest
import yaml
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from ds4sync.cli import main
from ds4sync.loop.sync import start_merge
from ds4sync.publish.phase import PUBLISH_PHASES
from ds4sync.runner import PhaseOutcome, RunContext, Workspace, open_workspace, run_phases
from tests.scenarios import BRANCH, lines, make_pair

TOKEN = "ghp_" + "T0kenForTheStandInOnly" + "x" * 16
REPO = "acme/vllm"
API = f"/repos/{REPO}"
HEAD = f"sync/{BRANCH}-upstream"


def pull(number: int, title: str, *, head: str, base: str = BRANCH, author: str = "someone") -> dict[str, Any]:
    """A pull request as GitHub's REST API returns it (the fields publishing reads)."""
    return {
        "number": number,
        "title": title,
        "html_url": f"https://github.com/{REPO}/pull/{number}",
        "user": {"login": author},
        "updated_at": f"2026-09-{number % 28 + 1:02d}T10:00:00Z",
        "head": {"ref": head, "repo": {"full_name": REPO}},
        "base": {"ref": base},
        "draft": False,
    }


def configure(pair, api_url: str, **publish: Any) -> Path:
    remote = pair.repo.parent / "origin.git"
    git.Repo.init(str(remote), bare=True).close()
    git.Repo(str(pair.repo)).create_remote("origin", str(remote))
    settings = {
        "repo": REPO,
        "api_url": api_url,
        "labels": ["upstream-sync", "ds4sync"],
        "backoff_s": 0.01,
        **publish,
    }
    path = pair.repo / "ds4sync.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "upstream": {"remote": "upstream", "ref": "main", "name": "up/vllm"},
                "fork": {"branch": BRANCH},
                "publish": settings,
            }
        )
    )
    return remote


def merged(tmp_path: Path, httpserver: HTTPServer, **publish: Any) -> tuple[Workspace, Path, Any]:
    """A fork with a committed sync run (merge + verify done), ready to publish."""
    pair = make_pair(
        tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}, {"c.py": lines("c")}], [{"b.py": lines("b")}]
    )
    remote = configure(pair, publish.pop("api_url", httpserver.url_for("/")), **publish)
    ws = open_workspace(pair.repo)
    outcome = start_merge(ws, "main", fetch=True)
    assert outcome.record.phase("commit").status == "done"
    return ws, remote, outcome.record


def publish(ws: Workspace, record: Any) -> PhaseOutcome:
    """Run the publish phase the way the pipeline does (the runner records its result)."""
    outcome = run_phases(RunContext(ws, record), PUBLISH_PHASES).outcome
    assert outcome is not None
    return outcome


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)


def body_of(request: Request) -> dict[str, Any]:
    return json.loads(request.get_data(as_text=True))


def remote_head(remote: Path, branch: str) -> str | None:
    repo = git.Repo(str(remote))
    try:
        return repo.commit(f"refs/heads/{branch}").hexsha
    except (git.BadName, ValueError):
        return None
    finally:
        repo.close()


def assert_no_token_written(ws: Workspace) -> None:
    for path in ws.store.root.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path


def test_opens_a_draft_pr_after_the_duplicate_work_check(tmp_path: Path, httpserver: HTTPServer) -> None:
    ws, remote, record = merged(tmp_path, httpserver)
    upstream_shas = ws.repo.rev_list(record.upstream.sha, record.fork.head_before)
    open_prs = [
        pull(44, "deepseek_v4: SM12x MQA dispatch fix", head="mqa-fix", author="alice"),
        pull(46, "CPU mmap registration", head="mmap", base="main", author="bob"),
        pull(47, "Merge upstream main into the fork", head="carol-sync", author="carol"),
    ]
    httpserver.expect_ordered_request(
        f"{API}/pulls",
        method="GET",
        query_string={"state": "open", "sort": "updated", "direction": "desc", "per_page": "100", "page": "1"},
    ).respond_with_json(open_prs)
    httpserver.expect_ordered_request(f"{API}/pulls/44/commits", method="GET").respond_with_json([{"sha": "f" * 40}])
    httpserver.expect_ordered_request(f"{API}/pulls/46/commits", method="GET").respond_with_json([])
    # #47 carries one of this sync's upstream commits: possible duplicate work.
    httpserver.expect_ordered_request(f"{API}/pulls/47/commits", method="GET").respond_with_json(
        [{"sha": upstream_shas[0]}, {"sha": "e" * 40}]
    )
    httpserver.expect_ordered_request(f"{API}/pulls", method="POST").respond_with_json(
        {"number": 51, "html_url": f"https://github.com/{REPO}/pull/51"}, status=201
    )
    httpserver.expect_ordered_request(
        f"{API}/issues/51/labels", method="POST", json={"labels": ["upstream-sync", "ds4sync"]}
    ).respond_with_json([])

    outcome = publish(ws, record)

    httpserver.check_assertions()
    assert outcome.status == "done", outcome.message
    requests = [req for req, _ in httpserver.log]
    assert all(req.headers["Authorization"] == f"token {TOKEN}" for req in requests)
    created = body_of(requests[4])
    assert created["draft"] is True and created["head"] == HEAD and created["base"] == BRANCH
    assert created["title"] == f"Sync fork:{BRANCH} with up/vllm main"
    body = created["body"]
    assert "## Duplicate-work check" in body
    for number, author in ((44, "alice"), (46, "bob"), (47, "carol")):
        assert f"#{number}" in body and f"@{author}" in body
    assert "carries 1 of this sync's 2 upstream commits" in body and "targets main, not fork" in body
    # The branch is on the fork's remote, at the sync's merge commit.
    assert remote_head(remote, HEAD) == ws.repo.branch_head(record.sync_branch)
    result = record.results.publish
    assert result.status == "published" and result.action == "opened" and result.pr_number == 51
    assert [p.relation for p in result.duplicate_check.open_prs] == ["unrelated", "unrelated", "duplicate"]
    # The report on disk now names the PR.
    report = (ws.store.run_dir(record.run_id) / "report.md").read_text()
    assert "Published as https://github.com/acme/vllm/pull/51" in report
    assert_no_token_written(ws)


def test_updates_the_open_pr_of_the_same_sync_with_a_comment(tmp_path: Path, httpserver: HTTPServer) -> None:
    ws, remote, record = merged(tmp_path, httpserver, labels=[])
    mine = pull(60, "Sync fork with upstream main", head=HEAD, author="ds4sync-bot")
    httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_json([mine])
    httpserver.expect_ordered_request(f"{API}/pulls/60", method="PATCH").respond_with_json(mine)
    httpserver.expect_ordered_request(f"{API}/issues/60/comments", method="POST").respond_with_json(
        {"html_url": f"https://github.com/{REPO}/pull/60#issuecomment-1"}, status=201
    )

    outcome = publish(ws, record)

    httpserver.check_assertions()
    assert outcome.status == "done", outcome.message
    paths = [(req.method, req.path) for req, _ in httpserver.log]
    assert ("POST", f"{API}/pulls") not in paths  # never a second PR for the same sync
    patched = body_of(httpserver.log[1][0])
    assert "## Duplicate-work check" in patched["body"] and "#60 is this sync's own PR" in patched["body"]
    comment = body_of(httpserver.log[2][0])["body"]
    assert comment.startswith(f"Pushed {ws.repo.branch_head(record.sync_branch)[:12]} to `{HEAD}`")
    assert record.results.publish.action == "updated"
    assert remote_head(remote, HEAD) == ws.repo.branch_head(record.sync_branch)


def test_a_422_already_exists_updates_that_pr(tmp_path: Path, httpserver: HTTPServer) -> None:
    ws, _, record = merged(tmp_path, httpserver, labels=[])
    httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_json([])
    httpserver.expect_ordered_request(f"{API}/pulls", method="POST").respond_with_json(
        {
            "message": "Validation Failed",
            "errors": [
                {
                    "resource": "PullRequest",
                    "code": "custom",
                    "message": f"A pull request already exists for acme:{HEAD}.",
                }
            ],
        },
        status=422,
    )
    httpserver.expect_ordered_request(
        f"{API}/pulls", method="GET", query_string={"state": "open", "head": f"acme:{HEAD}"}
    ).respond_with_json([pull(61, "Sync", head=HEAD)])
    httpserver.expect_ordered_request(f"{API}/pulls/61", method="PATCH").respond_with_json({})
    httpserver.expect_ordered_request(f"{API}/issues/61/comments", method="POST").respond_with_json({}, status=201)

    outcome = publish(ws, record)

    httpserver.check_assertions()
    assert outcome.status == "done", outcome.message
    assert record.results.publish.pr_number == 61 and record.results.publish.action == "updated"


@pytest.mark.parametrize(
    ("status", "reply", "expect"),
    [
        (401, {"message": "Bad credentials"}, "rejected the token (401: Bad credentials)"),
        (403, {"message": "Resource not accessible by integration"}, "may not do this (403"),
        (404, {"message": "Not Found"}, "the repository does not exist or the token cannot see it"),
    ],
)
def test_forge_refusals_stop_for_a_person(
    tmp_path: Path, httpserver: HTTPServer, status: int, reply: dict, expect: str
) -> None:
    ws, remote, record = merged(tmp_path, httpserver)
    httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_json(reply, status=status)

    outcome = publish(ws, record)

    httpserver.check_assertions()
    assert len(httpserver.log) == 1  # a refusal is not retried
    assert outcome.status == "needs-person" and expect in outcome.message
    assert record.results.publish.status == "refused"
    assert remote_head(remote, HEAD) is None  # nothing pushed before the forge said yes
    assert TOKEN not in outcome.message


def test_rate_limit_waits_for_the_reset_time(tmp_path: Path, httpserver: HTTPServer) -> None:
    ws, _, record = merged(tmp_path, httpserver, labels=[])
    reset = int(time.time()) + 1
    httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_json(
        {"message": "API rate limit exceeded"},
        status=403,
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
    )
    stamps: list[float] = []

    def listing(request: Request) -> Response:
        stamps.append(time.time())
        return Response("[]", content_type="application/json")

    httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_handler(listing)
    httpserver.expect_ordered_request(f"{API}/pulls", method="POST").respond_with_json({"number": 70}, status=201)

    outcome = publish(ws, record)

    httpserver.check_assertions()
    assert outcome.status == "done", outcome.message
    # The retry came after the reset second named by the reply, and the wait is recorded.
    assert stamps[0] >= reset - 0.05
    waits = record.results.publish.waits_s
    assert len(waits) == 1 and 0 < waits[0] <= 1.5


def test_rate_limit_reset_too_far_away_is_unavailable_not_a_wait(tmp_path: Path, httpserver: HTTPServer) -> None:
    ws, _, record = merged(tmp_path, httpserver, max_wait_s=60)
    httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_json(
        {"message": "API rate limit exceeded"},
        status=403,
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 3600)},
    )

    outcome = publish(ws, record)

    assert len(httpserver.log) == 1
    assert outcome.status == "needs-person" and "rate-limited" in outcome.message
    assert record.results.publish.status == "unavailable"


def test_server_errors_are_retried_with_backoff(tmp_path: Path, httpserver: HTTPServer) -> None:
    ws, _, record = merged(tmp_path, httpserver, labels=[], retries=3)
    for _ in range(2):
        httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_json(
            {"message": "bad gateway"}, status=502
        )
    httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_json([])
    httpserver.expect_ordered_request(f"{API}/pulls", method="POST").respond_with_json({"number": 80}, status=201)

    outcome = publish(ws, record)

    httpserver.check_assertions()
    assert outcome.status == "done", outcome.message
    assert record.results.publish.waits_s == (0.01, 0.02)


def test_server_errors_past_the_retries_are_unavailable(tmp_path: Path, httpserver: HTTPServer) -> None:
    ws, _, record = merged(tmp_path, httpserver, retries=2)
    httpserver.expect_request(f"{API}/pulls", method="GET").respond_with_json({"message": "unavailable"}, status=503)

    outcome = publish(ws, record)

    assert len(httpserver.log) == 3
    assert outcome.status == "needs-person" and record.results.publish.status == "unavailable"


def test_a_remote_branch_someone_else_pushed_to_is_not_overwritten(tmp_path: Path, httpserver: HTTPServer) -> None:
    ws, remote, record = merged(tmp_path, httpserver)
    other = git.Repo.init(str(tmp_path / "other"))
    (tmp_path / "other" / "x.txt").write_text("x\n")
    other.index.add(["x.txt"])
    other.index.commit("someone else's work")
    other.git.push(str(remote), f"HEAD:refs/heads/{HEAD}")
    foreign = other.head.commit.hexsha
    other.close()
    httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_json([])

    outcome = publish(ws, record)

    assert outcome.status == "needs-person" and "a commit ds4sync did not push" in outcome.message
    assert remote_head(remote, HEAD) == foreign
    assert [(r.method, r.path) for r, _ in httpserver.log] == [("GET", f"{API}/pulls")]


def test_no_token_stops_before_any_request(tmp_path: Path, httpserver: HTTPServer, monkeypatch) -> None:
    ws, _, record = merged(tmp_path, httpserver)
    monkeypatch.delenv("GITHUB_TOKEN")
    outcome = publish(ws, record)
    assert outcome.status == "needs-person" and "GITHUB_TOKEN / GH_TOKEN" in outcome.message
    assert httpserver.log == []


def test_resume_runs_publish_after_report(tmp_path: Path, httpserver: HTTPServer, capsys) -> None:
    """Through the CLI: the phase sits in the pipeline after report, reading the token from GH_TOKEN."""
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    configure(pair, httpserver.url_for("/"), labels=[])
    httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_json([])
    httpserver.expect_ordered_request(f"{API}/pulls", method="POST").respond_with_json(
        {"number": 90, "html_url": "u"}, status=201
    )
    assert main(["merge", "main", "--fetch", "--repo", str(pair.repo)]) == 0
    assert main(["resume", "--repo", str(pair.repo)]) == 0
    httpserver.check_assertions()
    ws = open_workspace(pair.repo)
    record = ws.store.latest()
    assert record is not None and list(record.phases)[-2:] == ["report", "publish"]
    assert record.results.publish.pr_number == 90


def test_an_unreachable_forge_is_unavailable_and_the_next_night_retries(tmp_path: Path, httpserver: HTTPServer) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    ws, _, record = merged(tmp_path, httpserver, api_url=f"http://127.0.0.1:{closed}/", retries=0)

    outcome = publish(ws, record)

    assert outcome.status == "needs-person" and "cannot reach the forge" in outcome.message
    assert record.results.publish.status == "unavailable"
    from ds4sync.loop.nightly import _retryable, exit_code

    assert _retryable(record) and exit_code(record) == 6


def test_secondary_rate_limit_honours_retry_after(tmp_path: Path, httpserver: HTTPServer) -> None:
    ws, _, record = merged(tmp_path, httpserver, labels=[])
    httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_json(
        {"message": "You have exceeded a secondary rate limit"}, status=429, headers={"retry-after": "1"}
    )
    httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_json([])
    httpserver.expect_ordered_request(f"{API}/pulls", method="POST").respond_with_json({"number": 71}, status=201)

    outcome = publish(ws, record)

    httpserver.check_assertions()
    assert outcome.status == "done", outcome.message
    assert record.results.publish is not None and record.results.publish.waits_s == (1.0,)


def test_a_missing_remote_stops_for_a_person_before_any_pr(tmp_path: Path, httpserver: HTTPServer) -> None:
    ws, _, record = merged(tmp_path, httpserver, remote="nosuchremote")
    httpserver.expect_ordered_request(f"{API}/pulls", method="GET").respond_with_json([])

    outcome = publish(ws, record)

    assert outcome.status == "needs-person" and "nosuchremote" in outcome.message
    assert record.results.publish is not None and record.results.publish.status == "push-rejected"
    assert [(r.method, r.path) for r, _ in httpserver.log] == [("GET", f"{API}/pulls")]
