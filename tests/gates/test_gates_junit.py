"""JUnit XML and pytest summary parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4sync.gates.junit import JUnitError, node_id_of, read_junit, summary_counts


@pytest.mark.parametrize(
    ("classname", "name", "file", "expected"),
    [
        ("tests.test_a", "test_x", "tests/test_a.py", "tests/test_a.py::test_x"),
        ("tests.test_a.TestB", "test_x[1-2]", "tests/test_a.py", "tests/test_a.py::TestB::test_x[1-2]"),
        ("tests.test_a.TestB.TestC", "test_y", "tests/test_a.py", "tests/test_a.py::TestB::TestC::test_y"),
        ("test_top", "test_z", "test_top.py", "test_top.py::test_z"),
        ("tests.v1.test_a.TestB", "test_x", None, "tests/v1/test_a.py::TestB::test_x"),
        ("", "tests.test_broken", None, "tests.test_broken"),
    ],
)
def test_node_id_of(classname: str, name: str, file: str | None, expected: str) -> None:
    assert node_id_of(classname, name, file) == expected


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("....\n309 passed, 25 deselected in 12.34s\n", {"passed": 309, "deselected": 25}),
        (
            "== 6 passed, 1 failed, 2 skipped, 4 deselected, 1 warning in 0.50s ==",
            {"passed": 6, "failed": 1, "skipped": 2, "deselected": 4, "warnings": 1},
        ),
        ("== 1 failed, 2 errors in 1.00s ==", {"failed": 1, "errors": 2}),
        ("=== 6 passed, 1666 deselected in 3.1s ===", {"passed": 6, "deselected": 1666}),
        ("collected 0 items\n\n=== no tests ran in 0.01s ===", {}),
        ("the 3 passed tests log line in a test's output\n", {}),
    ],
)
def test_summary_counts(output: str, expected: dict[str, int]) -> None:
    assert summary_counts(output) == expected


@pytest.mark.parametrize("content", ["", "<testsuites><testsuite", "<html><body/></html>"])
def test_bad_junit_is_an_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "r.xml"
    path.write_text(content)
    with pytest.raises(JUnitError):
        read_junit(path)


def test_missing_junit_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(JUnitError, match="not written"):
        read_junit(tmp_path / "absent.xml")


CASE = '<testcase classname="tests.test_a" name="{name}" file="tests/test_a.py" time="0.1"{body}'


def _suite(*cases: str, nested: bool = False, out: str = "") -> str:
    inner = "".join(cases)
    if nested:
        inner = f'<testsuite name="inner">{inner}</testsuite>'
    return f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{inner}{out}</testsuite></testsuites>'


def _case(name: str, child: str = "") -> str:
    return CASE.format(name=name, body=f">{child}</testcase>" if child else " />")


def test_the_only_failure_of_a_nested_suite_counts(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    path.write_text(_suite(_case("test_ok"), _case("test_bad", '<failure message="boom">tb</failure>'), nested=True))
    assert [(c.node_id, c.outcome) for c in read_junit(path)] == [
        ("tests/test_a.py::test_ok", "passed"),
        ("tests/test_a.py::test_bad", "failed"),
    ]


def test_a_huge_system_out_is_read(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    big = "x" * (12 * 1024 * 1024)  # above lxml's 10 MB text-node limit
    path.write_text(_suite(_case("test_ok", f"<system-out>{big}</system-out>")))
    assert [c.outcome for c in read_junit(path)] == ["passed"]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (_suite(_case("test_ok"))[:-30], "malformed JUnit XML"),  # truncated mid-file
        (_suite(_case("test_ok", "<system-out>a\x00b</system-out>")), "malformed JUnit XML"),  # a NUL byte
        ("<testsuites/>", "no <testsuite>"),
    ],
)
def test_broken_junit_says_why(tmp_path: Path, content: str, reason: str) -> None:
    path = tmp_path / "r.xml"
    path.write_text(content)
    with pytest.raises(JUnitError, match=reason):
        read_junit(path)


def test_oversize_junit_is_refused_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ds4sync.gates.junit as junit

    path = tmp_path / "r.xml"
    path.write_text(_suite(_case("test_ok")))
    monkeypatch.setattr(junit, "MAX_JUNIT_BYTES", 10)
    with pytest.raises(JUnitError, match="too large"):
        read_junit(path)


def test_parsing_does_not_depend_on_lxml(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "r.xml"
    path.write_text(_suite(_case("test_ok", "<system-out>" + "y" * (11 * 1024 * 1024) + "</system-out>")))
    probe = (
        "import sys; sys.modules['lxml'] = None; sys.modules['lxml.etree'] = None\n"
        "from pathlib import Path; from ds4sync.gates.junit import read_junit\n"
        f"print([c.outcome for c in read_junit(Path({str(path)!r}))], 'lxml' in sys.modules and sys.modules['lxml'])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['passed'] None"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("1 failed, 1 passed in 0.11s\n9 passed in 0.01s is what we hoped\n", {"failed": 1, "passed": 1}),
        ("== 1 failed, 2 passed, 3 rerun in 0.2s ==", {"failed": 1, "passed": 2, "rerun": 3}),
        ("1 passed, 1 xfailed, 1 xpassed in 1.0s (0:00:01)", {"passed": 1, "xfailed": 1, "xpassed": 1}),
    ],
)
def test_only_a_line_in_pytests_format_is_the_summary(output: str, expected: dict[str, int]) -> None:
    assert summary_counts(output) == expected


@pytest.mark.parametrize("value", ["abc", "", "1.5s"])
def test_junit_time_that_is_not_a_number_is_an_error_naming_the_case(tmp_path: Path, value: str) -> None:
    path = tmp_path / "j.xml"
    path.write_text(
        '<testsuites><testsuite name="pytest">'
        f'<testcase classname="tests.test_a" name="test_ok" file="tests/test_a.py" time="{value}"/>'
        "</testsuite></testsuites>"
    )
    if value == "":
        assert read_junit(path)[0].duration_s == 0.0  # an empty attribute reads as no time
        return
    with pytest.raises(JUnitError, match=r"tests/test_a.py::test_ok has time="):
        read_junit(path)
