"""The report: the PR description, nightly summary and JSON summary of a sync run.

``render_report(record, templates_dir=...)`` is pure (record in, text out);
``report.files.write_report`` writes it next to the run record, called by the runner only
(:mod:`ds4sync.runner`, the one writer of the record and its report).
"""

from __future__ import annotations

from ds4sync.report.render import render_report, report_schema, report_view

__all__ = ["render_report", "report_schema", "report_view"]
