"""benchmarks/durations_table.py on the JUnit XML of a real pytest run whose tests carry marks (through our hook)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks import durations_table as durations
from tests.timing import scaled

PROJECT = {
    "conftest.py": "from tests.conftest import pytest_collection_modifyitems  # noqa: F401 - the marks hook\n",
    "test_sample.py": """\
import time

import pytest


@pytest.mark.slow
def test_slow():
    time.sleep(0.4)


@pytest.mark.serving
@pytest.mark.slow
def test_serving():
    time.sleep(0.2)


@pytest.mark.parametrize("n", [1, 2])
def test_fast(n):
    assert n


def test_fails():
    assert False
""",
}


def _run(tmp_path: Path) -> Path:
    for name, text in PROJECT.items():
        (tmp_path / name).write_text(text)
    xml = tmp_path / "junit.xml"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"]
    argv += ["-o", "junit_family=xunit1", "-o", "markers=slow\nserving", "--rootdir", str(tmp_path), "test_sample.py"]
    res = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=scaled(120))
    assert res.returncode == 1, res.stdout + res.stderr  # test_fails fails: its time still counts
    return xml


def test_time_per_mark_area_and_slowest_from_real_junit(tmp_path: Path) -> None:
    run = durations.read_run([_run(tmp_path)])
    marks = {t.node_id.split("::")[1]: t.marks for t in run.tests}
    assert marks == {
        "test_slow": {"slow"},
        "test_serving": {"serving", "slow"},
        "test_fast[1]": set(),
        "test_fast[2]": set(),
        "test_fails": set(),
    }
    by_mark = durations.by_mark(run)
    assert {k: n for k, (n, _) in by_mark.items()} == {
        durations.FAST_LOOP: 3,
        "serving": 1,
        "slow": 2,
        "unmarked": 3,
    }
    assert by_mark["slow"][1] >= 0.6 and by_mark[durations.FAST_LOOP][1] < by_mark["slow"][1]
    text = durations.render(run, baseline=run, slowest=2)
    slowest = [line for line in text.splitlines() if line.startswith("| 0.")][:2]
    assert "test_slow" in slowest[0] and "test_serving" in slowest[1], text
    assert "1.00x" in text and "| test_sample.py | 5 |" in text


def test_steps_are_timed_from_their_starts(tmp_path: Path) -> None:
    steps = tmp_path / "steps.tsv"
    steps.write_text("1/2\t0\tvenv\n2/2\t7\tpip\nset-up done\t12\t\npytest parallel\t12\t-m x\nend\t40\t\n")
    assert durations.read_steps(steps) == [
        ("1/2 venv", 7.0),
        ("2/2 pip", 5.0),
        ("set-up done", 0.0),
        ("pytest parallel -m x", 28.0),
    ]
