"""The typed run record: phases store their own models; schema-1 records (results as dicts) migrate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ds4sync.cli import main
from ds4sync.core.errors import StateError
from ds4sync.gates.kinds import KIND_MODULES
from ds4sync.models.gates_details import DETAILS_BY_KIND, PytestDetails, RayExecution, ServingDetails, StaticDetails
from ds4sync.models.gates_results import RESULT_SCHEMA_VERSION
from ds4sync.models.merge_results import MergeSummary
from ds4sync.models.record import SCHEMA_VERSION, RecordStore, RunResults
from ds4sync.models.serving_results import ProbeResult, ServingResult
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair


@pytest.fixture
def merged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[RecordStore, str, Path]:
    """A real merge run; returns its store, run id and record path."""
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json"]) == 0
    data = cli_data(capsys.readouterr().out)
    path = Path(data["record"])
    return RecordStore(path.parent.parent.parent), data["run_id"], path


def test_phases_store_their_own_models(merged) -> None:
    store, run_id, path = merged
    record = store.load(run_id)
    assert record.schema_version == SCHEMA_VERSION
    assert isinstance(record.results.merge, MergeSummary) and record.results.merge.merge_commit
    # the report is the runner's always-run step: a merge that paused after semantic has one too
    assert record.results.written() == ("merge", "replay", "verify", "semantic", "report")
    on_disk = json.loads(path.read_text())
    assert set(on_disk["results"]) == set(RunResults.model_fields)


def test_a_schema_1_record_migrates_and_keeps_what_no_model_reads(merged) -> None:
    store, run_id, path = merged
    data = json.loads(path.read_text())
    old_results = {k: v for k, v in data["results"].items() if v not in (None, {})}
    old_results.pop("legacy", None)
    old_results["kernels"] = {"probes": [{"name": "fixture", "status": "passed"}]}  # written by no phase
    old_results["verify"] = {"status": "passed"}  # a shape verify never wrote
    data.update(schema_version=1, results=old_results)
    path.write_text(json.dumps(data))
    record = store.load(run_id)
    assert record.schema_version == SCHEMA_VERSION
    assert record.results.merge is not None and record.results.replay is not None
    assert record.results.verify is None
    assert record.results.legacy == {"kernels": old_results["kernels"], "verify": {"status": "passed"}}
    assert record.notes[-1] == "migrated from record schema 1: kept unread in results.legacy: kernels, verify"
    store.save(record)
    assert store.load(run_id).results.legacy == record.results.legacy  # saved once, read as is


def test_a_newer_record_is_refused_with_one_line(merged) -> None:
    store, run_id, path = merged
    data = json.loads(path.read_text())
    data["schema_version"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(data))
    with pytest.raises(StateError, match="newer than this ds4sync reads"):
        store.load(run_id)


def test_a_result_of_the_wrong_shape_is_refused_naming_the_field(merged) -> None:
    store, run_id, path = merged
    data = json.loads(path.read_text())
    data["results"]["gates"] = {"unit": {"tier": "unit"}}
    path.write_text(json.dumps(data))
    with pytest.raises(StateError, match=r"results\.gates\.unit\.repo: Field required"):
        store.load(run_id)
    record = RunResults()
    with pytest.raises(ValueError):
        record.merge = {"not": "a merge"}  # type: ignore[assignment]


def _old_gate(name: str, kind: str, details: dict) -> dict:
    """A gate result as schema 1 wrote it: ``details`` a free dict."""
    return {"schema_version": 1, "name": name, "tier": "unit", "kind": kind, "status": "passed", "details": details}


def test_schema_1_gate_details_migrate_to_the_kinds_models_keeping_unknown_keys(merged) -> None:
    """Free-dict details of every kind load typed; a key no field declares, or a value of the wrong type,
    is kept unread in ``details.legacy``; the record then saves and loads as it is."""
    store, run_id, path = merged
    serving = ServingResult(
        status="passed",
        base_url="http://127.0.0.1:8000",
        started=True,
        probes=(ProbeResult(name="throughput", status="passed", value=301.2, unit="tok/s"),),
    )
    old = [
        _old_gate(
            "unit-tests",
            "pytest",
            {
                "display_command": "python -m pytest -q tests",
                "junit": "logs/unit-unit-tests.xml",
                "tests": "many",  # a wrong type: kept unread, never read as a count
                "slowest": [["tests/test_a.py::test_x", 1.25]],
                "missing_paths": ["tests/gone/"],
                "selected_because": "tests/test_a.py changed",
                "environment": {"python": "3.11.9", "torch": "absent"},  # a Ray node's fingerprint
                "executor": {"kind": "ray", "node_id": "n1", "node_ip": "10.0.0.2", "host": "gpu-1"},
                "flakiness_score": 0.3,  # a key no ds4sync writes
            },
        ),
        _old_gate("ruff", "static", {"tool": "ruff 0.14.3", "base": "a" * 40, "files": 3, "cached_duration_s": 2}),
        _old_gate("versions", "command", {}),
        _old_gate(
            "serve",
            "serving",
            {"probes": [{"name": "throughput"}], "startup": None, "serving": serving.model_dump(mode="json")},
        ),
    ]
    data = json.loads(path.read_text())
    data["results"]["gates"] = {
        "unit": {"schema_version": 1, "tier": "unit", "repo": ".", "started_at": "x", "duration_s": 1.0, "gates": old}
    }
    path.write_text(json.dumps(data))
    record = store.load(run_id)
    pytest_gate, static, command, serve = record.results.gates["unit"].gates
    assert {g.schema_version for g in (pytest_gate, static, command, serve)} == {RESULT_SCHEMA_VERSION}
    assert isinstance(pytest_gate.details, PytestDetails)
    assert pytest_gate.details.junit == "logs/unit-unit-tests.xml" and pytest_gate.details.tests is None
    assert pytest_gate.details.slowest == (("tests/test_a.py::test_x", 1.25),)
    assert pytest_gate.details.missing_paths == ("tests/gone/",)
    assert pytest_gate.details.executor == RayExecution(
        node_id="n1", node_ip="10.0.0.2", host="gpu-1", environment={"python": "3.11.9", "torch": "absent"}
    )
    assert pytest_gate.details.environment is None  # the environment's name was never recorded for a Ray run
    assert pytest_gate.details.legacy == {"tests": "many", "flakiness_score": 0.3}
    assert isinstance(static.details, StaticDetails) and static.details.files == 3 and not static.details.legacy
    assert static.details.cached_duration_s == 2.0
    assert command.details.kind == "command"
    assert isinstance(serve.details, ServingDetails) and serve.details.serving == serving
    assert not serve.details.legacy  # probes and startup were copies of what `serving` holds
    store.save(record)
    saved = json.loads(path.read_text())["results"]["gates"]["unit"]["gates"]
    assert saved[0]["details"]["junit"] == "logs/unit-unit-tests.xml" and "tool" not in saved[0]["details"]
    assert saved[2]["details"] == {"kind": "command"}  # nothing recorded: nothing written
    assert store.load(run_id) == record


def test_every_gate_kind_has_its_details_model() -> None:
    assert set(DETAILS_BY_KIND) == set(KIND_MODULES)
    for kind, model in DETAILS_BY_KIND.items():
        for name, field in model.model_fields.items():
            assert name == "kind" or field.description, f"{model.__name__}.{name} says what it holds"
        assert model.model_validate({"kind": kind}).kind == kind
