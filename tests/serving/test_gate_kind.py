"""The ``serving`` gate kind adapter (runs once ds4sync.gates, the gate runner, is present)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ds4sync.gates.definition", reason="the gate runner (ds4sync.gates) is not in this tree")

from scripted import ScriptedServer, chat_answer, healthy_routes

from ds4sync.cli import main
from ds4sync.core.errors import ExitCode
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.gates.definition import Gate, GateDef
from ds4sync.gates.kinds import GateContext
from ds4sync.gates.kinds.serving import Spec, run_gate
from tests.cli_json import data as cli_data


def _gate(spec: Spec) -> Gate:
    return Gate(definition=GateDef(name="srv", kind="serving"), spec=spec, tier="serving", source=Path("x.yaml"))


def test_probes_become_counts_failures_and_details(tmp_path: Path) -> None:
    server = ScriptedServer(healthy_routes())
    server.routes[("POST", "/v1/chat/completions")] = lambda _b: chat_answer("41")
    try:
        config = tmp_path / "serving.yaml"
        config.write_text(
            f"serving:\n  server: {{base_url: '{server.url}', model: m}}\n"
            "  exact: [{name: a, messages: [{role: user, content: q}], expect: '42'}]\n"
        )
        spec = Spec(config_file="serving.yaml", probes=("health", "exact", "tool_call"))
        result = run_gate(_gate(spec), GateContext(cwd=tmp_path, python="python", log_dir=tmp_path / "logs"))
    finally:
        server.close()
    assert result.status == "failed" and result.kind == "serving"
    assert (result.counts.passed, result.counts.failed, result.counts.skipped) == (1, 1, 1)
    assert result.failures[0].node_id == "srv::exact" and "0/1 exact" in result.failures[0].message
    assert result.details.kind == "serving" and result.details.serving is not None
    health = result.details.serving.probes[0].brief()
    assert health.pop("duration_s") >= 0
    assert health == {
        "name": "health",
        "status": "passed",
        "value": 1.0,
        "baseline": 1.0,
        "unit": "ok",
        "summary": "health 200; model 'm' listed",
        "reason": "",
    }


def test_missing_config_is_an_error(tmp_path: Path) -> None:
    result = run_gate(_gate(Spec()), GateContext(cwd=tmp_path, python="python", log_dir=tmp_path))
    assert result.status == "error" and "no serving config" in result.reason


def test_falls_back_to_the_checkouts_ds4sync_yaml(tmp_path: Path) -> None:
    server = ScriptedServer(healthy_routes())
    try:
        (tmp_path / "ds4sync.yaml").write_text(
            f"serving:\n  server: {{base_url: '{server.url}', model: m}}\n  probes: [health]\n"
        )
        result = run_gate(_gate(Spec()), GateContext(cwd=tmp_path, python="python", log_dir=tmp_path / "logs"))
    finally:
        server.close()
    assert result.status == "passed" and result.counts.passed == 1 and result.reason == "1 probes passed"


def test_probes_that_all_skipped_are_not_run_never_green(
    tmp_path: Path, builder: RepoBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server answered, but no probe it was asked for could run (none configured): nothing checked, so the
    gate kind and `ds4sync serving gate` both say not-run, never passed."""
    server = ScriptedServer(healthy_routes())
    builder.commit({"a.txt": "a\n"}, "initial")
    try:
        (tmp_path / "serving.yaml").write_text(f"serving:\n  server: {{base_url: '{server.url}', model: m}}\n")
        spec = Spec(config_file="serving.yaml", probes=("exact", "tool_call"))
        result = run_gate(_gate(spec), GateContext(cwd=tmp_path, python="python", log_dir=tmp_path / "logs"))
        argv = ["serving", "gate", "--repo", str(builder.path), "--serving-config", str(tmp_path / "serving.yaml")]
        capsys.readouterr()
        code = main([*argv, "--probe", "exact", "--probe", "tool_call", "--state-dir", str(tmp_path / "s"), "--json"])
    finally:
        server.close()
    assert result.status == "not-run" and result.counts.skipped == 2 and result.counts.passed == 0, result.reason
    assert result.reason.startswith("no probe ran (exact: ") and "nothing checked" in result.reason
    assert result.details.kind == "serving" and result.details.serving is not None
    assert result.details.serving.status == "not-run"
    assert code == ExitCode.NOT_MEASURED
    assert cli_data(capsys.readouterr().out)["status"] == "not-run"
