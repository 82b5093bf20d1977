"""The pytest kind on the sample project: exact counts, env-only failures, flaky reruns, timeouts, bad JUnit."""

from __future__ import annotations

from pathlib import Path

import pytest
from gates_helpers import PYTHON, workspace, write_gates
from sample_project import EXPECTED_MAIN, UNIT_YAML

from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.gates.runner import TierOptions, run_tier
from ds4sync.models.gates_details import PytestDetails
from tests import procs
from tests.timing import scaled_s


def _run(repo: RepoBuilder, *names: str, **kw):
    return run_tier(workspace(repo), TierOptions(tier="unit", names=names, python=PYTHON, **kw))


def test_sample_counts_come_out_exactly(sample: RepoBuilder) -> None:
    result = _run(sample, "main")
    gate = result.gates[0]
    assert gate.counts.model_dump() == EXPECTED_MAIN
    assert gate.status == "failed" and result.status == "failed" and not result
    by_node = {f.node_id: f for f in gate.failures}
    assert set(by_node) == {
        "tests/test_fail.py::test_add_is_wrong",
        "tests/test_env.py::test_gated_model_fixture",
        "tests/test_env.py::test_pipeline_parallel_4",
    }
    assert by_node["tests/test_env.py::test_gated_model_fixture"].env_category == "gated-model-403"
    assert by_node["tests/test_env.py::test_pipeline_parallel_4"].env_category == "host-topology"
    assert by_node["tests/test_fail.py::test_add_is_wrong"].env_category is None
    assert "calc.add disagrees" in by_node["tests/test_fail.py::test_add_is_wrong"].message
    assert gate.flaky == ("tests/test_flaky.py::test_flaky_once",)
    assert gate.command[:5] == (PYTHON, "-m", "pytest", "-q", "--tb=short")
    assert "--deselect=tests/test_hang.py" in gate.command and gate.command[-7:-5] == ("-k", "not slow")
    assert Path(gate.log_path).read_text().count("passed") >= 1
    assert (gate.details.display_command or "").endswith("-k 'not slow'")


def test_only_env_failures_make_the_gate_incomplete(sample: RepoBuilder) -> None:
    write_gates(sample, "unit", UNIT_YAML.replace("k: not slow", "k: not slow and not wrong"))
    gate = _run(sample, "main").gates[0]
    assert gate.status == "incomplete"
    assert (gate.counts.failed, gate.counts.env_only, gate.counts.flaky) == (0, 2, 1)
    assert gate.env_categories == ("gated-model-403", "host-topology")


def test_without_reruns_a_flaky_test_is_a_failure(sample: RepoBuilder) -> None:
    write_gates(sample, "unit", UNIT_YAML.replace("rerun_failures: 1", "rerun_failures: 0"))
    gate = _run(sample, "main").gates[0]
    assert (gate.counts.failed, gate.counts.flaky) == (2, 0)


@pytest.mark.slow
def test_timeout_is_an_error_and_leaves_no_child(sample: RepoBuilder, tmp_path: Path) -> None:
    # room to start pytest and reach the hang: 6 s on an idle machine, stretched on a loaded one (pytest's own
    # start-up alone took longer than 6 s with both cores busy)
    limit = scaled_s(6)
    write_gates(sample, "unit", UNIT_YAML.replace("timeout: 4", f"timeout: {limit}"))
    result = _run(sample, "hang")
    gate = result.gates[0]
    assert gate.status == "error" and gate.reason.startswith(f"timed out after {limit}s"), gate.reason
    # SIGINT first: pytest wrote its JUnit, so the test that finished is counted and the one that hung is named.
    assert isinstance(gate.details, PytestDetails) and Path(gate.details.junit or "").is_file()
    assert gate.counts.passed == 1 and gate.details.tests == 1
    assert [f.node_id for f in gate.failures] == ["tests/test_hang.py::test_hangs_with_a_child"]
    assert "still running: tests/test_hang.py::test_hangs_with_a_child" in gate.reason
    assert not gate.required and result.status == "incomplete"  # an optional gate fails no tier, proves none
    assert not [p for p in procs.identities((tmp_path / "pids").read_text()) if procs.alive(p)]  # pytest, its child


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        ("{paths: [tests/test_pass.py], args: [--no-such-flag]}", "JUnit XML not written"),
        ("{paths: [tests/test_pass.py], k: nothing_matches_this}", "no tests ran (6 deselected)"),
    ],
)
def test_pytest_that_reports_nothing_is_an_error(sample: RepoBuilder, run: str, reason: str) -> None:
    write_gates(sample, "unit", f"tier: unit\ngates:\n  - {{name: odd, kind: pytest, run: {run}}}\n")
    gate = _run(sample).gates[0]
    assert gate.status == "error"
    assert reason in gate.reason


