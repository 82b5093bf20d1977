"""One run, one profile: every command that goes on with a run reads the profile it was started with.

A run started with ``--profile P`` keeps P's resolution store, report templates and gate definitions when
it is resumed, gated or reported without ``--profile``; a different profile is refused with one line and
leaves the run as it was. Real git in tmp_path repositories; nothing is mocked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ds4sync.models.config import shipped_profile
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines
from tests.test_merge_trust import conflict_pair, git, run_cli

MARKER = "MADE-WITH-THE-RUN-PROFILE"
GATES = "tier: unit\ngates:\n  - {name: from-the-run-profile, kind: command, run: {argv: ['true']}}\n"


def own_profile(root: Path) -> Path:
    """A profile of its own: the shipped report templates plus a marker line, no patch-sets, one unit gate."""
    profile = root / "profile"
    shutil.copytree(shipped_profile() / "reports", profile / "reports")
    template = profile / "reports" / "pr.md.j2"
    template.write_text(template.read_text() + f"\n{MARKER}\n")
    (profile / "patches").mkdir()
    (profile / "gates").mkdir()
    (profile / "gates" / "unit.yaml").write_text(GATES)
    return profile


@pytest.fixture
def waiting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    """A run started with its own profile, stopped for a person, the conflict resolved in its worktree."""
    pair = conflict_pair(tmp_path)
    profile = own_profile(tmp_path)
    code, out, err = run_cli(
        capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--profile", str(profile),
        "--json",
    )  # fmt: skip
    assert code == 4, err
    data = cli_data(out)
    Path(data["worktree"], "f.py").write_text(lines("fork", "up"))
    return {
        "repo": pair.repo,
        "profile": profile,
        "run_id": data["run_id"],
        "state": pair.repo / ".git" / "ds4sync",
        "worktree": Path(data["worktree"]),
    }


def test_resume_without_profile_records_into_the_runs_profile_and_renders_with_its_templates(
    waiting: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "resume", "--repo", str(waiting["repo"]), "--json")
    assert code == 0, err
    recorded = sorted(p.name for p in (waiting["profile"] / "patches" / "resolutions").iterdir())
    assert recorded, "the person's resolution went elsewhere than the run's profile"
    assert not (waiting["state"] / "resolutions").exists()  # not the state dir's store
    report = waiting["state"] / "runs" / waiting["run_id"] / "report.md"
    assert MARKER in report.read_text()
    # `ds4sync report` without --profile renders with the run's templates too; --profile still overrides
    code, out, _ = run_cli(capsys, "report", "--repo", str(waiting["repo"]), "--run", waiting["run_id"])
    assert code == 0 and MARKER in out
    shipped = ("--profile", str(shipped_profile()))
    code, out, _ = run_cli(capsys, "report", "--repo", str(waiting["repo"]), "--run", waiting["run_id"], *shipped)
    assert code == 0 and MARKER not in out


def test_gate_on_the_active_run_uses_the_runs_gate_definitions(
    waiting: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "gate", "--tier", "unit", "--repo", str(waiting["repo"]))
    assert code == 4 and "1 unmerged path(s) in the worktree: f.py" in err  # no tree yet for a gate to run on
    git(waiting["worktree"], "add", "f.py")
    code, out, err = run_cli(capsys, "gate", "--tier", "unit", "--repo", str(waiting["repo"]), "--json")
    assert code == 0, err
    assert [g["name"] for g in cli_data(out)["gates"]] == ["from-the-run-profile"]


@pytest.mark.parametrize("command", [("resume",), ("gate", "--tier", "unit")])
def test_another_profile_is_refused_and_the_run_is_left_as_it_was(
    waiting: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    other = tmp_path / "other-profile"
    (other / "patches").mkdir(parents=True)
    code, out, err = run_cli(capsys, *command, "--repo", str(waiting["repo"]), "--profile", str(other))
    assert code == 2
    [line] = err.strip().splitlines()
    assert f"run {waiting['run_id']} was started with the profile {waiting['profile']}" in line
    assert "--profile" in line
    assert not (waiting["profile"] / "patches" / "resolutions").exists()
    code, out, _ = run_cli(capsys, "status", "--repo", str(waiting["repo"]), "--json")
    assert cli_data(out)["status"] == "needs-person"


def test_a_relative_profile_is_recorded_whole_and_found_from_another_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = conflict_pair(tmp_path)
    own_profile(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(
        capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--profile", "profile", "--json"
    )
    assert code == 4, err
    data = cli_data(out)
    record = json.loads((pair.repo / ".git" / "ds4sync" / "runs" / data["run_id"] / "record.json").read_text())
    assert record["profile"] == str(tmp_path / "profile")  # whole, not as typed
    Path(data["worktree"], "f.py").write_text(lines("fork", "up"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 0, err
    assert list((tmp_path / "profile" / "patches" / "resolutions").iterdir())
