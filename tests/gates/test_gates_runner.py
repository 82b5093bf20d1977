"""The tier runner: cache hit and miss, parallel CPU gates, disjoint GPUs, run record, CLI, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gates_helpers import PYTHON, workspace, write_gates
from sample_project import UNIT_YAML

from ds4sync.cli import main
from ds4sync.core.record import ForkRef, UpstreamRef
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.gates.runner import TierOptions, run_tier
from ds4sync.models.record import RunRecord
from tests import procs
from tests.cli_json import data as cli_data
from tests.timing import scaled, scaled_s

OK_YAML = """\
tier: unit
gates:
  - {name: calc, kind: pytest, run: {paths: [tests/test_pass.py]}, source_file_dependencies: [calc/, tests/]}
  - {name: other, kind: pytest, run: {paths: [tests/test_pass.py]}, source_file_dependencies: [docs/]}
"""

# Two tests that each wait for the other: they pass only when their gates run at the same time.
MEET = """\
import os, time
from pathlib import Path


def test_meet():
    here = Path(os.environ["MEET_DIR"])
    (here / "{me}").write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "cpu"))
    deadline = time.monotonic() + 30
    while not (here / "{other}").exists():
        assert time.monotonic() < deadline, "the other gate did not run alongside this one"
        time.sleep(0.02)
"""

PAIR_YAML = """\
tier: {tier}
gates:
  - {{name: a, kind: pytest, run: {{paths: [tests/test_meet_a.py]}}, devices: {devices}}}
  - {{name: b, kind: pytest, run: {{paths: [tests/test_meet_b.py]}}, devices: {devices}}}
  - {{name: big, kind: pytest, run: {{paths: [tests/test_pass.py]}}, devices: {big}}}
