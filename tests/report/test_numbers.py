"""Every number in a report comes from the run record: none is typed into a template."""

from __future__ import annotations

import itertools
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ds4sync.report import render_report
from tests.report.records import failing_record, merge_only_record, rich_record

# A number not glued to letters (SHAs, "3x2048", "_C" yield none); commas are thousands separators.
_NUMBER = re.compile(r"(?<![A-Za-z_\d.,])\d[\d,]*(?:\.\d+)?(?![A-Za-z_\d])")
_STYLE = re.compile(r"<style>.*?</style>", re.S)
_COMMENT = re.compile(r"\{#.*?#\}", re.S)
_NAMES = re.compile(r"\b(?:h[1-6]|utf-8|ds4sync)\b|\w+\.md\.j2")  # tags, charset, our name, partials


def numbers_in(text: str) -> list[str]:
    """The numeric tokens of ``text``, as written."""
    return [m.group(0).rstrip(",") for m in _NUMBER.finditer(text)]


def _walk(data: Any) -> Iterator[Any]:
    yield data
    if isinstance(data, dict):
        for value in data.values():
            yield from _walk(value)
    elif isinstance(data, list):
        for value in data:
            yield from _walk(value)


def allowed_numbers(record: dict[str, Any]) -> list[float]:
    """Numbers a report may show: record values, numbers inside record text, list lengths, tallies."""
    found: list[float] = []
    for item in _walk(record):
        if isinstance(item, bool):
            continue
        if isinstance(item, int | float):
            found.append(float(item))
        elif isinstance(item, str):
            found.extend(float(n.replace(",", "")) for n in numbers_in(item))
        elif isinstance(item, list):
            found.append(float(len(item)))
            rows = [row for row in item if isinstance(row, dict)]
            for key in {k for row in rows for k in row}:
                found.extend(float(n) for n in Counter(str(row.get(key)) for row in rows).values())
    return found


def unexplained(text: str, record: dict[str, Any]) -> list[str]:
    """Numbers of ``text`` that no record value explains (at the shown precision)."""
    allowed = allowed_numbers(record)
    bad = []
    for token in numbers_in(text):
        value = float(token.replace(",", ""))
        places = len(token.partition(".")[2])
        if not any(abs(round(a, places) - value) < 1e-9 for a in allowed):
            bad.append(token)
    return bad


def unusual(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with every number replaced by an unlikely one (distinct, odd, with odd decimals)."""
    counter = itertools.count(7001, 37)

    def swap(item: Any) -> Any:
        if isinstance(item, bool):
            return item
        if isinstance(item, int):
            return next(counter)
        if isinstance(item, float):
            return next(counter) + 0.4375
        if isinstance(item, dict):
            return {k: swap(v) for k, v in item.items()}
        if isinstance(item, list):
            return [swap(v) for v in item]
        return item

    return swap(record)


def test_templates_hold_no_number_literals(templates: Path) -> None:
    for path in sorted(templates.glob("*.j2")):
        source = _NAMES.sub("", _STYLE.sub("", _COMMENT.sub("", path.read_text(encoding="utf-8"))))
        digits = re.findall(r".{0,20}\d.{0,20}", source)
        assert not digits, f"{path.name} types a number: {digits}"


@pytest.mark.parametrize("make", [rich_record, failing_record, merge_only_record])
@pytest.mark.parametrize(("fmt", "kind"), [("md", "pr"), ("html", "pr"), ("md", "nightly")])
def test_every_number_shown_comes_from_the_record(templates: Path, make, fmt: str, kind: str) -> None:
    record = unusual(make())
    text = render_report(record, templates_dir=templates, fmt=fmt, kind=kind)  # type: ignore[arg-type]
    text = re.sub(r"&#\d+;", "", _STYLE.sub("", text))  # CSS sizes and HTML escapes are not measurements
    assert unexplained(text, record) == []
    # The unusual values really are what the report shows (not a coincidence of small numbers).
    assert any(float(t.replace(",", "")) >= 7001 for t in numbers_in(text))


def test_unusual_counts_reach_the_gate_lines(templates: Path) -> None:
    record = unusual(rich_record())
    gate = record["results"]["gates"]["unit"][0]
    text = render_report(record, templates_dir=templates)
    assert f"{gate['counts']['passed']} passed, {gate['counts']['deselected']} deselected" in text


def test_a_typed_number_is_caught(tmp_path: Path, templates: Path) -> None:
    shutil.copytree(templates, tmp_path / "reports")
    summary = tmp_path / "reports" / "_summary.md.j2"
    summary.write_text(summary.read_text() + "\nThe focused suite had 309 passed.\n")
    record = unusual(rich_record())
    text = render_report(record, templates_dir=tmp_path / "reports")
    assert unexplained(text, record) == ["309"]
