"""Promote proves the tier definitions, not what happens to be recorded.

Each test leaves a required tier partial in one way a person or CI can (one gate run by hand, one CI
artefact merged, every gate skipped by ``--changed-since``, phases before promote not run, no test run
at all) and checks that promote refuses, naming the gap, and that the fork branch does not move. The
fork, its gates and patch-sets are :mod:`tests.faultrepo`'s: real git, real pytest, real command gates.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.core.errors import ExitCode
from ds4sync.core.git import GitRepo
from ds4sync.loop.nightly import compose_notice, run_nightly
from ds4sync.runner import open_workspace
from tests import faultrepo
from tests.cli_json import data as cli_data

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> faultrepo.Scenario:
    return faultrepo.build(tmp_path_factory.mktemp("proof-template") / "s")


@pytest.fixture
def s(template: faultrepo.Scenario, tmp_path: Path) -> faultrepo.Scenario:
    return faultrepo.copy(template, tmp_path / "s")


def _record(s: faultrepo.Scenario) -> dict:
    (path,) = s.state.glob("runs/*/record.json")
    return json.loads(path.read_text())


def _refused(s: faultrepo.Scenario, capsys: pytest.CaptureFixture[str], *expected: str) -> None:
    """Promote (even with --allow-blockers) refuses with each ``expected`` text; the fork branch stays."""
    before = GitRepo(s.repo).branch_head(faultrepo.BRANCH)
    capsys.readouterr()
    assert main(["promote", "--repo", str(s.repo), "--allow-blockers"]) == ExitCode.USAGE
    err = " ".join(capsys.readouterr().err.split())
    for text in expected:
        assert text in err, err
    assert GitRepo(s.repo).branch_head(faultrepo.BRANCH) == before


def _merged(s: faultrepo.Scenario) -> None:
    """The run after `ds4sync merge`: verified, waiting for build, gates and report (CI or `resume`)."""
    assert main(["merge", "upstream/main", "--repo", str(s.repo)]) == 0
    assert _record(s)["status"] == "paused"


def test_one_gate_run_by_hand_does_not_prove_its_tier(s, capsys) -> None:
    _merged(s)
    assert main(["gate", "--tier", "unit", "--gate", "children", "--repo", str(s.repo)]) == 0
    assert [g["name"] for g in _record(s)["results"]["gates"]["unit"]["gates"]] == ["children"]
    _refused(s, capsys, "required gate(s) unit/unit-tests have no result (recorded: children)")


def test_one_ci_artefact_merged_does_not_prove_its_tier(s, tmp_path: Path, capsys) -> None:
    """One CI job's artefact (its own state dir, as the exported jobs run) is merged into the run."""
    _merged(s)
    worktree = _record(s)["worktree"]
    capsys.readouterr()
    argv = ["gate", "--tier", "unit", "--gate", "children", "--json", "--repo", worktree]
    assert main([*argv, "--state-dir", str(tmp_path / "ci")]) == 0
    artefact = tmp_path / "unit-children.json"
    artefact.write_text(capsys.readouterr().out)
    assert main(["gate", "--tier", "unit", "--merge-results", str(artefact), "--repo", str(s.repo)]) == 0
    assert [g["name"] for g in _record(s)["results"]["gates"]["unit"]["gates"]] == ["children"]
    _refused(s, capsys, "required gate(s) unit/unit-tests have no result (recorded: children)")


def test_every_gate_skipped_by_selection_proves_nothing_without_a_pass_on_identical_inputs(s, capsys) -> None:
    tier = s.profile / "gates" / "unit.yaml"
    data = yaml.safe_load(tier.read_text())
    for gate in data["gates"]:  # without dependencies a gate always runs (vLLM CI's rule)
        gate["source_file_dependencies"] = ["pkg/", "tests/", "requirements.txt"]
    tier.write_text(yaml.safe_dump(data))
    _merged(s)
    capsys.readouterr()
    assert main(["gate", "--tier", "unit", "--changed-since", "HEAD", "--json", "--repo", str(s.repo)]) == 4
    data = cli_data(capsys.readouterr().out)
    assert data["status"] == "not-run" and data["green"] is False
    assert {g["status"] for g in data["gates"]} == {"skipped"}
    _refused(s, capsys, "required gate unit/children is skipped", "not proven", "unit/unit-tests is skipped")
    # Once they passed, a selection that leaves them out serves that pass on identical inputs: a proof.
    assert main(["gate", "--tier", "unit", "--repo", str(s.repo)]) == 0
    capsys.readouterr()
    assert main(["gate", "--tier", "unit", "--changed-since", "HEAD", "--json", "--repo", str(s.repo)]) == 0
    data = cli_data(capsys.readouterr().out)
    assert {g["status"] for g in data["gates"]} == {"cached"} and data["status"] == "passed"
    assert all("; same inputs passed before" in g["reason"] for g in data["gates"]), [
        g["reason"] for g in data["gates"]
    ]