"""


def _run(repo: RepoBuilder, tier: str = "unit", **kw):
    return run_tier(workspace(repo), TierOptions(tier=tier, python=PYTHON, **kw))


@pytest.mark.slow
def test_passed_gate_is_cached_until_its_inputs_change(sample: RepoBuilder) -> None:
    write_gates(sample, "unit", OK_YAML)
    first = _run(sample, names=("calc",))
    assert [g.status for g in first.gates] == ["passed"]
    again = _run(sample, names=("calc",))
    assert again.gates[0].status == "cached"
    assert again.gates[0].counts == first.gates[0].counts and again.gates[0].cache_key == first.gates[0].cache_key
    assert _run(sample, names=("calc",), use_cache=False).gates[0].status == "passed"
    sample.commit({"docs/x.md": "not a dependency\n"}, "docs")
    assert _run(sample, names=("calc",)).gates[0].status == "cached"
    sample.commit(
        {"calc/__init__.py": "def add(a, b):\n    return b + a\n\n\ndef mul(a, b):\n    return a * b\n"},
        "touch a dependency",
    )
    miss = _run(sample, names=("calc",))
    assert miss.gates[0].status == "passed" and miss.gates[0].cache_key != first.gates[0].cache_key


def test_uncommitted_dependency_disables_the_cache(sample: RepoBuilder) -> None:
    write_gates(sample, "unit", OK_YAML)
    assert _run(sample, names=("calc",)).gates[0].status == "passed"
    (sample.path / "calc" / "extra.py").write_text("X = 1\n")
    result = _run(sample, names=("calc",))
    assert result.gates[0].status == "passed" and result.gates[0].cache_key is None


def test_changed_since_skips_unaffected_gates(sample: RepoBuilder) -> None:
    write_gates(sample, "unit", OK_YAML)
    base = sample.head()
    sample.commit({"calc/more.py": "Y = 2\n"}, "calc change")
    result = _run(sample, changed_since=base)
    status = {g.name: (g.status, g.reason) for g in result.gates}
    assert status["calc"][0] == "passed" and status["other"][0] == "skipped"
    assert "changed files" in status["other"][1] and result.changed_files == 1
    sample.commit({"CMakeLists.txt": "project(x)\n"}, "build change")
    assert {g.status for g in _run(sample, changed_since=base).gates} <= {"passed", "cached"}
    assert _run(sample, changed_since=base).run_all_reason == "CMakeLists.txt matches a run-all pattern"


def test_cpu_gates_run_in_parallel(sample: RepoBuilder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _pair(sample, tmp_path, monkeypatch, tier="unit", devices=0, big=0)
    result = _run(sample, jobs=2, names=("a", "b"), use_cache=False)
    assert [g.status for g in result.gates] == ["passed", "passed"]


def test_gpu_gates_get_disjoint_devices(sample: RepoBuilder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _pair(sample, tmp_path, monkeypatch, tier="gpu", devices=1, big=4)
    result = _run(sample, tier="gpu", gpus=("0", "1"), jobs=1, use_cache=False)
    a, b, big = result.gates
    assert (a.status, b.status) == ("passed", "passed")
    seen = {(tmp_path / "meet" / name).read_text() for name in ("a", "b")}
    assert seen == {"0", "1"} and {a.devices, b.devices} == {("0",), ("1",)}
    assert a.env_overrides["CUDA_VISIBLE_DEVICES"] == a.devices[0]
    assert big.status == "incomplete" and big.env_categories == ("host-topology",) and result.status == "incomplete"


def test_gpus_default_to_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    from ds4sync.gates.runner import _gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert _gpus(None, ()) == ("2", "3")
    assert _gpus(None, ("5",)) == ("5",)
    assert _gpus((), ("5",)) == ()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert _gpus(None, ()) == ()


def _pair(
    repo: RepoBuilder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, tier: str, devices: int, big: int
) -> None:
    (tmp_path / "meet").mkdir()
    monkeypatch.setenv("MEET_DIR", str(tmp_path / "meet"))
    repo.commit(
        {
            "tests/test_meet_a.py": MEET.format(me="a", other="b"),
            "tests/test_meet_b.py": MEET.format(me="b", other="a"),
            f"profile/gates/{tier}.yaml": PAIR_YAML.format(tier=tier, devices=devices, big=big),
        },
        "pair",
    )


def _start_run(repo: RepoBuilder) -> Path:
    from ds4sync.models.record import RecordStore

    store = RecordStore(repo.path / ".git" / "ds4sync")
    head = repo.head()
    record = RunRecord(
        run_id="20260101-000000-abc",
        repo=str(repo.path),
        state_dir=str(store.root),
        upstream=UpstreamRef(remote="upstream", ref="main", sha=head),
        fork=ForkRef(branch="main", head_before=head),
        sync_branch="sync/x",
        worktree=str(repo.path),
        backup_ref="refs/ds4sync/backup/x",
        status="paused",
    )
    store.save(record)
    return store.record_path(record.run_id)


def test_cli_records_into_the_active_run(sample: RepoBuilder, capsys: pytest.CaptureFixture[str]) -> None:
    write_gates(sample, "unit", OK_YAML)
    record_path = _start_run(sample)
    code = main(
        [
            "gate",
            "--tier",
            "unit",
            "--gate",
            "calc",
            "--repo",
            str(sample.path),
            "--profile",
            str(sample.path / "profile"),
            "--python",
            PYTHON,
            "--json",
        ]
    )
    assert code == 0
    printed = cli_data(capsys.readouterr().out)
    assert printed["status"] == "passed" and printed["record"] == str(record_path)
    saved = json.loads(record_path.read_text())["results"]["gates"]["unit"]
    assert saved["gates"][0]["name"] == "calc" and saved["gates"][0]["counts"]["passed"] == 6
    assert saved["environment"]["python"] == ".".join(str(part) for part in sys.version_info[:3])


@pytest.mark.slow
def test_cli_exit_codes(sample: RepoBuilder, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "gate",
        "--tier",
        "unit",
        "--repo",
        str(sample.path),
        "--profile",
        str(sample.path / "profile"),
        "--python",
        PYTHON,
    ]
    assert main([*args, "--gate", "main"]) == 1
    assert "test_add_is_wrong" in capsys.readouterr().out
    assert main([*args, "--gate", "nope"]) == 2
    assert "no gate named nope" in capsys.readouterr().err


@pytest.mark.slow
def test_ctrl_c_stops_the_gate_and_its_children(sample: RepoBuilder, tmp_path: Path) -> None:
    write_gates(sample, "unit", UNIT_YAML.replace("timeout: 4", f"timeout: {scaled_s(600)}"))
    pid_file = tmp_path / "pids"
    cmd = [
        sys.executable,
        "-m",
        "ds4sync.cli",
        "gate",
        "--tier",
        "unit",
        "--gate",
        "hang",
        "--repo",
        str(sample.path),
        "--profile",
        str(sample.path / "profile"),
        "--python",
        PYTHON,
        "--json",
    ]
    env = {**os.environ, "SAMPLE_PID_FILE": str(pid_file)}
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and len(pid_file.read_text().split()) == 2):
            assert proc.poll() is None and time.monotonic() < deadline, "the hanging test never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=scaled(60))
    assert proc.returncode == 130, stderr.decode()
    assert not [p for p in procs.identities(pid_file.read_text()) if procs.alive(p)]  # pytest, its child


@pytest.mark.slow
def test_gate_phase_runs_configured_tiers_into_the_record(sample: RepoBuilder) -> None:
    from ds4sync.gates.phase import GATE_PHASES
    from ds4sync.models.record import RecordStore
    from ds4sync.runner import RunContext, open_workspace

    write_gates(sample, "unit", OK_YAML)
    sample.commit({"ds4sync.yaml": f"gates: {{tiers: [unit], python: {PYTHON}}}\nprofile: profile\n"}, "config")
    record_path = _start_run(sample)
    ws = open_workspace(sample.path)
    record = RecordStore(record_path.parent.parent.parent).load(record_path.parent.name)
    outcome = GATE_PHASES[0].run(RunContext(ws=ws, record=record))
    assert outcome.status == "done" and "tier unit: passed" in outcome.message
    assert [g.status for g in record.results.gates["unit"].gates] == ["passed", "passed"]
    write_gates(sample, "unit", "gates:\n  - {name: bad, kind: pytest, run: {paths: [tests/test_fail.py]}}\n")
    assert GATE_PHASES[0].run(RunContext(ws=open_workspace(sample.path), record=record)).status == "failed"
