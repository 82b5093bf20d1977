"""The last-green upstream ref: moved by a green night only, never backwards without a reason on record,
pushed when publishing is configured, shown by ``ds4sync status``; and the nightly's drift lines.

The drift night uses the loopback stand-in for GitHub's REST API (pytest-httpserver on 127.0.0.1, as the
publish tests do): GitHub cannot run here. Git is real everywhere.
"""

from __future__ import annotations

import sys
from pathlib import Path

import git
import pytest
import yaml
from pytest_httpserver import HTTPServer

from ds4sync.cli import main
from ds4sync.core.errors import ExitCode
from ds4sync.loop.lastgreen import last_green, move_last_green, moves, ref_name
from ds4sync.loop.nightly import compose_notice, run_nightly
from ds4sync.runner import open_workspace
from tests.cli_json import data
from tests.loop.pullrefs import CONFLICTS_TWO, REMOVES_SYMBOL, UNRELATED, PlantedPull, make_pull_history
from tests.loop.test_drift import _serve
from tests.scenarios import BRANCH, lines, make_pair

REF = ref_name("main")


def _configure(pair, **extra) -> None:
    data = {"upstream": {"remote": "upstream", "ref": "main"}, "fork": {"branch": BRANCH}, **extra}
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump(data))


def _unit_tier(tmp_path: Path, argv: list[str]) -> dict:
    """ds4sync.yaml keys for a profile whose unit tier is one command gate running ``argv``."""
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True, exist_ok=True)
    gate = {"name": "check", "kind": "command", "run": {"argv": argv}}
    (profile / "gates" / "unit.yaml").write_text(yaml.safe_dump({"tier": "unit", "gates": [gate]}))
    return {"profile": str(profile), "gates": {"tiers": ["unit"], "python": sys.executable}}


def _sha(pair, ref: str) -> str | None:
    out = git.Repo(pair.repo).git.rev_parse("--verify", "--quiet", ref, with_exceptions=False)
    return out or None


def _upstream_main(pair) -> str:
    return pair.upstream.head()


def test_a_green_night_moves_the_ref_and_pushes_it_and_status_shows_it(tmp_path: Path, capsys) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    remote = tmp_path / "origin.git"
    git.Repo.init(str(remote), bare=True).close()
    git.Repo(str(pair.repo)).create_remote("origin", str(remote))
    tier = _unit_tier(tmp_path, ["{python}", "-c", "pass"])
    _configure(pair, **tier)
    ws = open_workspace(pair.repo)
    night = run_nightly(ws, notify=False)
    assert night.exit_code == ExitCode.OK
    proved = night.record.upstream.sha
    assert proved == _upstream_main(pair) and _sha(pair, REF) == proved
    assert f"last green main: {proved[:12]}" in night.notes
    assert f"last green main: {proved[:12]}" in ws.store.load(night.record.run_id).notes
    report = ws.store.run_dir(night.record.run_id) / "report.md"
    assert f"last green main: {proved[:12]}" in report.read_text()
    assert "last green main" in compose_notice(ws, night).body
    # not pushed: publish is not configured
    assert git.Repo(str(remote)).git.for_each_ref() == ""
    capsys.readouterr()
    assert main(["status", "--repo", str(pair.repo)]) == 0
    text = capsys.readouterr().out
    assert f"last green upstream main: {proved[:12]} ({REF})" in text and " s old" in text
    assert main(["status", "--repo", str(pair.repo), "--json"]) == 0
    shown = data(capsys.readouterr().out)["last_green"]
    assert shown["sha"] == proved and shown["run_id"] == night.record.run_id

    # upstream moves; publishing configured: the next green night moves it forward and pushes it
    _configure(pair, publish={"repo": "acme/vllm", "api_url": "http://127.0.0.1:9/"}, nightly={"keep_runs": 5}, **tier)
    later = pair.upstream.commit({"c.py": lines("c")}, "upstream moves")
    git.Repo(str(pair.repo)).git.fetch("-q", "upstream")
    ws = open_workspace(pair.repo)
    move = move_last_green(ws, "main", later, run_id="by-hand")
    assert move.status == "moved" and move.old == proved and _sha(pair, REF) == later
    assert git.Repo(str(remote)).git.rev_parse(REF) == later and move.pushed and "not pushed" not in move.pushed


