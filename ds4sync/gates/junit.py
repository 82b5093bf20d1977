"""JUnit XML from pytest, read with junitparser, and pytest's own summary line.

pytest is run with ``-o junit_family=xunit1`` so each ``<testcase>`` carries ``file``:
with it the node id is rebuilt exactly (``file::Class::name[param]``), which a rerun of
the failed tests needs. Deselected tests are not in the XML at all; their number comes
from pytest's summary line (``309 passed, 25 deselected in 12.3s``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from xml.etree.ElementTree import ParseError

from junitparser import Attr, Error, Failure, JUnitXml, JUnitXmlError, Skipped, TestCase, TestSuite

CaseOutcome = Literal["passed", "failed", "error", "skipped"]
_SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?)\b")


class JUnitError(Exception):
    """The JUnit XML is missing or malformed; the gate's result is ``error``."""


class _PytestCase(TestCase):
    """A ``<testcase>`` with pytest's xunit1 ``file`` attribute."""

    file = Attr()


@dataclass(frozen=True)
class CaseResult:
    """One test case: node id, outcome, message and full failure text, duration in seconds."""

    node_id: str
    outcome: CaseOutcome
    message: str = ""
    text: str = ""
    duration_s: float = 0.0


def read_junit(path: Path) -> list[CaseResult]:
    """Every test case in a pytest JUnit XML file, in file order.

    Raises:
        JUnitError: the file is missing, empty, not XML, or not JUnit (no testsuite).
    """
    if not path.is_file() or path.stat().st_size == 0:
        raise JUnitError(f"JUnit XML not written: {path}")
    try:
        xml = JUnitXml.fromfile(str(path))
    except (ParseError, ValueError, JUnitXmlError) as exc:
        raise JUnitError(f"malformed JUnit XML {path}: {exc}") from exc
    suites = [xml] if isinstance(xml, TestSuite) else list(xml)
    return [_case(case) for suite in suites for case in suite.iterchildren(_PytestCase)]


def _case(case: _PytestCase) -> CaseResult:
    node_id = node_id_of(case.classname or "", case.name or "", case.file)
    results = case.result
    try:
        duration = float(case.time or 0.0)
    except (TypeError, ValueError) as exc:
        raw = case._elem.get("time")
        raise JUnitError(f"testcase {node_id or '(unnamed)'} has time={raw!r}, not a number of seconds") from exc
    for kind, outcome in ((Error, "error"), (Failure, "failed"), (Skipped, "skipped")):
        hit = next((r for r in results if isinstance(r, kind)), None)
        if hit is not None:
            return CaseResult(node_id, outcome, hit.message or "", hit.text or "", duration)  # type: ignore[arg-type]
    return CaseResult(node_id, "passed", "", "", duration)


def node_id_of(classname: str, name: str, file: str | None) -> str:
    """pytest's node id from a JUnit testcase's ``classname``, ``name`` and xunit1 ``file``.

    ``classname`` is the dotted module path plus classes (``tests.unit.test_a.TestB``);
    ``file`` (``tests/unit/test_a.py``) tells where the module part ends. Without ``file``
    (xunit2) the best guess is module = every part but classes starting with an uppercase letter.
    """
    parts = [p for p in classname.split(".") if p]
    if file:
        module_parts = Path(file).with_suffix("").parts
        classes = parts[len(module_parts) :] if tuple(parts[: len(module_parts)]) == module_parts else []
        path = file
    else:
        classes = []
        while parts and parts[-1][:1].isupper():
            classes.insert(0, parts.pop())
        path = "/".join(parts) + ".py" if parts else ""
    if not path:  # a collection error reports the module in `name` and no classname
        return name
    return "::".join([path, *classes, name])


def summary_counts(output: str) -> dict[str, int]:
    """Counts from pytest's final summary line (``== 3 passed, 1 deselected in 0.1s ==``).

    Only the last line that looks like a summary is read; missing words are absent.
    """
    for line in reversed(output.splitlines()):
        if " in " in line and _SUMMARY.search(line) and re.search(r"\bin [\d.]+s", line):
            found: dict[str, int] = {}
            for number, word in _SUMMARY.findall(line):
                key = {"error": "errors", "warning": "warnings"}.get(word, word)
                found[key] = int(number)
            return found
        if re.search(r"no tests ran in [\d.]+s", line):
            return {}
    return {}
