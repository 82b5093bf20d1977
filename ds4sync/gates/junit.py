"""JUnit XML from pytest read into logical tests, and pytest's own summary line.

pytest is run with ``-o junit_family=xunit1`` so each ``<testcase>`` carries ``file``:
with it the node id is rebuilt exactly (``file::Class::name[param]``), which a rerun of
the failed tests needs. pytest writes one ``<testcase>`` per *report*, not per test: a test
that fails and then errors in teardown appears twice, and with pytest-rerunfailures each
attempt appears again. :func:`read_junit` folds them back into one :class:`CaseResult` per
node id (setup/teardown errors attached to their test, reruns that ended green marked
``flaky``). ``<testcase>`` elements are read at any depth, so nested ``<testsuite>`` elements
(merged reports) count.

The XML is parsed with the standard library's expat parser (``xml.etree``) whatever else
is installed, streamed so that a huge ``system-out`` costs no memory, and refused above
:data:`MAX_JUNIT_BYTES`. Malformed, truncated or NUL-carrying files raise
:class:`JUnitError` with the reason; the gate then ends ``error``.

Deselected and xpassed tests are not marked in the XML (an xpass is a plain passing
``<testcase>``); their numbers come from pytest's own summary line
(``309 passed, 25 deselected in 12.3s``), read by :func:`summary_counts`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from xml.etree.ElementTree import Element, ParseError, iterparse

CaseOutcome = Literal["passed", "failed", "error", "skipped", "xfailed"]
MAX_JUNIT_BYTES = 256 * 1024 * 1024
MAX_TEXT = 20_000  # characters kept of one failure's text (the traceback)
_PART = r"\d+ (?:passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?|rerun)"
# pytest's terminal summary: `== 3 failed, 1 passed in 0.12s ==`, `-q`: without the bars;
# `no tests ran in 0.01s`; long runs add ` (0:01:02)`.
_SUMMARY_LINE = re.compile(
    rf"^(?:=+ )?(?P<parts>{_PART}(?:, {_PART})*|no tests ran) in [\d.]+s(?: \(\d+:\d\d:\d\d\))?(?: =+)?$"
)
_SUMMARY_PART = re.compile(r"(\d+) (\w+)")
_PHASE_ERROR = re.compile(r"^failed on (setup|teardown) with ")


class JUnitError(Exception):
    """The JUnit XML is missing, too large or malformed; the gate's result is ``error``."""


@dataclass(frozen=True)
class CaseResult:
    """One logical test: node id, outcome, message and failure text, duration in seconds.

    ``outcome``: passed, failed, error (setup/teardown or collection), skipped or xfailed;
    a strict xpass is ``failed`` (pytest fails it). ``flaky``: it failed, was rerun by
    pytest-rerunfailures and then passed. ``attached``: setup/teardown errors of a test
    whose own outcome is given (a failing test that also errored on teardown is one test,
    failed, with the teardown error attached). ``collection``: an error collecting a file
    (``node_id`` is then the file).
    """

    node_id: str
    outcome: CaseOutcome
    message: str = ""
    text: str = ""
    duration_s: float = 0.0
    flaky: bool = False
    attached: tuple[str, ...] = field(default=())
    collection: bool = False


@dataclass
class _Report:
    """One ``<testcase>`` element: what pytest reported for one phase of one test."""

    node_id: str
    kind: Literal["pass", "failure", "error", "skipped"]
    message: str
    text: str
    skip_type: str
    duration_s: float
    collection: bool


def read_junit(path: Path) -> list[CaseResult]:
    """Every logical test in a pytest JUnit XML file, in the order first seen.

    Raises:
        JUnitError: the file is missing, empty, larger than :data:`MAX_JUNIT_BYTES`, not
            well-formed XML (truncated, NUL bytes...), or has no ``<testsuite>``.
    """
    if not path.is_file() or path.stat().st_size == 0:
        raise JUnitError(f"JUnit XML not written: {path}")
    size = path.stat().st_size
    if size > MAX_JUNIT_BYTES:
        raise JUnitError(f"JUnit XML too large to read: {path} is {size:,} bytes (limit {MAX_JUNIT_BYTES:,})")
    grouped: dict[str, list[_Report]] = {}
    for report in _reports(path):
        grouped.setdefault(report.node_id, []).append(report)
    return [_logical(node_id, reports) for node_id, reports in grouped.items()]


