"""Resolvers of conflict hunks: their order and its record, and validation of a model endpoint's proposals.

The endpoint here is a STAND-IN FOR A CODE MODEL: a scripted OpenAI-compatible chat server on loopback
(pytest-httpserver) that asserts each request carries the hunk's provenance packet and returns what the
test scripts. Everything else is real: git repos in tmp_path, ``ds4sync merge``/``resume`` end to end.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from ds4sync.cli import main
from ds4sync.merge.resolvers import Answer, HunkPacket, RuleResolver, StoreResolver, resolve_file
from ds4sync.models.config import ResolutionRule
from ds4sync.models.merge_hunks import ConflictHunk, Diff3, HunkSource, split_diff3
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair
from tests.timing import scaled

# -- resolver order, table-driven, on git's own diff3 output --------------------------------------------

MERGED = (
    "top\n<<<<<<< fork\nfork one\n||||||| merge-base\nbase one\n=======\nup one\n>>>>>>> upstream\n"
    "middle\n<<<<<<< fork\nfork two\n||||||| merge-base\nbase two\n=======\nup two\n>>>>>>> upstream\nend\n"
)


@dataclass
class Scripted:
    """A resolver that replies with fixed texts per hunk index (None: no answer); counts its calls."""

    replies: dict[int, str | None]
    name: HunkSource = "model"
    calls: int = 0

    def answer(self, packet: HunkPacket) -> Answer | None:
        self.calls += 1
        if packet.hunk.index not in self.replies:
            return None
        text = self.replies[packet.hunk.index]
        body = None if text is None else packet.region.before + text + packet.region.after
        return Answer("model", body, "scripted", "" if body else "no reply")


def hunks() -> tuple[list[ConflictHunk], Diff3]:
    split = split_diff3(MERGED)
    return [ConflictHunk(index=i + 1, fork=f, base=b, upstream=u) for i, (f, b, u) in enumerate(split.hunks)], split


@pytest.mark.parametrize(
    ("learned", "rules", "model", "sources", "text"),
    [
        # the store knows hunk 1; the model answers hunk 2; the model is never asked about hunk 1
        ({1: "stored one\n"}, [], {1: "model one\n", 2: "model two\n"}, ["store", "model"], "stored one\nmodel two\n"),
        # a rule covers the path: both hunks from the rule, the model never asked
        (
            {},
            [ResolutionRule(glob="*.txt", strategy="theirs")],
            {1: "x\n", 2: "y\n"},
            ["rule", "rule"],
            "up one\nup two\n",
        ),
        # the store before the rule; the rule for what the store lacks
        (
            {2: "stored two\n"},
            [ResolutionRule(glob="f.txt", strategy="ours")],
            {},
            ["rule", "store"],
            "fork one\nstored two\n",
        ),
        # nothing answers hunk 2: the file is left for a person, hunk 1 keeps its source
        ({}, [], {1: "model one\n"}, ["model", None], None),
    ],
)
def test_resolvers_run_in_order_and_each_hunk_records_its_source(learned, rules, model, sources, text) -> None:
    found, split = hunks()
    store = StoreResolver()
    for index, resolution in learned.items():
        hunk = found[index - 1]
        store.learn_file(f"<<<<<<<\n{hunk.fork}=======\n{hunk.upstream}>>>>>>>\n", resolution, detail=f"entry-{index}")
    scripted = Scripted(model)
    outcome = resolve_file("f.txt", split, found, [store, RuleResolver(rules), scripted], context=1)
    assert [h.source for h in outcome.hunks] == sources
    expected = (
        None
        if text is None
        else f"top\n{text.splitlines(keepends=True)[0]}middle\n{text.splitlines(keepends=True)[1]}end\n"
    )
    assert outcome.text == expected
    assert scripted.calls == sum(1 for s in sources if s in ("model", None))


def test_a_dropped_answer_falls_through_to_the_next_resolver_and_keeps_its_reason() -> None:
    found, split = hunks()
    bad = Scripted({1: "<<<<<<< still\n", 2: "two\n"})
    good = Scripted({1: "one\n", 2: "never asked\n"})
    outcome = resolve_file("f.txt", split, found, [bad, good], context=1)
    first = outcome.hunks[0]
    assert [(p.status, p.reason) for p in first.proposals] == [
        ("dropped", "conflict markers left in the proposal"),
        ("validated", ""),
    ]
    assert outcome.text == "top\none\nmiddle\ntwo\nend\n" and good.calls == 1


@pytest.mark.parametrize(
    ("path", "reply", "reason"),
    [
        ("m.py", "def broken(:\n", "does not parse"),
        ("m.json", "{not json\n", "does not parse"),
        ("m.toml", "= nope\n", "does not parse"),
        ("m.yaml", "a: [1, 2\n", "does not parse"),
    ],
)
def test_a_file_that_does_not_parse_drops_every_model_answer(path: str, reply: str, reason: str) -> None:
    merged = "<<<<<<< fork\nx = 1\n||||||| merge-base\nx = 0\n=======\nx = 2\n>>>>>>> upstream\n"
    split = split_diff3(merged)
    [(f, b, u)] = split.hunks
    outcome = resolve_file(path, split, [ConflictHunk(index=1, fork=f, base=b, upstream=u)], [Scripted({1: reply})])
    assert outcome.text is None and reason in outcome.reason
    [proposal] = outcome.hunks[0].proposals
    assert proposal.status == "dropped" and reason in proposal.reason and outcome.hunks[0].source is None


# -- the pipeline with the stand-in endpoint ------------------------------------------------------------

BASE = lines("import os", "", "", "def shared():", "    return 1", "", "", "def tail():", "    return 0")
UP = BASE.replace("    return 1", "    return 2  # upstream")
FORK = BASE.replace("    return 1", "    return fork_feature()") + lines("", "", "def fork_feature():", "    return 3")
RIGHT = "    return fork_feature() + 1  # upstream\n"

REPLIES = {
    "right": ("reply", RIGHT),
    "breaks-invariant": ("reply", "    return 2  # upstream\n"),
    "edits-outside": ("outside", RIGHT),
    "markers": ("reply", "<<<<<<< fork\n    return fork_feature()\n=======\n    return 2\n>>>>>>> upstream\n"),
    "timeout": ("sleep", RIGHT),
}
REASONS = {
    "breaks-invariant": "invariant keeps-the-call of patch-set the-feature no longer holds",
    "edits-outside": "lines outside the hunk changed",
    "markers": "conflict markers left in the proposal",
    "timeout": "the endpoint did not answer within ",  # its limit: 0.5 s on an idle machine, scaled
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def stand_in(mode: str, text: str, limit_s: float):
    """The scripted endpoint: checks the request, then replies with the region around ``text``."""
    seen: list[dict] = []

    def handler(request: Request) -> Response:
        body = request.get_json()
        seen.append(body)
        assert request.headers.get("Authorization") == "Bearer sk-test-secret-value"
        prompt = body["messages"][-1]["content"]
        assert body["model"] == "stand-in-coder" and "File: feature.py (hunk 1)" in prompt
        provenance = json.loads(prompt.split("Provenance:\n", 1)[1])
        assert [c.get("pr") for c in provenance["upstream_commits"]] == [77]
        assert provenance["owning_patchsets"][0]["patchset"] == "the-feature"
        assert provenance["owning_patchsets"][0]["rationale"] == "the fork routes shared() through its feature"
        before = re.search(r"Context before the hunk \(return unchanged\):\n```\n(.*?)```", prompt, re.S).group(1)
        after = re.search(r"Context after the hunk \(return unchanged\):\n```\n(.*?)```", prompt, re.S).group(1)
        if mode == "sleep":
            time.sleep(3 * limit_s)  # past the endpoint's time limit
        if mode == "outside":
            before = before.replace("def shared():", "def shared(flag=False):")
        content = f"Here it is:\n```python\n{before}{text}{after}```\n"
        return Response(
            json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}),
            content_type="application/json",
        )

    return handler, seen


def setup_run(tmp_path: Path, httpserver: HTTPServer, mode: str, text: str):
    pair = make_pair(tmp_path, {"feature.py": BASE}, [], [{"feature.py": FORK}])
    pair.upstream.commit({"feature.py": UP}, "Return two from shared (#77)")
    git(pair.repo, "fetch", "-q", "upstream")
    profile = tmp_path / "profile"
    folder = profile / "patches" / "the-feature"
    folder.mkdir(parents=True)
    (folder / "patchset.yaml").write_text(
        yaml.safe_dump(
            {
                "id": "the-feature",
                "title": "shared() goes through the fork's feature",
                "kind": "fork-feature",
                "rationale": "the fork routes shared() through its feature",
                "invariants": [
                    {
                        "id": "keeps-the-call",
                        "kind": "contains",
                        "files": "feature.py",
                        "pattern": r"return fork_feature\(\)",
                    }
                ],
            }
        )
    )
    limit_s = scaled(0.5)
    handler, seen = stand_in(mode, text, limit_s)
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(handler)
    config = tmp_path / "ds4sync.yaml"
    endpoint = {
        "url": httpserver.url_for("/v1"),
        "model": "stand-in-coder",
        "key_env": "CODER_API_KEY",
        "timeout_s": limit_s,
        "context_lines": 2,
    }
    config.write_text(
        yaml.safe_dump({"fork": {"branch": BRANCH}, "profile": str(profile), "merge": {"endpoint": endpoint}})
    )
    return pair, ("--repo", str(pair.repo), "--config", str(config)), seen


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("case", list(REPLIES))
def test_each_endpoint_reply_ends_as_it_must(
    tmp_path: Path,
    httpserver: HTTPServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    monkeypatch.setenv("CODER_API_KEY", "sk-test-secret-value")
    mode, text = REPLIES[case]
    pair, args, seen = setup_run(tmp_path, httpserver, mode, text)
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args, "--json")
    assert code == 4, out  # waits for a person either way
    data = cli_data(out)
    worktree = Path(data["worktree"])
    [conflict] = data["conflicts"]
    [hunk] = conflict["hunks"]
    assert hunk["upstream_prs"] == [77] and hunk["patchsets"] == ["the-feature"]
    assert len(seen) == 1
    assert git(worktree, "ls-files", "-u", "--", "feature.py")  # nothing proposed is ever staged by the run
    assert "sk-test-secret-value" not in out
    if case == "right":
        assert (conflict["resolution"], conflict["proposal"]) == ("proposed", "model, validated")
        assert (worktree / "feature.py").read_text() == FORK.replace("    return fork_feature()\n", RIGHT)
        code, status, _ = run_cli(capsys, "status", *args)
        assert "conflict feature.py: proposed (model, validated); upstream PRs #77; patch-sets the-feature" in status
        code, markdown, err = run_cli(capsys, "report", *args)
        assert code == 0, err
        assert "| `feature.py` | content | proposed (model, validated) |  | #77 | the-feature |" in markdown
        code, _, err = run_cli(capsys, "resume", *args)
        assert code == 4 and "validated model proposal that no person accepted" in err
        assert git(worktree, "ls-files", "-u", "--", "feature.py")  # still not staged
        code, out, _ = run_cli(capsys, "resume", *args, "--accept-proposals", "--json")
        assert code == 0, out
        [done] = cli_data(out)["conflicts"]
        assert (done["resolution"], done["proposal"]) == ("proposed", "model, validated")
        assert done["accepted_by"] == "person (resume --accept-proposals)"
        assert done.get("stored_as") is None  # a proposal is never recorded to the store as a person's
        assert (
            git(pair.repo, "show", f"{cli_data(out)['merge_commit']}:feature.py")
            == (worktree / "feature.py").read_text()
        )
        return
    assert conflict["resolution"] == "unresolved"
    [proposal] = hunk["proposals"]
    assert proposal["status"] == "dropped" and REASONS[case] in proposal["reason"]
    assert "<<<<<<<" in (worktree / "feature.py").read_text()  # git's conflict, left to a person


def test_a_proposal_the_person_edits_is_theirs(
    tmp_path: Path, httpserver: HTTPServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODER_API_KEY", "sk-test-secret-value")
    _pair, args, _ = setup_run(tmp_path, httpserver, "reply", RIGHT)
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args, "--json")
    worktree = Path(cli_data(out)["worktree"])
    edited = FORK.replace("    return fork_feature()\n", "    return fork_feature() * 2  # upstream\n")
    (worktree / "feature.py").write_text(edited)
    code, out, _ = run_cli(capsys, "resume", *args, "--json")
    assert code == 0, out
    [done] = cli_data(out)["conflicts"]
    assert done["resolution"] == "person" and "proposal" not in done


@pytest.mark.parametrize(
    ("resolved", "expected"),
    [
        # both hunks resolved, nothing else touched
        ("top\nR1\nmiddle\nR2\nend\n", ["R1\n", "R2\n"]),
        # the person changed the line before hunk 1: hunk 1 is unknown, hunk 2 still read by its neighbours
        ("TOP CHANGED\nR1\nmiddle\nR2\nend\n", [None, "R2\n"]),
        # a hunk resolved to nothing (deleted)
        ("top\nmiddle\nR2\nend\n", ["", "R2\n"]),
        # the lines after hunk 2 were changed too: hunk 2 cannot be told apart
        ("top\nR1\nmiddle\nR2\nEND\n", ["R1\n", None]),
    ],
)
def test_the_persons_text_of_each_hunk_is_read_between_its_neighbouring_lines(resolved, expected) -> None:
    from ds4sync.models.merge_hunks import hunk_resolutions

    split = split_diff3(MERGED)
    assert hunk_resolutions(split, resolved) == expected


def test_a_profile_rule_stages_validated_proposals_for_its_paths_and_they_stay_proposals(
    tmp_path: Path, httpserver: HTTPServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODER_API_KEY", "sk-test-secret-value")
    _pair, args, _ = setup_run(tmp_path, httpserver, "reply", RIGHT)
    config = Path(args[args.index("--config") + 1])
    data = yaml.safe_load(config.read_text())
    data["merge"]["endpoint"]["accept_paths"] = ["feature.py"]
    config.write_text(yaml.safe_dump(data))
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args, "--json")
    assert code == 0, out  # nothing waits for a person: the profile allowed this path
    [done] = cli_data(out)["conflicts"]
    assert (done["resolution"], done["proposal"]) == ("proposed", "model, validated")
    assert done["accepted_by"] == "rule merge.endpoint.accept_paths feature.py"
    assert done.get("stored_as") is None