@pytest.mark.parametrize("tiers", ["failing", "none configured"])
def test_a_night_that_proves_nothing_does_not_move_it(tmp_path: Path, tiers: str) -> None:
    """A failed tier, and a night with no tier at all (it exits 0, yet no gate proved the upstream commit)."""
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    if tiers == "failing":
        _configure(pair, **_unit_tier(tmp_path, ["{python}", "-c", "raise SystemExit(1)"]))
    else:
        _configure(pair)
    ws = open_workspace(pair.repo)
    night = run_nightly(ws, notify=False)
    assert night.exit_code == (ExitCode.FAILED if tiers == "failing" else ExitCode.OK)
    assert _sha(pair, REF) is None and last_green(ws, "main") is None
    assert not any(n.startswith("last green") for n in night.notes)


@pytest.mark.parametrize("how", ["no reason", "with reason", "rewritten upstream"])
def test_never_backwards_without_a_reason_on_record(tmp_path: Path, how: str) -> None:
    pair = make_pair(
        tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "1")}, {"a.py": lines("a", "2")}], [{"b.py": lines("b")}]
    )
    _configure(pair)
    ws = open_workspace(pair.repo)
    newer = _upstream_main(pair)
    older = git.Repo(str(pair.upstream.path)).git.rev_parse("HEAD~1")
    assert move_last_green(ws, "main", newer, run_id="r1").status == "created"
    assert move_last_green(ws, "main", newer, run_id="r1b").status == "unchanged"
    if how == "no reason":
        move = move_last_green(ws, "main", older, run_id="r2", upstream_tip=newer)
        assert move.status == "kept" and _sha(pair, REF) == newer
        assert "never moved back without a reason" in move.reason
    elif how == "with reason":
        move = move_last_green(ws, "main", older, run_id="r2", reason="the newer commit broke serving")
        assert move.status == "moved-back" and _sha(pair, REF) == older
    else:
        # upstream's main was rewritten: the old commit is not in it any more
        pair.upstream.commit({"z.py": lines("z")}, "after a force-push")
        git.Repo(str(pair.upstream.path)).git.reset("-q", "--hard", older)
        rewritten = pair.upstream.commit({"y.py": lines("y")}, "rewritten")
        git.Repo(str(pair.repo)).git.fetch("-q", "upstream")
        move = move_last_green(ws, "main", older, run_id="r2", upstream_tip=rewritten)
        assert move.status == "moved-back" and "history was rewritten" in move.reason
    log = moves(ws, "main")
    assert [m.status for m in log] == ["created", move.status]  # "unchanged" is not logged
    assert log[-1].reason == move.reason and move.reason


def test_a_drift_night_lists_new_entries_in_notes_and_notice(tmp_path: Path, httpserver: HTTPServer) -> None:
    planted = [
        PlantedPull(201, CONFLICTS_TWO, updated_at="2026-12-02T10:00:00Z"),
        PlantedPull(202, REMOVES_SYMBOL, updated_at="2026-12-02T09:00:00Z"),
        PlantedPull(203, UNRELATED, updated_at="2026-12-02T08:00:00Z"),
    ]
    history = make_pull_history(tmp_path, planted)
    _serve(httpserver, history)
    ws = history.workspace(
        extra={
            "upstream": {"remote": "upstream", "ref": "main", "name": "up/vllm", "api_url": httpserver.url_for("/")},
            "nightly": {"drift": True},
        }
    )
    night = run_nightly(ws, notify=False)
    assert night.exit_code == ExitCode.OK
    drift = [n for n in night.notes if n.startswith("drift:")]
    assert drift == ["drift: #201 will conflict in 2 files", "drift: #202 violates hooks-used"]
    assert set(drift) <= set(ws.store.load(night.record.run_id).notes)
    body = compose_notice(ws, night).body
    assert "#201 will conflict in 2 files" in body and "#202 violates hooks-used" in body
    # the next night (nothing moved, a quiet skip) has nothing new to say
    again = run_nightly(ws, notify=False)
    assert again.skipped and not [n for n in again.notes if n.startswith("drift:")]