def test_phases_before_promote_that_never_ran_are_no_proof(s, capsys) -> None:
    """The whole tier ran by hand on the head after `merge`; build, gate and report never ran."""
    _merged(s)
    assert main(["gate", "--tier", "unit", "--repo", str(s.repo)]) == 0
    assert {g["status"] for g in _record(s)["results"]["gates"]["unit"]["gates"]} == {"passed"}
    _refused(s, capsys, "phase 'build' has not run", "phase 'gate' has not run", "phase 'report' has not run")


MISSING = {
    "tier": "unit",
    "gates": [
        {"name": "unit-tests", "kind": "pytest", "run": {"paths": ["tests/not_here.py"], "missing_paths": "skip"}},
        {"name": "more-tests", "kind": "pytest", "run": {"paths": ["tests/gone/"], "missing_paths": "skip"}},
    ],
}


def test_a_required_tier_where_no_test_ran_is_green_to_nobody(s, capsys) -> None:
    """Every test path of the tier is missing (``missing_paths: skip``): `gate`, the nightly and promote all say so."""
    (s.profile / "gates" / "unit.yaml").write_text(yaml.safe_dump(MISSING))
    config = yaml.safe_load(s.config.read_text())
    config["nightly"] = {"promote": True}
    s.config.write_text(yaml.safe_dump(config))
    capsys.readouterr()
    assert main(["gate", "--tier", "unit", "--json", "--repo", str(s.repo)]) == ExitCode.NEEDS_PERSON
    data = cli_data(capsys.readouterr().out)
    assert data["status"] == "not-run" and data["green"] is False
    assert [g["status"] for g in data["gates"]] == ["not-run", "not-run"]
    assert main(["gate", "--tier", "unit", "--repo", str(s.repo)]) == ExitCode.NEEDS_PERSON
    assert "tier unit: not-run — no tests" in " ".join(capsys.readouterr().out.split())
    ws = open_workspace(s.repo)
    night = run_nightly(ws, notify=False)
    assert night.exit_code == ExitCode.NEEDS_PERSON and night.promoted is None
    record = night.record
    assert record is not None and record.phase("gate").status == "needs-person"
    assert "no test ran in tier(s) unit" in record.phase("gate").message
    notice = compose_notice(ws, night)
    assert "- Gates unit: not-run: 2 gates (2 not-run)" in notice.body and notice.kind != "success"
    assert " green " not in f" {notice.title} "
    _refused(s, capsys, "required gate unit/unit-tests is not-run", "none of its 1 test path(s) is in this tree")


#: Delta checks whose base is the checkout's own commit (as when the upstream name resolves to the fork's own
#: branch): the fork's delta is empty, so they check nothing.
EMPTY_DELTA = {
    "tier": "static",
    "gates": [
        {"name": "ruff-check", "kind": "static", "run": {"check": "ruff-check", "base": "HEAD"}},
        {"name": "diff-check", "kind": "static", "run": {"check": "diff-check", "base": "HEAD"}},
    ],
}


def test_a_required_static_tier_whose_delta_is_empty_is_green_to_nobody(s, capsys) -> None:
    """Delta checks with no file to check: `gate`, the nightly and promote say not-run, never passed."""
    (s.profile / "gates" / "static.yaml").write_text(yaml.safe_dump(EMPTY_DELTA))
    config = yaml.safe_load(s.config.read_text())
    config["nightly"] = {"promote": True}
    config["gates"]["tiers"] = ["static"]
    s.config.write_text(yaml.safe_dump(config))
    capsys.readouterr()
    assert main(["gate", "--tier", "static", "--json", "--repo", str(s.repo)]) == ExitCode.NEEDS_PERSON
    data = cli_data(capsys.readouterr().out)
    assert data["status"] == "not-run" and data["green"] is False
    assert [g["status"] for g in data["gates"]] == ["not-run", "not-run"]
    assert all("the base is the fork itself" in g["reason"] and "upstream.ref" in g["reason"] for g in data["gates"])
    ws = open_workspace(s.repo)
    night = run_nightly(ws, notify=False)
    assert night.exit_code == ExitCode.NEEDS_PERSON and night.promoted is None
    record = night.record
    assert record is not None and record.phase("gate").status == "needs-person"
    assert "no test ran in tier(s) static" in record.phase("gate").message
    notice = compose_notice(ws, night)
    assert "- Gates static: not-run: 2 gates (2 not-run)" in notice.body and notice.kind != "success"
    _refused(s, capsys, "required gate static/ruff-check is not-run", "no Python file of the fork's delta to check")
