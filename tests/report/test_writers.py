"""No report field without a writer: every run-record result the report reads is written by some phase.

The inputs are found in the report builder's own source (every ``results.<field>`` it reads);
the writers in the rest of the package (an assignment to ``results.<field>``, a write into it,
``setattr(record.results, ...)`` through ``record_result(ws, "<field>", ...)``, or a phase whose
result key is the field).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ds4sync.models.record import RunResults
from ds4sync.pipeline import PHASES
from ds4sync.report.build import READS

PACKAGE = Path(__file__).resolve().parents[2] / "ds4sync"


def _read_fields() -> set[str]:
    tree = ast.parse((PACKAGE / "report" / "build.py").read_text())
    fields = set(RunResults.model_fields)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in fields:
            base = node.value
            if (isinstance(base, ast.Name) and base.id == "results") or (
                isinstance(base, ast.Attribute) and base.attr == "results"
            ):
                found.add(node.attr)
    return found


def _written_fields() -> set[str]:
    fields = set(RunResults.model_fields)
    written = {p.result_key or p.name for p in PHASES} & fields
    for path in PACKAGE.rglob("*.py"):
        if path.is_relative_to(PACKAGE / "report") and path.name != "phase.py":
            continue
        text = path.read_text()
        written |= set(re.findall(r"\.results\.(\w+)(?:\[[^\]]*\])? = ", text)) & fields
        written |= set(re.findall(r"record_result\(\s*\w+,\s*\"(\w+)\"", text)) & fields
    return written


def test_the_builder_reads_only_what_it_declares() -> None:
    assert _read_fields() == set(READS)


def test_every_field_the_report_reads_has_a_writer() -> None:
    missing = set(READS) - _written_fields()
    assert not missing, f"the report reads results fields no phase writes: {sorted(missing)}"


def test_the_check_can_fail() -> None:
    assert "legacy" not in _written_fields()  # written only by the migration, never by a phase
    assert {"merge", "gates", "build", "report", "publish"} <= _written_fields()
