"""Where gates run: each tier (or gate) names its environment (the build's venv, a venv of pinned tools,
ds4sync's own, or the target), and an environment that is not there is an error, never another python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gates_helpers import workspace, write_gates

from ds4sync.core.record import ForkRef, UpstreamRef
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.gates.runner import TierOptions, run_tier
from ds4sync.models.native_results import BuildResult
from ds4sync.models.record import RunRecord

RUFF = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True, text=True).stdout.split()[1]
# A command gate that says which interpreter ran it.
WHO = {"kind": "command", "run": {"argv": ["{python}", "-c", "import sys; print(sys.prefix); raise SystemExit(1)"]}}


def _tools(pin: str) -> dict:
    """A tools venv that an offline host can make: it inherits ds4sync's packages, pip never reaches an index."""
    return {"requirements": [f"ruff=={pin}"], "inherit": True, "pip_args": ["--no-index"]}


@pytest.fixture
def fork(builder: RepoBuilder) -> tuple[RepoBuilder, str]:
    builder.commit({"up.py": "X = 1\n"}, "upstream")
    base = builder.head()
    builder.commit({"fork/broken.py": "import os\n\n\ndef f():\n    return undefined_name\n"}, "fork delta")
    return builder, base


def _static(repo: RepoBuilder, doc: dict, base: str, **options):
    write_gates(repo, "static", yaml.safe_dump({"tier": "static", **doc}))
    return run_tier(workspace(repo), TierOptions(tier="static", changed_since=base, **options))


@pytest.mark.slow
def test_static_tier_in_a_tools_venv_runs_the_pinned_ruff_and_heads_with_the_worst_finding(
    fork: tuple[RepoBuilder, str],
) -> None:
    repo, base = fork
    doc = {
        "environment": "tools",
        "tools": _tools(RUFF),
        "gates": [
            {"name": "ruff-check", "kind": "static", "run": {"check": "ruff-check", "ruff_version": RUFF}},
            {"name": "who", **WHO, "environment": "ds4sync"},  # a gate's own environment wins over its tier's
        ],
    }
    result = _static(repo, doc, base)
    ruff, who = result.gates
    tools_python = Path(result.python or "")
    assert "tools-venvs" in tools_python.parts and ruff.command[0] == str(tools_python)
    assert ruff.status == "failed" and ruff.reason.startswith(f"ruff {RUFF}: 1 changed Python files, 2 problems")
    # Undefined names come before unused imports, in the findings and in the headline.
    assert [f.message.split()[0] for f in ruff.failures] == ["F821", "F401"]
    assert "; worst: fork/broken.py:5:12 F821 Undefined name `undefined_name`" in ruff.reason
    assert ruff.details.environment == "tools" and who.details.environment == "ds4sync"
    assert who.command[0] == sys.executable
    # Made once: the next tier reuses the venv whose pins were checked.
    assert _static(repo, doc, base).python == str(tools_python)


@pytest.mark.parametrize("pin", ["0.0.1", "99.0.0"])
def test_a_tools_venv_without_its_pinned_tool_is_an_error_naming_it(fork: tuple[RepoBuilder, str], pin: str) -> None:
    repo, base = fork
    doc = {
        "environment": "tools",
        "tools": _tools(pin),
        "gates": [
            {"name": "ruff-check", "kind": "static", "run": {"check": "ruff-check"}},
            {"name": "ruff-format", "kind": "static", "run": {"check": "ruff-format"}},
        ],
    }
    result = _static(repo, doc, base)
    for gate in result.gates:
        assert gate.status == "error" and gate.counts.passed == 0, gate
        assert gate.reason.startswith("environment tools: ") and f"ruff=={pin}" in gate.reason
    assert not result and result.python is None


def test_ruff_missing_from_the_chosen_environment_is_an_error_even_with_nothing_changed(
    fork: tuple[RepoBuilder, str], tmp_path: Path
) -> None:
    repo, _ = fork
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    doc = {"gates": [{"name": "ruff-format", "kind": "static", "run": {"check": "ruff-format"}}]}
    gate = _static(repo, doc, repo.head(), python=str(bare / "bin" / "python")).gates[0]
    assert gate.status == "error" and "ruff does not run as" in gate.reason


def test_a_tier_in_the_builds_venv_outside_a_run_is_an_error_not_another_python(
    fork: tuple[RepoBuilder, str],
) -> None:
    repo, base = fork
    result = _static(repo, {"environment": "build", "gates": [{"name": "who", **WHO}]}, base)
    gate = result.gates[0]
    assert gate.status == "error" and gate.command == ()
    assert "runs in the build's venv, but not inside a sync run" in gate.reason


def test_ds4sync_yaml_names_a_tiers_environment_over_its_file(fork: tuple[RepoBuilder, str]) -> None:
    repo, base = fork
    repo.commit({"ds4sync.yaml": yaml.safe_dump({"gates": {"environments": {"static": "ds4sync"}}})}, "config")
    result = _static(repo, {"environment": "build", "gates": [{"name": "who", **WHO}]}, base)
    assert result.gates[0].command[0] == sys.executable and result.gates[0].details.environment == "ds4sync"


def test_a_run_passes_its_builds_venv_to_the_tiers_that_name_it(fork: tuple[RepoBuilder, str], tmp_path: Path) -> None:
    repo, base = fork
    venv = tmp_path / "build-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    write_gates(
        repo, "unit", yaml.safe_dump({"tier": "unit", "environment": "build", "gates": [{"name": "who", **WHO}]})
    )
    ws = workspace(repo)
    head = repo.head()
    worktree = ws.store.worktree_path("r1")
    ws.repo.worktree_add(worktree, "sync/r1", head)
    record = RunRecord(
        run_id="r1",
        repo=str(repo.path),
        state_dir=str(ws.store.root),
        upstream=UpstreamRef(remote="upstream", ref="main", sha=base),
        fork=ForkRef(branch="main", head_before=head),
        sync_branch="sync/r1",
        worktree=str(worktree),
        backup_ref="refs/ds4sync/backup/r1",
    )
    no_build = run_tier(ws, TierOptions(tier="unit"), record=record).gates[0]
    assert no_build.status == "error" and "this run has no build result" in no_build.reason
    failed = BuildResult(
        status="failed", profile="p", src=str(worktree), python=str(venv / "bin" / "python"), log_path=""
    )
    record.results.build = failed
    assert "this run's build failed" in run_tier(ws, TierOptions(tier="unit"), record=record).gates[0].reason
    record.results.build = failed.model_copy(update={"status": "passed"})
    gate = run_tier(ws, TierOptions(tier="unit"), record=record).gates[0]
    assert gate.command[0] == str(venv / "bin" / "python") and gate.status == "failed"
    assert str(venv) in Path(gate.log_path or "").read_text()