def _reports(path: Path) -> Iterator[_Report]:
    suites = 0
    try:
        for event, elem in iterparse(str(path), events=("start", "end")):
            if event == "start":
                suites += elem.tag == "testsuite"
                continue
            if elem.tag in ("system-out", "system-err", "properties"):
                elem.clear()  # captured output can be huge; nothing of it is counted
            elif elem.tag == "testcase":
                yield _report(elem)
                elem.clear()
    except ParseError as exc:
        raise JUnitError(f"malformed JUnit XML {path}: {exc}") from exc
    if not suites:
        raise JUnitError(f"not JUnit XML (no <testsuite>): {path}")


def _report(case: Element) -> _Report:
    classname, name, file = case.get("classname") or "", case.get("name") or "", case.get("file")
    kind: Literal["pass", "failure", "error", "skipped"] = "pass"
    message = text = skip_type = ""
    for child in case:
        if child.tag in ("failure", "error", "skipped"):
            kind = child.tag  # type: ignore[assignment]
            message, text = child.get("message") or "", (child.text or "")[:MAX_TEXT]
            skip_type = child.get("type") or ""
            if kind == "error":
                break  # an error wins over anything else in the same element
    collection = kind == "error" and message == "collection failure"
    node_id = file if collection and file else node_id_of(classname, name, file)
    raw_time = case.get("time") or "0"
    try:
        duration = float(raw_time)
    except ValueError as exc:
        raise JUnitError(f"testcase {node_id or '(unnamed)'} has time={raw_time!r}, not a number of seconds") from exc
    return _Report(node_id, kind, message, text, skip_type, duration, collection)


def _logical(node_id: str, reports: list[_Report]) -> CaseResult:
    """Fold the reports of one node id: setup/teardown errors attach, reruns collapse."""
    phase_errors = [r for r in reports if r.kind == "error" and _PHASE_ERROR.match(r.message)]
    teardown = [r for r in phase_errors if r.message.startswith("failed on teardown")]
    calls = [r for r in reports if r not in phase_errors]
    duration = sum(r.duration_s for r in reports)
    if not calls:  # only errors: setup failed (the test never ran), or a lone teardown error
        first = phase_errors[0]
        rest = tuple(r.message for r in phase_errors[1:])
        return CaseResult(node_id, "error", first.message, first.text, duration, attached=rest)
    last = calls[-1]
    attached = tuple(r.message for r in teardown)
    flaky = len(calls) > 1 and last.kind == "pass"
    if last.kind == "failure":
        return CaseResult(node_id, "failed", last.message, last.text, duration, attached=attached)
    if last.kind == "error":
        return CaseResult(node_id, "error", last.message, last.text, duration, collection=last.collection)
    if teardown:  # the test itself passed or skipped, then its teardown failed: an error
        return CaseResult(node_id, "error", teardown[0].message, teardown[0].text, duration, flaky=flaky)
    if last.kind == "skipped":
        outcome: CaseOutcome = "xfailed" if last.skip_type == "pytest.xfail" else "skipped"
        return CaseResult(node_id, outcome, last.message, last.text, duration)
    return CaseResult(node_id, "passed", "", "", duration, flaky=flaky)


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


def summary_line(output: str) -> str | None:
    """pytest's own final summary line in ``output`` (bars stripped), or None when there is none.

    Only a line in pytest's exact format counts (``3 passed, 1 deselected in 0.12s``,
    optionally between ``=`` bars), so text a test or plugin prints near the end is not
    taken for it; of several, the last wins (pytest prints it once, last).
    """
    found = None
    for line in output.splitlines():
        match = _SUMMARY_LINE.match(line.strip())
        if match:
            found = line.strip().strip("=").strip()
    return found


def summary_counts(output: str) -> dict[str, int]:
    """Counts from pytest's final summary line (``== 3 passed, 1 deselected in 0.1s ==``).

    Keys: passed, failed, errors, skipped, deselected, xfailed, xpassed, warnings, rerun;
    words the line does not have are absent; no summary line gives ``{}``.
    """
    line = summary_line(output)
    if line is None:
        return {}
    words = line.rsplit(" in ", 1)[0]
    found: dict[str, int] = {}
    for number, word in _SUMMARY_PART.findall(words):
        key = {"error": "errors", "warning": "warnings"}.get(word, word)
        found[key] = int(number)
    return found
