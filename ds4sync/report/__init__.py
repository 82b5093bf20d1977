"""The report: the PR description, nightly summary and JSON summary of a sync run.

``render_report(record, templates_dir=...)`` is pure (record in, text out);
``write_report(store, record, profile)`` writes it next to the run record.
"""

from __future__ import annotations

from ds4sync.report.files import write_report
from ds4sync.report.render import render_report, report_schema, report_view

__all__ = ["render_report", "report_schema", "report_view", "write_report"]
