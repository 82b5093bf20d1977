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
