"""Record updates validate: a wrong value fails where it is stored, naming the field; old records still load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ds4sync.core.model import updated
from ds4sync.core.record import ForkRef, PhaseState, UpstreamRef
from ds4sync.models.gates_results import GateResult, TestCounts, TierResult
from ds4sync.models.merge_results import ConflictEntry, MergeSummary
from ds4sync.models.publish_results import PublishResult
from ds4sync.models.record import RecordStore, RunRecord

GATE = GateResult(name="g", tier="unit", kind="pytest", status="passed", counts=TestCounts(passed=2))
TIER = TierResult(tier="unit", repo="/r", started_at="2026-01-01T00:00:00+00:00", duration_s=1.0, gates=(GATE,))
MERGE = MergeSummary(upstream_sha="a" * 40, fork_sha="b" * 40, merge_base="c" * 40, upstream_commits=1, fork_commits=1)
CONFLICT = ConflictEntry.model_validate({"path": "a.py", "kind": "content"})


def _record() -> RunRecord:
    return RunRecord(
        run_id="20260101-000000-aaaaaaaaaa",
        repo="/r",
        state_dir="/s",
        upstream=UpstreamRef(remote="upstream", ref="main", sha="a" * 40),
        fork=ForkRef(branch="fork", head_before="b" * 40),
        sync_branch="sync/x",
        worktree="/w",
        backup_ref="refs/ds4sync/backup/x",
    )


# (model, field, a value its field refuses) for models the record holds, frozen and not.
WRONG: list[tuple[BaseModel, str, Any]] = [
    (GATE, "status", "green"),
    (GATE, "counts", 3),
    (GATE, "duration_s", "fast"),
    (GATE, "failures", ["not a failure"]),
    (GATE, "details", {"tests": "many"}),  # a wrong type inside the kind's details names the gate's field
    (GATE, "details", {"ruff": "0.14"}),  # a key the kind's details do not declare
    (TIER, "gates", ({"name": "g"},)),
    (TestCounts(), "passed", "two"),
    (MERGE, "merge_commit", 123),
    (MERGE, "conflicts", ("a.py",)),
    (CONFLICT, "resolution", "guessed"),
    (PhaseState(), "status", "half-done"),
    (PublishResult(status="refused", repo="o/r", remote="origin", head_branch="sync/x", base="fork"), "status", "meh"),
    (_record(), "status", "shipped"),
]


@pytest.mark.parametrize(("model", "field", "value"), WRONG, ids=[f"{type(m).__name__}.{f}" for m, f, _ in WRONG])
def test_a_wrong_value_fails_at_the_update_naming_the_field(model: BaseModel, field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"^{type(model).__name__}\.{field}"):
        updated(model, **{field: value})


@pytest.mark.parametrize("model", [GATE, TIER, MERGE, CONFLICT, _record()], ids=lambda m: type(m).__name__)
def test_an_unknown_field_fails_and_a_good_update_keeps_the_rest(model: BaseModel) -> None:
    with pytest.raises(ValueError, match=rf"^{type(model).__name__}\.statsu: no such field"):
        updated(model, statsu="passed")
    field = next(iter(type(model).model_fields))
    value = getattr(model, field)
    same = updated(model, **{field: value})
    assert same == model and same is not model
    assert same.model_fields_set == model.model_fields_set | {field}


def test_a_good_update_is_validated_and_coerced() -> None:
    cached = updated(GATE, status="cached", duration_s=0, counts={"passed": 5})
    assert cached.status == "cached" and cached.counts == TestCounts(passed=5) and cached.name == "g"
    assert GATE.status == "passed"  # the original is left alone


def test_a_wrong_assignment_to_the_record_or_a_phase_fails_where_it_is_made() -> None:
    record = _record()
    with pytest.raises(ValueError, match="status"):
        record.status = "shipped"  # type: ignore[assignment]
    state = record.phase("merge")
    with pytest.raises(ValueError, match="status"):
        state.status = "half-done"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="gates"):
        record.results.gates = {"unit": "passed"}  # type: ignore[dict-item]


def _old_json(**extra: Any) -> dict[str, Any]:
    data = json.loads(_record().model_dump_json())
    data.update(extra)
    return data


@pytest.mark.parametrize(
    ("data", "legacy"),
    [
        (_old_json(followups=[]), None),  # every record written before the field was retired
        (_old_json(followups=[{"sha": "d" * 40}]), [{"sha": "d" * 40}]),
        (_old_json(schema_version=1, results={"merge": None}, followups=[{"sha": "e" * 40}]), [{"sha": "e" * 40}]),
    ],
    ids=["empty", "held-something", "schema-1"],
)
def test_an_old_record_with_the_retired_followups_field_loads(tmp_path: Path, data: dict, legacy: Any) -> None:
    store = RecordStore(tmp_path)
    path = store.record_path(data["run_id"])
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    record = store.load(data["run_id"])
    assert "followups" not in type(record).model_fields
    assert record.results.legacy.get("followups") == legacy
    if legacy:
        assert any("followups" in note for note in record.notes)
    store.save(record)
    assert "followups" not in json.loads(path.read_text())
    assert store.load(data["run_id"]) == record


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.notes.append(3),  # a list changed in place: no assignment validates it
        lambda r: r.results.gates.__setitem__("unit", "not a tier result"),
        lambda r: r.phases.__setitem__("gate", {"status": "green"}),
    ],
    ids=["note", "gate tier", "phase"],
)
def test_the_runner_saves_only_a_valid_record(tmp_path: Path, change: Any) -> None:
    """``update_run``, the one writer of the record, refuses what the model would not load, saving nothing."""
    from pydantic import ValidationError

    from ds4sync.demo.repobuild import RepoBuilder
    from ds4sync.runner import open_workspace, update_run

    repo = RepoBuilder(tmp_path / "repo")
    repo.commit({"a.txt": "a\n"}, "initial")
    ws = open_workspace(repo.path, state_dir=tmp_path / "state")
    record = _record()
    record.results.gates["unit"] = TIER
    update_run(ws, record)
    saved = ws.store.record_path(record.run_id).read_text()
    change(record)
    with pytest.raises(ValidationError):
        update_run(ws, record)
    assert ws.store.record_path(record.run_id).read_text() == saved
    assert ws.store.load(record.run_id).results.gates["unit"] == TIER


def test_the_package_changes_a_model_only_through_updated() -> None:
    """``model_copy(update=...)`` stores unvalidated values; the package calls it nowhere but in ``updated``'s own
    docstring (tests may, to forge what a bug or another version would write)."""
    package = Path(__file__).resolve().parents[1] / "ds4sync"
    found = [
        f"{path.relative_to(package.parent)}:{n}"
        for path in sorted(package.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if ".model_copy(update=" in line and path != package / "core" / "model.py"
    ]
    assert found == []