def test_malformed_junit_is_an_error(sample: RepoBuilder) -> None:
    # A conftest that overwrites the report at session end: pytest "succeeds", the XML is garbage.
    sample.commit(
        {
            "tests/conftest.py": (
                "import pytest\n\n\n@pytest.hookimpl(trylast=True)\ndef pytest_unconfigure(config):\n"
                "    path = config.option.xmlpath\n    if path:\n        open(path, 'w').write('<testsuites><oops')\n"
            )
        },
        "break the junit report",
    )
    write_gates(sample, "unit", "gates:\n  - {name: ok, kind: pytest, run: {paths: [tests/test_pass.py]}}\n")
    gate = _run(sample).gates[0]
    assert gate.status == "error" and "malformed JUnit XML" in gate.reason


MISSING_YAML = """\
tier: unit
gates:
  - name: partial
    kind: pytest
    run:
      paths: [tests/test_pass.py, tests/test_not_in_this_tree.py, tests/gone/]
      missing_paths: skip
      deselect:
        - {node: "tests/test_pass.py::test_add", reason: needs a CUDA GPU}
  - {name: none-here, kind: pytest, run: {paths: [tests/test_nope.py], missing_paths: skip}}
  - {name: strict, kind: pytest, run: {paths: [tests/test_pass.py, tests/test_nope.py]}}
"""


def test_missing_paths_are_named_and_never_green(sample: RepoBuilder) -> None:
    write_gates(sample, "unit", MISSING_YAML)
    gates = {g.name: g for g in _run(sample).gates}
    partial = gates["partial"]
    # what exists ran; the gate is incomplete, not passed, and names what it left out
    assert partial.status == "incomplete" and partial.counts.passed >= 1 and partial.counts.failed == 0
    assert isinstance(partial.details, PytestDetails)
    assert partial.details.missing_paths == ("tests/test_not_in_this_tree.py", "tests/gone/")
    assert "2 of 3 test path(s) not in this tree" in partial.reason
    assert "tests/test_not_in_this_tree.py" not in partial.command
    # a deselection carries its reason, and pytest's own count says it was left out (never passing)
    assert partial.details.deselected_reasons == {"tests/test_pass.py::test_add": "needs a CUDA GPU"}
    assert (
        "--deselect=tests/test_pass.py::test_add" in partial.command and partial.counts.deselected == 3
    )  # test_add has 3 cases
    assert gates["none-here"].status == "not-run" and "none of its 1 test path(s)" in gates["none-here"].reason
    # without missing_paths: skip, pytest itself fails on the missing file
    assert gates["strict"].status == "error"


def test_a_suite_whose_every_test_skipped_is_not_run_never_green(sample: RepoBuilder) -> None:
    """pytest exits 0 when every test skips itself: nothing was checked, so the gate and its tier are not green."""
    gates = "tier: unit\ngates:\n  - {name: skips, kind: pytest, run: {paths: [tests/test_skip.py]}}\n"
    write_gates(sample, "unit", gates)
    result = _run(sample)
    (gate,) = result.gates
    assert gate.status == "not-run" and (gate.counts.passed, gate.counts.skipped) == (0, 2), gate.reason
    assert gate.reason.startswith("every test was skipped (2 skipped): nothing checked")
    assert result.status == "not-run" and not result
