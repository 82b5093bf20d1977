"""One answer to "is this tier green?": the record, the report, summary.json, the nightly notice and promote agree.

Each row is a mix of gate results of the one required tier ``unit`` (name, status, required) and the
tier status every reader must say. The record is built from typed results and saved and loaded as a
real run record is; the report and summary.json are rendered with the shipped templates; the notice is
the nightly job's; promote's proof is computed on the same record against a tier definition that
requires exactly the rows marked required.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ds4sync.core.errors import ExitCode
from ds4sync.core.record import ForkRef, PhaseState, UpstreamRef
from ds4sync.loop.nightly import NightlyResult, compose_notice
from ds4sync.loop.promote import prove
from ds4sync.models.config import shipped_profile
from ds4sync.models.gates_results import GateResult, TierResult
from ds4sync.models.gates_status import GATE_STATUSES, gate_green, tier_status
from ds4sync.models.merge_results import MergeSummary
from ds4sync.models.patchsets_results import VerifyResult
from ds4sync.models.record import RecordStore, RunRecord
from ds4sync.pipeline import PHASES
from ds4sync.report.build import build_view
from ds4sync.report.render import render_report
from ds4sync.runner import RunOutcome, open_workspace

HEAD = "c" * 40
TREE = "d" * 40

REQ, OPT = True, False
MIXES: dict[str, tuple[list[tuple[str, str, bool]], str]] = {
    "all passed": ([("a", "passed", REQ), ("b", "passed", REQ)], "passed"),
    "passed and cached": ([("a", "passed", REQ), ("b", "cached", REQ)], "passed"),
    "required passed, optional failed": ([("a", "passed", REQ), ("b", "failed", OPT)], "passed"),
    "required passed, optional error": ([("a", "passed", REQ), ("b", "error", OPT)], "passed"),
    "required failed": ([("a", "failed", REQ), ("b", "passed", REQ)], "failed"),
    "required error": ([("a", "passed", REQ), ("b", "error", REQ)], "failed"),
    "failed beats env-only": ([("a", "incomplete", REQ), ("b", "failed", REQ)], "failed"),
    "env-only only": ([("a", "incomplete", REQ)], "incomplete"),
    "passed and env-only": ([("a", "passed", REQ), ("b", "incomplete", REQ)], "incomplete"),
    "all skipped": ([("a", "skipped", REQ), ("b", "skipped", REQ)], "not-run"),
    "all not-run": ([("a", "not-run", REQ)], "not-run"),
    "skipped and not-run": ([("a", "skipped", REQ), ("b", "not-run", OPT)], "not-run"),
    "one not-run": ([("a", "passed", REQ), ("b", "not-run", REQ)], "incomplete"),
    "one skipped by selection": ([("a", "passed", REQ), ("b", "skipped", REQ)], "incomplete"),
    "only an optional gate passed": ([("a", "skipped", REQ), ("b", "passed", OPT)], "incomplete"),
    "only optional gates, one errored": ([("a", "error", OPT)], "incomplete"),
    "only optional gates, passed": ([("a", "passed", OPT)], "passed"),
}


def _gate(name: str, status: str, required: bool) -> GateResult:
    ran = status not in ("skipped", "not-run")
    counts = {"passed": 2} if gate_green(status) else {"failed": 1} if status in ("failed", "error") else {}
    return GateResult.model_validate(
        {
            "name": name,
            "tier": "unit",
            "kind": "pytest",
            "status": status,
            "required": required,
            "reason": f"{status} in the table",
            "counts": counts,
            "commit": HEAD,
            "tree": TREE,
            "command": ["pytest", name] if ran else [],
        }
    )


def _record(tmp_path: Path, gates: list[GateResult]) -> RunRecord:
    record = RunRecord(
        run_id="20260101-000000-aaaaaaaaaa",
        repo=str(tmp_path),
        state_dir=str(tmp_path / "state"),
        upstream=UpstreamRef(remote="upstream", ref="main", sha="a" * 40),
        fork=ForkRef(branch="fork", head_before="b" * 40),
        sync_branch="sync/x",
        worktree=str(tmp_path / "wt"),
        backup_ref="refs/ds4sync/backup/x",
        status="done",
        phases={p.name: PhaseState(status="done") for p in PHASES},
    )
    record.results.merge = MergeSummary(
        upstream_sha="a" * 40, fork_sha="b" * 40, merge_base="e" * 40, upstream_commits=1, fork_commits=1
    ).model_copy(update={"merge_commit": HEAD})
    record.results.verify = VerifyResult(tree=TREE, patches_dir="patches", commit=HEAD)
    record.results.gates["unit"] = TierResult(
        tier="unit", repo=str(tmp_path), head=HEAD, tree=TREE, started_at="2026-01-01T00:00:00+00:00", duration_s=1.0
    ).model_copy(update={"gates": tuple(gates)})
    store = RecordStore(tmp_path / "state")
    store.save(record)
    return store.load(record.run_id)  # what every reader reads: the record as saved


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory):
    repo = tmp_path_factory.mktemp("green")
    subprocess.run(["git", "init", "-q", "-b", "fork", str(repo)], check=True)
    (repo / "ds4sync.yaml").write_text("fork: {branch: fork}\ngates: {tiers: [unit]}\n")
    return open_workspace(repo, branch="fork")


@pytest.mark.parametrize("mix", MIXES, ids=list(MIXES))
def test_every_reader_gives_the_tier_one_status(ws, tmp_path: Path, mix: str) -> None:
    rows, expected = MIXES[mix]
    record = _record(tmp_path, [_gate(*row) for row in rows])
    tier = record.results.gates["unit"]
    # the record
    assert tier.status == expected and bool(tier) == (expected == "passed")
    # the report view and the published summary.json
    (view_tier,) = build_view(record).validation.tiers
    assert view_tier.status == expected
    summary = json.loads(render_report(record, templates_dir=shipped_profile() / "reports", fmt="json"))
    assert [t["status"] for t in summary["validation"]["tiers"]] == [expected]
    markdown = render_report(record, templates_dir=shipped_profile() / "reports")
    assert f"{expected}: {len(rows)} gate" in markdown
    # the nightly notice
    night = NightlyResult(outcome=RunOutcome(record, "publish", None), message="", exit_code=ExitCode.OK)
    notice = compose_notice(ws, night)
    assert f"- Gates unit: {expected}: {len(rows)} gate" in notice.body
    assert notice.title.endswith(" green") == (expected == "passed"), notice.title  # the run's one verdict
    # promote, against a definition requiring the rows marked required
    required = tuple(name for name, _, req in rows if req)
    proof = prove(record, required_tiers=("unit",), definitions={"unit": required})
    assert (not proof.hard and not proof.soft) == (expected == "passed"), (proof.hard, proof.soft)
    if expected in ("not-run",) or any(s in ("skipped", "not-run") for _, s, req in rows if req):
        assert proof.hard, "a required gate that did not run is no proof, whatever --allow-blockers says"


@pytest.mark.parametrize("status", GATE_STATUSES)
def test_a_tier_green_needs_a_green_gate_of_each_required_kind(status: str) -> None:
    """The rule itself, for every status alone: only passed and cached make a green tier."""
    alone = tier_status([_gate("a", status, True)])
    assert (alone == "passed") == gate_green(status) == (status in ("passed", "cached"))
    assert tier_status([]) == "not-run"
