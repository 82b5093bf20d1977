"""The nightly job: one run a night, never burying a run that waits for a person."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from tests.scenarios import BRANCH, lines, make_pair


def configure(pair) -> Path:
    path = pair.repo / "ds4sync.yaml"
    path.write_text(yaml.safe_dump({"upstream": {"remote": "upstream", "ref": "main"}, "fork": {"branch": BRANCH}}))
    return path


def test_nightly_fetches_and_syncs_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    configure(pair)
    newer = pair.upstream.commit({"c.py": lines("c")}, "upstream moves on after the last fetch")
    assert main(["nightly", "--repo", str(pair.repo)]) == 0
    out = capsys.readouterr().out
    assert ": done" in out and "report:" in out
    report = Path(out.split("report: ", 1)[1].splitlines()[0].strip())  # notes (last green) follow
    assert report.is_file() and newer in report.read_text()
    # The next night: nothing new upstream; the finished run waits to be promoted.
    assert main(["nightly", "--repo", str(pair.repo)]) == 0
    assert "nothing moved since run" in capsys.readouterr().out
    # After promotion, the fork contains upstream: still nothing to do.
    assert main(["promote", "--repo", str(pair.repo), "--allow-ungated"]) == 0  # no gate tier configured
    assert main(["nightly", "--repo", str(pair.repo)]) == 0
    assert "nothing moved" in capsys.readouterr().out


def test_nightly_does_not_bury_a_run_waiting_for_a_person(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("up")}], [{"a.py": lines("fork")}])
    configure(pair)
    assert main(["nightly", "--repo", str(pair.repo)]) == 4
    capsys.readouterr()
    pair.upstream.commit({"d.py": lines("d")}, "more upstream")
    assert main(["nightly", "--repo", str(pair.repo)]) == 4
    assert "still waiting for a person" in capsys.readouterr().out
    runs = list((pair.repo / ".git" / "ds4sync" / "runs").iterdir())
    assert len(runs) == 1


def test_cron_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [], [])
    configure(pair)
    assert main(["cron", "--repo", str(pair.repo), "--at", "03:15"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("15 3 * * * ") and f"nightly --repo {pair.repo}" in line and "nightly.log" in line
    assert main(["cron", "--repo", str(pair.repo), "--at", "25:00"]) == 2
