"""A failed night still leaves a report, and its one line names the gate, the cause and the log."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair
from tests.timing import scaled, scaled_s

CHECK = "import sys; sys.path.insert(0, '.'); import a; assert 'up' in a.NAMES, f'lost in the merge: {a.NAMES}'"


def _python_without_pytest(folder: Path) -> Path:
    """A real interpreter whose environment has no pytest (as on a fresh CI runner missing the test extra)."""
    venv.EnvBuilder(with_pip=False).create(folder)
    return folder / "bin" / "python"


@pytest.fixture
def failing(tmp_path: Path):
    """A fork whose merged tree fails a command gate (an assertion) and a pytest gate (pytest missing)."""
    pair = make_pair(
        tmp_path,
        {"a.py": "NAMES = ['base']\n", "tests/test_a.py": "def test_a():\n    assert True\n"},
        [{"c.py": lines("upstream")}],
        [{"b.py": lines("fork")}],
    )
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    gates = {
        "tier": "unit",
        "gates": [
            {
                "name": "names-kept",
                "kind": "command",
                "run": {"argv": ["{python}", "-c", CHECK]},
                "timeout": scaled_s(60),
            },
            {"name": "unit-tests", "kind": "pytest", "run": {"paths": ["tests"]}, "timeout": scaled_s(60)},
        ],
    }
    (profile / "gates" / "unit.yaml").write_text(yaml.safe_dump(gates))
    python = _python_without_pytest(tmp_path / "venv")
    config = {
        "upstream": {"remote": "upstream", "ref": "main"},
        "fork": {"branch": BRANCH},
        "profile": str(profile),
        "gates": {"tiers": ["unit"], "python": str(python)},
    }
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump(config))
    return pair


def test_a_failed_nightly_writes_its_report_and_names_gate_cause_and_log(
    failing, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["nightly", "--repo", str(failing.repo)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3, out
    line, report_line, log_line = out
    run_dir = next((failing.repo / ".git" / "ds4sync" / "runs").iterdir())
    log = run_dir / "logs"
    assert "failed (gate: required gate unit/names-kept failed" in line
    assert "AssertionError: lost in the merge: ['base']" in line  # the cause, not only "exit 1"
    gate_log = line.split("(log: ", 1)[1].split(")", 1)[0]
    assert Path(gate_log).is_file() and Path(gate_log).is_relative_to(log)
    assert "(and 1 more)" in line
    assert log_line == f"log: {gate_log}"
    report = Path(report_line.removeprefix("report: "))
    assert report == run_dir / "report.md" and report.is_file()
    text = report.read_text()
    assert "(failed)" in text and "names-kept" in text and "unit-tests" in text
    assert "lost in the merge" in text and "No module named pytest" in text  # the report says why, too
    commands = (log / "ds4sync.log").read_text()  # every git and child command of the run, as -v shows them
    assert re.search(r"ds4sync\.git: git (-c \S+ )*merge --no-ff", commands)
    assert f"ds4sync.proc: run {failing.repo.parent / 'venv' / 'bin' / 'python'} -c import sys" in commands


def test_gate_table_shows_the_cause_from_the_log(failing, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["merge", "upstream/main", "--repo", str(failing.repo), "--json"]) == 0
    worktree = cli_data(capsys.readouterr().out)["worktree"]
    env = {**os.environ, "COLUMNS": "400", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    shown = subprocess.run(
        [sys.executable, "-m", "ds4sync.cli", "gate", "--tier", "unit", "--repo", str(failing.repo)],
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert shown.returncode == 1, shown.stderr
    rows = _table_rows(shown.stdout)
    assert "AssertionError: lost in the merge: ['base']" in rows["names-kept"]
    assert "JUnit XML not written" in rows["unit-tests"] and "No module named pytest" in rows["unit-tests"]
    assert Path(worktree).is_dir()


def test_the_report_of_a_stopped_run_is_replaced_when_it_finishes(tmp_path: Path, capsys) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("up")}], [{"a.py": lines("fork")}])
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump({"fork": {"branch": BRANCH}}))
    assert main(["nightly", "--repo", str(pair.repo), "--ref", "main", "--json"]) == 4
    data = cli_data(capsys.readouterr().out)
    report = Path(data["report"])
    assert "(needs-person)" in report.read_text() and "a.py" in report.read_text()
    worktree = Path(cli_data_status(pair, capsys)["worktree"])
    (worktree / "a.py").write_text(lines("fork", "up"))
    assert main(["resume", "--repo", str(pair.repo)]) == 0
    capsys.readouterr()
    assert "(done)" in report.read_text() and "(needs-person)" not in report.read_text()


def _table_rows(text: str) -> dict[str, str]:
    """Rows of a rich table as printed, by their first cell; a wrapped cell's lines joined with spaces."""
    rows: dict[str, list[list[str]]] = {}
    current: list[list[str]] | None = None
    for line in text.splitlines():
        if not line.startswith("│"):
            continue
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        if cells[0]:
            current = rows.setdefault(cells[0], [[] for _ in cells])
        if current is not None:
            for parts, cell in zip(current, cells, strict=False):
                if cell:
                    parts.append(cell)
    return {name: " | ".join(" ".join(parts) for parts in cells) for name, cells in rows.items()}


def cli_data_status(pair, capsys) -> dict:
    assert main(["status", "--repo", str(pair.repo), "--json"]) == 0
    return cli_data(capsys.readouterr().out)
