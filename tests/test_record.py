"""The typed run record: phases store their own models; schema-1 records (results as dicts) migrate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ds4sync.cli import main
from ds4sync.core.errors import StateError
from ds4sync.models.merge_results import MergeSummary
from ds4sync.models.record import SCHEMA_VERSION, RecordStore, RunResults
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
