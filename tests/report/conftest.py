"""Fixtures of the report tests: the shipped templates and golden-file comparison."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "reports"
GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.fixture
def templates() -> Path:
    """The DS4 profile's report templates."""
    return TEMPLATES


def assert_golden(name: str, text: str) -> None:
    """``text`` equals ``golden/<name>`` exactly; DS4SYNC_UPDATE_GOLDEN=1 rewrites the file instead."""
    path = GOLDEN / name
    if os.environ.get("DS4SYNC_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"missing golden file {path}; run with DS4SYNC_UPDATE_GOLDEN=1 once and review it"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"rendered output differs from {path} (DS4SYNC_UPDATE_GOLDEN=1 to accept)"
