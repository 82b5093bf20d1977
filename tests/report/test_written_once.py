"""The report and its summary are written from one view of the record, and only when their text changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ds4sync.models.record import RecordStore
from ds4sync.report import render_report
from ds4sync.report.files import write_report
from tests.report.pipeline_runs import failed_run


def _stamps(*paths: Path) -> list[tuple[int, int]]:
    return [(os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in paths]


@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> tuple[RecordStore, str]:
    """A failed nightly's store and run id, made once per module: the tests read its record and write their
    reports into stores of their own."""
    return failed_run(tmp_path_factory.mktemp("run"))


def test_a_report_whose_record_did_not_change_is_not_written_again(
    failed: tuple[RecordStore, str], tmp_path: Path, templates: Path
) -> None:
    store, run_id = failed
    record = store.load(run_id)
    out = RecordStore(tmp_path / "state")
    report = write_report(out, record, templates.parent)
    summary = report.with_name("summary.json")
    assert report.read_text() == render_report(record, templates_dir=templates)
    assert summary.read_text() == render_report(record, templates_dir=templates, fmt="json")
    before = _stamps(report, summary)
    assert write_report(out, record, templates.parent) == report
    assert _stamps(report, summary) == before, "the same record: neither file is replaced"

    record.status = "aborted"
    record.notes.append("aborted; backup kept")
    write_report(out, record, templates.parent)
    assert _stamps(report, summary) != before
    assert "(aborted)" in report.read_text() and "aborted; backup kept" in report.read_text()
    assert json.loads(summary.read_text())["run"]["status"] == "aborted"


def test_a_report_file_changed_by_hand_is_written_again(
    failed: tuple[RecordStore, str], tmp_path: Path, templates: Path
) -> None:
    store, run_id = failed
    record = store.load(run_id)
    out = RecordStore(tmp_path / "state")
    report = write_report(out, record, templates.parent)
    expected = report.read_bytes()
    report.write_bytes(expected.replace(b"\n", b"\r\n"))  # the same text to a reader, not the same file
    write_report(out, record, templates.parent)
    assert report.read_bytes() == expected
