"""``ds4sync drift`` on a generated upstream with pull refs, against a stand-in for GitHub's REST API.

GitHub cannot run here, so a local HTTP server on 127.0.0.1 (pytest-httpserver, as the publish tests use)
stands in for it: it answers the PR listing, each flagged PR's detail and reviews, and asserts the requests
(path, ``state=open`` sorted by update). Git is real: upstream keeps its PRs as ``refs/pull/N/head``, and
drift fetches them from it like from GitHub.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import git
import pytest
from pytest_httpserver import HTTPServer

from ds4sync.cli import main
from ds4sync.core.git import GitRepo
from ds4sync.drift.watch import PULL_NAMESPACE, DriftOptions, run_drift
from tests.loop.pullrefs import (
    CONFLICTS_TWO,
    DELETES_FORK_FILE,
    OVERLAPS_CLEANLY,
    REMOVES_SYMBOL,
    UNRELATED,
    PlantedPull,
    PullHistory,
    make_pull_history,
)

API = "/repos/up/vllm"
PLANTED = [
    PlantedPull(101, CONFLICTS_TWO, title="rework attention", labels=("attention",), updated_at="2026-12-01T09:00:00Z"),
    PlantedPull(102, OVERLAPS_CLEANLY, title="tidy attention tail", updated_at="2026-12-02T09:00:00Z"),
    PlantedPull(103, REMOVES_SYMBOL, title="rename the load hook", updated_at="2026-12-01T08:00:00Z"),
    PlantedPull(104, DELETES_FORK_FILE, title="drop envs", draft=True, updated_at="2026-12-02T08:00:00Z"),
    PlantedPull(105, CONFLICTS_TWO, title="closed one", state="closed", updated_at="2026-12-02T10:00:00Z"),
    PlantedPull(106, UNRELATED, title="gone head", fetchable=False, updated_at="2026-11-30T08:00:00Z"),
    PlantedPull(107, UNRELATED, title="docs only", labels=("docs",), updated_at="2026-11-29T08:00:00Z"),
]


def _serve(httpserver: HTTPServer, history: PullHistory) -> None:
    httpserver.expect_request(
        f"{API}/pulls",
        method="GET",
        query_string={"state": "open", "sort": "updated", "direction": "desc", "per_page": "100", "page": "1"},
    ).respond_with_json(history.pulls_json())
    for number in history.planted:
        approved = [{"user": {"login": "maintainer"}, "state": "APPROVED"}] if number == 102 else []
        httpserver.expect_request(f"{API}/pulls/{number}/reviews", method="GET").respond_with_json(approved)
        httpserver.expect_request(f"{API}/pulls/{number}", method="GET").respond_with_json(
            {"number": number, "mergeable": number != 101}
        )


@pytest.fixture(scope="module")
def _template(tmp_path_factory: pytest.TempPathFactory) -> PullHistory:
    return make_pull_history(tmp_path_factory.mktemp("drift"), PLANTED)


@pytest.fixture
def history(_template: PullHistory, tmp_path: Path, httpserver: HTTPServer) -> PullHistory:
    """A private copy of the generated repositories (tests fetch into and commit to the fork)."""
    root = tmp_path / "h"
    shutil.copytree(_template.root, root, symlinks=True)
    made = replace(_template, root=root, upstream=root / "upstream", fork=root / "fork")
    git.Repo(made.fork).git.remote("set-url", "upstream", str(made.upstream))
    _serve(httpserver, made)
    return made


def _ws(history: PullHistory, httpserver: HTTPServer):
    return history.workspace(extra={"publish": {"repo": "acme/vllm", "api_url": httpserver.url_for("/")}})


def test_drift_names_exactly_the_planted_prs_with_files_and_kinds(history, httpserver):
    result = run_drift(_ws(history, httpserver))
    by = {e.pull.number: e for e in result.entries}
    assert set(by) == {101, 102, 103, 104}
    assert {(c.path, c.kind) for c in by[101].findings.conflicts} == {
        ("vllm/attn.py", "content"),
        ("vllm/envs.py", "content"),
    }
    assert by[101].line() == "#101 will conflict in 2 files"
    # overlaps a fork file, merges cleanly: shown, but nothing to do
    assert by[102].findings.fork_files == ("vllm/attn.py",) and not by[102].findings.conflicts
    assert by[102].action == 2 and by[102].pull.approved is True
    # removes the symbol the patch-set's invariant needs: no conflict, one violated invariant
    assert not by[103].findings.conflicts
    assert [(v.patchset, v.invariant) for v in by[103].findings.violations] == [("hooks-used", "on-load-hook")]
    assert by[103].findings.patchsets == ("hooks-used",)
    assert by[103].line() == "#103 violates hooks-used"
    # the draft deletes a file the fork modified: git's modify/delete, seen from the fork
    assert by[104].pull.draft and [(c.path, c.kind) for c in by[104].findings.conflicts] == [
        ("vllm/envs.py", "modify/delete")
    ]
    assert 105 not in by and 105 not in result.quiet  # closed: left out
    assert [u.number for u in result.unfetched] == [106]
    assert result.quiet == (107,)
    assert by[101].pull.mergeable is False and by[102].pull.mergeable is True


def test_ranking_puts_what_a_person_must_do_first(history, httpserver):
    result = run_drift(_ws(history, httpserver))
    order = [e.pull.number for e in result.entries]
    # 101 (2 conflicts) before the 1-finding ones (104 newer than 103), the clean overlap last
    assert order == [101, 104, 103, 102]
    assert [e.action for e in result.entries] == [0, 0, 0, 2]


def test_cache_hit_on_unchanged_prs_and_only_new_entries_reported(history, httpserver):
    ws = _ws(history, httpserver)
    first = run_drift(ws)
    assert first.cache_hits == 0 and first.merges == 4
    assert set(first.new) == {
        "#101 will conflict in 2 files",
        "#103 violates hooks-used",
        "#104 will conflict in 1 file",
    }
    second = run_drift(ws)
    assert second.cache_hits == 5 and second.merges == 0  # 5 fetched open PRs, none evaluated again
    assert [e.cached for e in second.entries] == [True] * 4
    assert second.entries == tuple(e.model_copy(update={"cached": True}) for e in first.entries)
    assert second.new == ()
    # the fork moves: every PR is evaluated again (the key holds the fork head)
    from ds4sync.demo.repobuild import RepoBuilder

    fork = RepoBuilder(history.fork)
    fork.checkout("fork")
    fork.commit({"vllm/fork_feature.py": "ON = False\n"}, "fork moves")
    fork.checkout("main")
    third = run_drift(ws)
    assert third.cache_hits == 0 and third.merges == 4


def test_unfetchable_head_is_one_line_and_refs_are_private(history, httpserver):
    result = run_drift(_ws(history, httpserver))
    (gone,) = result.unfetched
    assert gone.number == 106 and "cannot fetch" in gone.reason
    refs = GitRepo(history.fork).refs_under(PULL_NAMESPACE)
    assert set(refs) == {f"{PULL_NAMESPACE}{n}" for n in (101, 102, 103, 104, 107)}
    assert refs[f"{PULL_NAMESPACE}101"] == history.heads[101]
    assert not GitRepo(history.fork).refs_under("refs/pull/")  # nothing outside our namespace


def test_filters_by_label_and_update_time(history, httpserver):
    ws = _ws(history, httpserver)
    labelled = run_drift(ws, DriftOptions(labels=("attention",)))
    assert labelled.listed == 1 and [e.pull.number for e in labelled.entries] == [101]
    recent = run_drift(ws, DriftOptions(updated_since="2026-12-01T08:30:00Z"))
    assert recent.listed == 3  # 102, 104, 101 (105 is closed)
    limited = run_drift(ws, DriftOptions(limit=2))
    assert limited.listed == 2


def test_cli_json_names_the_planted_prs(history, httpserver, capsys):
    _ws(history, httpserver)
    code = main(
        [
            "drift",
            "--repo",
            str(history.fork),
            "--state-dir",
            str(history.root / "state"),
            "--profile",
            str(history.root / "profile"),
            "--json",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)["data"]
    got = {
        e["pull"]["number"]: sorted((c["path"], c["kind"]) for c in e["findings"]["conflicts"]) for e in data["entries"]
    }
    assert got == {
        101: [("vllm/attn.py", "content"), ("vllm/envs.py", "content")],
        104: [("vllm/envs.py", "modify/delete")],
        103: [],
        102: [],
    }
    assert [u["number"] for u in data["unfetched"]] == [106]


def test_the_semantic_seam_gets_fork_pr_head_and_the_merged_commit(history, httpserver, monkeypatch):
    """The seam's contract, checked with a recording callable in place of ``ds4sync.semantic.check_merge``
    (built elsewhere): it is called once per merged PR with the fork head, the PR head and a commit of the merged
    tree whose parents are both; its findings become lines, ranked after conflicts and violated invariants."""
    import ds4sync.drift.evaluate as evaluate

    calls = []

    def check_merge(repo, *, fork, upstream, merged):
        parents = repo.out("rev-list", "--parents", "-n", "1", merged).split()[1:]
        tail = (repo.blob_bytes(merged, "vllm/attn.py") or b"").decode()
        calls.append((fork, upstream, parents, "ATTN_35 = 'upstream'" in tail))
        return ["removed definition still referenced"] if upstream == history.heads[102] else []

    monkeypatch.setattr(evaluate, "_semantic_entry", lambda repo: check_merge)
    result = run_drift(_ws(history, httpserver))
    assert result.semantic_check
    fork_head = result.fork_head
    by_head = {c[1]: c for c in calls}
    assert set(by_head) == {history.heads[n] for n in (101, 102, 103, 104)}  # only merged PRs
    assert by_head[history.heads[102]] == (fork_head, history.heads[102], [fork_head, history.heads[102]], True)
    entry = next(e for e in result.entries if e.pull.number == 102)
    assert entry.findings.semantic == ("removed definition still referenced",) and entry.action == 1
    assert [e.pull.number for e in result.entries][-1] == 102 and entry.line() == "#102 1 semantic finding"


def test_the_prs_of_one_watch_share_one_cache_of_parsed_files(history, httpserver, monkeypatch):
    """The real check, wrapped to see its arguments: every merged PR's check gets the same cache and finds what a
    check with a cache of its own finds, parsing no file that check would not. (What the sharing saves across
    upstream heads is in tests/semantic/test_kinds.py; this history's PRs share too few files to show it.)"""
    import ds4sync.semantic.check as check
    from ds4sync.semantic.resolve import FactsCache

    real, seen = check.check_merge, []

    def recording(repo, *, facts, **kwargs):
        alone = FactsCache(repo)
        expected = real(repo, facts=alone, **kwargs)
        before = facts.parsed
        result = real(repo, facts=facts, **kwargs)
        assert result.model_dump(exclude={"seconds"}) == expected.model_dump(exclude={"seconds"})
        seen.append((facts, alone.parsed, facts.parsed - before))
        return result

    monkeypatch.setattr(check, "check_merge", recording)
    result = run_drift(_ws(history, httpserver))
    assert result.semantic_check and len(seen) == 4  # PRs 101-104 merge; the others touch nothing of the fork
    assert len({id(facts) for facts, _, _ in seen}) == 1
    assert all(shared <= alone for _, alone, shared in seen)


def test_cli_text_shows_the_ranked_table_and_the_unfetched_line(history, httpserver, capsys):
    _ws(history, httpserver)
    argv = ["drift", "--repo", str(history.fork), "--state-dir", str(history.root / "state")]
    assert main([*argv, "--profile", str(history.root / "profile")]) == 0
    text = capsys.readouterr().out
    assert text.index("#101") < text.index("#104") < text.index("#103") < text.index("#102")
    assert "#101 will conflict in 2 files: rework attention (dev101; ready, not approved, not mergeable;" in text
    assert "    vllm/envs.py (modify/delete)" in text and "    hooks-used / on-load-hook: " in text
    assert "#104 will conflict in 1 file: drop envs (dev104; draft," in text
    assert "#106 gone head: cannot fetch its head" in text and "1 PRs touch nothing of the fork" in text
    assert main([*argv, "--updated-since", "yesterday"]) == 2


def test_a_pr_on_newer_upstream_re_editing_upstream_lines_is_no_fork_conflict(tmp_path, httpserver):
    """A PR based on upstream's main after it moved on, changing again a line upstream changed since the fork's
    base, in a file the fork changed elsewhere: merging it into the fork's tree as it stands would read upstream's
    change as the fork's and conflict; drift merges it into the fork as a sync to the PR's base leaves it."""
    from tests.loop.pullrefs import REEDITS_UPSTREAM_LINE

    planted = [
        PlantedPull(301, REEDITS_UPSTREAM_LINE, on_main=True),
        PlantedPull(302, {"vllm/attn.py": CONFLICTS_TWO["vllm/attn.py"]}, on_main=True),
    ]
    made = make_pull_history(tmp_path, planted)
    _serve(httpserver, made)
    result = run_drift(_ws(made, httpserver))
    by = {e.pull.number: e for e in result.entries}
    assert by[301].findings.fork_files == ("vllm/attn.py",) and by[301].findings.conflicts == ()
    assert by[301].findings.merge_base != result.fork_base  # it really is on a newer base
    # a PR on the same newer base that does edit the fork's line still conflicts
    assert [(c.path, c.kind) for c in by[302].findings.conflicts] == [("vllm/attn.py", "content")]
