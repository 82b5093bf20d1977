"""The rendered reports of recorded runs, compared exactly against golden files."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from ds4sync.report import render_report, report_schema
from ds4sync.report.render import render_compare
from tests.report.conftest import ROOT, assert_golden
from tests.report.records import failing_record, merge_only_record, rich_record

CASES = [
    ("rich.md", rich_record, {}),
    ("rich-public.md", rich_record, {"public": True}),
    ("rich-notes.md", rich_record, {"notes": "Codex assisted with conflict resolution and this draft.\n"}),
    ("rich-nightly.md", rich_record, {"kind": "nightly"}),
    ("rich.html", rich_record, {"fmt": "html"}),
    ("rich.json", rich_record, {"fmt": "json"}),
    ("merge-only.md", merge_only_record, {}),
    ("failing.md", failing_record, {}),
    ("failing-nightly.md", failing_record, {"kind": "nightly"}),
]


@pytest.mark.parametrize(("golden", "make", "options"), CASES, ids=[c[0] for c in CASES])
def test_report_matches_golden(templates: Path, golden: str, make, options) -> None:
    assert_golden(golden, render_report(make(), templates_dir=templates, **options))


def test_compare_matches_golden(templates: Path) -> None:
    assert_golden("compare-rich-failing.md", render_compare(rich_record(), failing_record(), templates_dir=templates))


def test_rendering_is_pure_and_repeatable(templates: Path) -> None:
    record = rich_record()
    first = render_report(record, templates_dir=templates)
    assert render_report(json.dumps(record), templates_dir=templates) == first
    assert record == rich_record(), "rendering must not change the record"


def test_json_summary_validates_against_the_published_schema(templates: Path) -> None:
    schema = report_schema()
    published = json.loads((ROOT / "reports" / "schema" / "report-summary.schema.json").read_text())
    assert published == schema, "reports/schema is stale: regenerate it with `ds4sync schema`"
    for make in (rich_record, merge_only_record, failing_record):
        summary = json.loads(render_report(make(), templates_dir=templates, fmt="json"))
        jsonschema.validate(summary, schema)
        assert summary["$schema"] == schema["$id"]
    broken = json.loads(render_report(rich_record(), templates_dir=templates, fmt="json"))
    broken["validation"]["tiers"][0]["gates"][0]["passed"] = "many"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
