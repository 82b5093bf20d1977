"""Every child ds4sync starts gets the one clean environment plus what its definition sets: a caller that exported
GIT_DIR / GIT_INDEX_FILE / GIT_WORK_TREE (a git alias or hook running ds4sync) reaches no gate, build, server or
command child. One test per child kind, each a real child process that writes down its environment.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.core import proc
from ds4sync.models.native_profile import BuildProfile, BuildStep, VenvSpec
from ds4sync.native.driver import run_build
from ds4sync.native.manifest import Manifest
from tests.scenarios import lines, make_pair

LEAKED = ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR", "GIT_PREFIX")
DUMP = (
    "import json, os, sys; "
    "json.dump({k: v for k, v in os.environ.items() if k.startswith('GIT_')}, open(sys.argv[1], 'w'))"
)


@pytest.fixture
def leak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Export what git exports to an alias or hook: a repository, its index and work tree (somebody else's).
    Called once the test's own repositories are built (the test's own setup is not the caller)."""
    elsewhere = tmp_path / "the-users-checkout"
    (elsewhere / ".git").mkdir(parents=True)

    def export() -> None:
        for name in LEAKED:
            monkeypatch.setenv(name, str(elsewhere / ".git" / name.lower()))
        monkeypatch.setenv("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")  # how to reach remotes stays the user's

    return export


def seen(path: Path) -> dict[str, str]:
    for _ in range(100):
        if path.is_file() and path.stat().st_size:
            return json.loads(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"the child wrote nothing to {path}")


def assert_clean(env: dict[str, str], **defined: str) -> None:
    assert not [name for name in LEAKED if name in env], env
    assert env.get("GIT_SSH_COMMAND") == "ssh -o BatchMode=yes"
    for name, value in defined.items():
        assert env.get(name) == value  # what the child's definition sets is passed on, GIT_* included


def test_a_gate_child(tmp_path: Path, leak, capsys) -> None:
    pair = make_pair(tmp_path, {"f.py": lines("a")}, [], [])
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    out = tmp_path / "gate-env.json"
    gate = {
        "name": "env",
        "kind": "command",
        "run": {"argv": ["{python}", "-c", DUMP, str(out)]},
        "env": {"GIT_TRACE_SETUP": "0"},
    }
    (profile / "gates" / "unit.yaml").write_text(yaml.safe_dump({"tier": "unit", "gates": [gate]}))
    leak()
    code = main(
        ["gate", "--tier", "unit", "--repo", str(pair.repo), "--profile", str(profile), "--python", sys.executable]
    )
    assert code == 0, capsys.readouterr()
    assert_clean(seen(out), GIT_TRACE_SETUP="0")


@pytest.mark.slow
def test_a_build_child(tmp_path: Path, leak) -> None:
    leak()
    out = tmp_path / "build-env.json"
    profile = BuildProfile(
        env={"GIT_CONFIG_PARAMETERS": "'build.flag=1'"},
        venv=VenvSpec(python=sys.executable),
        pre_steps=(BuildStep(name="dump", run=(sys.executable, "-c", DUMP, str(out))),),
        requires=(),
        requires_torch=False,
        check_deps=False,
    )
    src = tmp_path / "src"
    src.mkdir()
    run_build(src, profile, manifest=Manifest(), work_dir=tmp_path / "work")  # the install fails: no project
    assert_clean(seen(out), GIT_CONFIG_PARAMETERS="'build.flag=1'")


def test_a_server_child(tmp_path: Path, leak) -> None:
    leak()
    out = tmp_path / "server-env.json"
    child = proc.spawn(
        [sys.executable, "-c", DUMP, str(out)],
        cwd=tmp_path,
        log_path=tmp_path / "server.log",
        env_overrides={"GIT_TERMINAL_PROMPT": "0"},
    )
    try:
        assert_clean(seen(out), GIT_TERMINAL_PROMPT="0")
    finally:
        proc.kill_group(child, grace_s=1.0)


def test_a_command_child(tmp_path: Path, leak) -> None:
    """Hook-like commands (resolution commands, notifications, probes) run through the one runner."""
    leak()
    out = tmp_path / "command-env.json"
    result = proc.run([sys.executable, "-c", DUMP, str(out)], cwd=tmp_path, env_overrides={"GIT_X": "1"})
    assert result.returncode == 0, result.output
    assert_clean(seen(out), GIT_X="1")
