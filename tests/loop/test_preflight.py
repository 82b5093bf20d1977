"""`config check` and `nightly` share one preflight: whatever stops a night before it changes anything,
config check reports with the same line (exit 2), and where config check says ok the night starts."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, Pair, lines, make_pair


def _config(pair: Pair, **extra: object) -> None:
    data = {"fork": {"branch": BRANCH}, **extra}
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump(data))


def _no_branch(pair: Pair, _profile: Path) -> None:
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump({"upstream": {"ref": "main"}}))
    subprocess.run(["git", "checkout", "-q", "--detach"], cwd=pair.repo, check=True)


def _missing_branch(pair: Pair, _profile: Path) -> None:
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump({"fork": {"branch": "no-such-branch"}}))


def _bad_ref(pair: Pair, _profile: Path) -> None:
    _config(pair, upstream={"ref": "-main"})


def _missing_gate_file(pair: Pair, profile: Path) -> None:
    (profile / "gates" / "unit.yaml").unlink()
    _config(pair, profile=str(profile), gates={"tiers": ["unit"]})


def _missing_bisect_tier(pair: Pair, profile: Path) -> None:
    _config(pair, profile=str(profile), nightly={"bisect_on_failure": True, "bisect_tier": "static"})
    (profile / "gates" / "static.yaml").unlink()


def _bad_patchset(pair: Pair, profile: Path) -> None:
    target = next((profile / "patches").glob("*/patchset.yaml"))
    target.write_text(target.read_text() + "bogus_key: 1\n")
    _config(pair, profile=str(profile))


def _shallow(pair: Pair, _profile: Path) -> None:
    (pair.repo / ".git" / "shallow").write_text(pair.fork.head() + "\n")
    _config(pair)


CASES: list[tuple[Callable[[Pair, Path], None], str]] = [
    (_no_branch, "no fork branch given and HEAD is detached"),
    (_missing_branch, "no local branch named 'no-such-branch'"),
    (_bad_ref, "-main"),
    (_missing_gate_file, "no gate file for tier 'unit'"),
    (_missing_bisect_tier, "no gate file for tier 'static'"),
    (_bad_patchset, "bogus_key"),
    (_shallow, "shallow clone"),
]


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    return make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    """A copy of the shipped profile's gates/ and patches/, to break one file of."""
    root = Path(__file__).resolve().parents[2]
    folder = tmp_path / "profile"
    for name in ("gates", "patches"):
        shutil.copytree(root / name, folder / name)
    return folder


@pytest.mark.parametrize(("damage", "said"), CASES, ids=[c[0].__name__.strip("_") for c in CASES])
def test_what_stops_a_night_config_check_reports_the_same(
    pair: Pair, profile: Path, damage: Callable[[Pair, Path], None], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    damage(pair, profile)
    capsys.readouterr()
    assert main(["config", "check", "--repo", str(pair.repo), "--json"]) == 2
    data = cli_data(capsys.readouterr().out)
    assert data["ok"] is False and any(said in p for p in data["problems"])
    assert main(["config", "check", "--repo", str(pair.repo)]) == 2
    shown = capsys.readouterr().out
    assert ": ok" not in shown.splitlines()[0] and "problem: " in shown and said in " ".join(shown.split())
    assert main(["nightly", "--repo", str(pair.repo), "--no-notify"]) == 2
    refused = " ".join(capsys.readouterr().err.split())
    assert said in refused
    assert not list((pair.repo / ".git" / "ds4sync").glob("runs/*/record.json"))  # refused before any run


def test_where_config_check_says_ok_the_night_starts(pair: Pair, capsys: pytest.CaptureFixture[str]) -> None:
    _config(pair)
    assert main(["config", "check", "--repo", str(pair.repo), "--json"]) == 0
    assert cli_data(capsys.readouterr().out) | {"problems": []} == cli_data_ok(pair, capsys)
    assert main(["nightly", "--repo", str(pair.repo), "--no-notify"]) in (0, 1, 4)
    assert list((pair.repo / ".git" / "ds4sync").glob("runs/*/record.json"))


def cli_data_ok(pair: Pair, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["config", "check", "--repo", str(pair.repo), "--json"]) == 0
    data = cli_data(capsys.readouterr().out)
    assert data["ok"] is True and data["problems"] == []
    return data
