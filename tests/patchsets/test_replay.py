"""Replay and verify through the real pipeline: every outcome, adaptation, resume, refresh."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4sync.cli import main
from ds4sync.core.git import GitRepo
from ds4sync.models.record import RecordStore
from ds4sync.runner import open_workspace
from tests.cli_json import data as cli_data

from .scenario import SOFTCAP_V2, SPARSE, Scenario, add_patchsets, attention, build_repos


@pytest.fixture
def sc(tmp_path: Path) -> Scenario:
    scenario = build_repos(tmp_path)
    add_patchsets(scenario)
    return scenario


def _record(sc: Scenario):
    ws = open_workspace(sc.fork.path, config_path=sc.config)
    return ws.store.latest()


def _merge(sc: Scenario, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["merge", sc.shas["upstream"], "--repo", str(sc.fork.path), "--json", *extra])
    return code, cli_data(capsys.readouterr().out)


def test_replay_stops_for_adaptation_then_resume_commits_it(sc: Scenario, capsys) -> None:
    code, data = _merge(sc, capsys)
    assert code == 4, data
    replay = data["replay"]
    statuses = {e["id"]: e["status"] for e in replay["entries"]}
    assert statuses == {
        "bounds-check": "reapplied",
        "flashinfer-0618": "landed-upstream",
        "larger-scratch": "landed-upstream",
        "sparse-decode": "retained",
        "softcap": "needs-adaptation",
    }
    # dependency order: softcap comes after sparse-decode, which it depends on
    order = [e["id"] for e in replay["entries"]]
    assert order.index("sparse-decode") < order.index("softcap")
    assert replay["pending"] == "softcap"
    softcap = next(e for e in replay["entries"] if e["id"] == "softcap")
    assert softcap["conflicted"] == ["vllm/attention.py"]
    landed = next(e for e in replay["entries"] if e["id"] == "flashinfer-0618")
    assert landed["evidence"] == [f"upstream contains commit {sc.shas['flashinfer']}"]
    scratch = next(e for e in replay["entries"] if e["id"] == "larger-scratch")
    assert "vllm/scratch.py is absent" in scratch["evidence"][0]

    worktree = GitRepo(data["worktree"])
    reapplied = next(e for e in replay["entries"] if e["id"] == "bounds-check")["commit"]
    assert "Patch-set: bounds-check" in worktree.message(reapplied)
    assert worktree.has_markers("vllm/attention.py")

    # resume while markers remain: still waiting, nothing committed
    head = worktree.head()
    assert main(["resume", "--repo", str(sc.fork.path)]) == 4
    assert worktree.head() == head

    (worktree.path / "vllm/attention.py").write_text(attention(SOFTCAP_V2, extra=""))  # the person adapts
    capsys.readouterr()
    assert main(["resume", "--repo", str(sc.fork.path), "--json"]) == 1  # sparse-decode lost by the adaptation
    data = cli_data(capsys.readouterr().out)
    assert data["verify"]["totals"]["violated"] == 2
    bad = {
        (r["patchset"], r["invariant"])
        for ps in data["verify"]["patchsets"]
        for r in ps["invariants"]
        if r["status"] == "violated"
    }
    assert ("sparse-decode", "symbol-1") in bad


def test_adapted_tree_passes_verify_and_refresh_round_trips(sc: Scenario, capsys) -> None:
    code, data = _merge(sc, capsys)
    assert code == 4
    worktree = GitRepo(data["worktree"])
    (worktree.path / "vllm/attention.py").write_text(attention(SOFTCAP_V2, extra=SPARSE))
    capsys.readouterr()
    assert main(["resume", "--repo", str(sc.fork.path), "--json"]) == 0
    data = cli_data(capsys.readouterr().out)
    entries = {e["id"]: e for e in data["replay"]["entries"]}
    assert entries["softcap"]["status"] == "adapted"
    assert "Patch-set: softcap" in worktree.message(entries["softcap"]["commit"])
    verify = data["verify"]
    assert verify["totals"]["violated"] == 0 and verify["totals"]["deferred"] == 1
    # landed-upstream: its violated invariant is reported, not blocking
    scratch = next(ps for ps in verify["patchsets"] if ps["id"] == "larger-scratch")
    assert scratch["status"] == "landed-upstream" and scratch["invariants"][0]["status"] == "violated"
    record = _record(sc)
    assert record.status == "done" and record.results.verify.totals["violated"] == 0

    old = (sc.patches / "softcap" / "0001-SM120-Logit-softcap.patch").read_text()
    yaml_path = sc.patches / "softcap" / "patchset.yaml"
    before = "# reviewed by the DS4 maintainers\n" + yaml_path.read_text()
    yaml_path.write_text(before)
    assert main(["patches", "refresh", "softcap", "--repo", str(sc.fork.path), "--json"]) == 0
    assert cli_data(capsys.readouterr().out)["id"] == "softcap"
    after = yaml_path.read_text()
    # round trip: the comment survives and only the lines of `patches:` change
    assert after.startswith("# reviewed by the DS4 maintainers\n")

    def rest(text: str) -> list[str]:
        return [ln for ln in text.splitlines() if not ln.lstrip().startswith("- 0") and not ln.startswith("patches:")]

    assert rest(after) == rest(before)
    files = sorted(p.name for p in (sc.patches / "softcap").glob("*.patch"))
    assert len(files) == 1
    new = (sc.patches / "softcap" / files[0]).read_text()
    assert new != old and "logits = 30.0 * (logits / 30.0).tanh()" in new
    # the refreshed patch applies to the refactored upstream tree, the old one does not
    up = GitRepo(sc.upstream.path)
    assert up.apply_check(sc.patches / "softcap" / files[0])
    old_path = sc.root / "old.patch"
    old_path.write_text(old)
    assert not up.apply_check(old_path)


def test_verify_fails_when_a_reapplied_feature_does_not_hold(sc: Scenario, capsys) -> None:
    import shutil

    shutil.rmtree(sc.patches / "softcap")
    sc.write_patchset(
        {
            "id": "wrong-invariant",
            "title": "Bounds, with a wrong invariant",
            "kind": "fixup",
            "invariants": [
                {"kind": "contains", "files": "vllm/moe.py", "pattern": "return -2"},
                {"kind": "absent", "files": "vllm/moe.py", "pattern": "return -1", "severity": "advisory"},
            ],
        },
        commits=(sc.shas["bounds"],),
    )
    code, data = _merge(sc, capsys)
    assert code == 1
    assert data["status"] == "failed"
    wrong = next(ps for ps in data["verify"]["patchsets"] if ps["id"] == "wrong-invariant")
    assert wrong["status"] == "violated"
    results = {r["invariant"]: r for r in wrong["invariants"]}
    assert results["contains-1"]["status"] == "violated" and results["contains-1"]["files"] == ["vllm/moe.py"]
    assert results["absent-2"]["severity"] == "advisory" and "vllm/moe.py:3" in results["absent-2"]["evidence"][0]
    # the fork head never had "return -2" either: not lost in this merge; "return -1" came with the replayed patch
    assert results["contains-1"]["before"] == "violated" and results["absent-2"]["before"] == "holds"
    totals = data["verify"]["totals"]
    # the landed-upstream patch-set's two results are counted apart, never as holding or advisory
    assert {k: totals[k] for k in ("patchsets", "invariants", "holds", "violated", "advisory", "deferred")} == {
        "patchsets": 5,
        "invariants": 8,
        "holds": 3,
        "violated": 1,
        "advisory": 1,
        "deferred": 1,
    }
    assert totals["not_counted"] == 2
    assert (totals["lost_in_merge"], totals["failing_before"]) == (0, 1)
    assert sum(totals[k] for k in ("holds", "violated", "advisory", "deferred", "not_counted")) == totals["invariants"]
    by_status = {ps["status"] for ps in data["verify"]["patchsets"]}
    assert totals["patchsets_violated"] == 1 and totals["patchsets_landed_upstream"] == 2, by_status
    assert sum(v for k, v in totals.items() if k.startswith("patchsets_")) == totals["patchsets"]
    state = RecordStore(Path(_record(sc).state_dir)).latest()
    assert state.phases["verify"].status == "failed"
    assert "0 lost in this merge, 1 already failing before it" in state.phases["verify"].message


def test_no_patchsets_leaves_the_merge_pipeline_unchanged(tmp_path: Path, capsys) -> None:
    sc = build_repos(tmp_path)
    code, data = _merge(sc, capsys)
    assert code == 0
    assert data["replay"]["entries"] == [] and data["verify"]["totals"]["invariants"] == 0


def test_resume_refuses_an_adaptation_that_does_not_restore_the_feature(sc: Scenario, capsys) -> None:
    code, data = _merge(sc, capsys)
    assert code == 4
    worktree = GitRepo(data["worktree"])
    (worktree.path / "vllm/attention.py").write_text(attention(extra=SPARSE))  # markers gone, softcap dropped
    head = worktree.head()
    capsys.readouterr()
    assert main(["resume", "--repo", str(sc.fork.path), "--json"]) == 4
    replay = cli_data(capsys.readouterr().out)["replay"]
    softcap = next(e for e in replay["entries"] if e["id"] == "softcap")
    assert softcap["status"] == "needs-adaptation"
    assert softcap["detail"].startswith("invariants still fail after adaptation: /\\.tanh\\(\\)/ not found")
    assert worktree.head() == head
    # refresh is refused while the patch-set still waits for a person
    assert main(["patches", "refresh", "softcap", "--repo", str(sc.fork.path)]) == 4
    assert "still waits for adaptation" in capsys.readouterr().err


def test_malformed_patchset_stops_replay_for_a_person_and_resume_goes_on(sc: Scenario, capsys) -> None:
    path = sc.patches / "bounds-check" / "patchset.yaml"
    good = path.read_text()
    path.write_text(good.replace("kind: fork-feature", "kind: feature"))
    line = 1 + good.splitlines().index("kind: fork-feature")
    code, data = _merge(sc, capsys)
    assert code == 4 and data["status"] == "needs-person"
    record = _record(sc)
    assert record.phases["replay"].status == "needs-person"
    assert record.phases["replay"].message.startswith(f"{path}:{line}: kind: Input should be")  # the value's line
    path.write_text(good)
    assert main(["resume", "--repo", str(sc.fork.path)]) == 4
    assert _record(sc).results.replay.pending == "softcap"
