"""Ctrl-C during a build stops the compiler too: nothing of the build's process tree survives."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ds4sync.core.proc import pid_alive
from ds4sync.demo.native_ext import write_demo_extension
from ds4sync.demo.repobuild import RepoBuilder
from tests.timing import scaled

pytestmark = [pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++"), pytest.mark.slow]
COMPILERS = ("cc1plus", "cc1", "c++", "g++", "gcc", "ninja", "slow-cxx", "sleep")


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process we can see."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), name)
    return table


def _descendants(root: int) -> dict[int, str]:
    table = _processes()
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, name) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = name
                frontier.append(pid)
    return found


def _wait_for_compiler(proc: subprocess.Popen[bytes], *, limit: int = 2400) -> dict[int, str]:
    """Poll until a compiler runs under ``proc`` (or it exits); no sleeping beyond /proc reads."""
    for _ in range(limit):
        if proc.poll() is not None:
            return {}
        tree = _descendants(proc.pid)
        if any(name == "cc1plus" for name in tree.values()):
            return tree
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=scaled(0.05))
    return {}


def test_sigint_during_compile_leaves_no_compiler_running(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    repo = RepoBuilder(tmp_path / "fork")
    ext = write_demo_extension(repo.path, namespace="ds4int", package="ds4int_ext")
    repo.commit({rel: (ext.path / rel).read_text() for rel in ext.files}, "extension")
    # The compiler lingers after compiling, so a build that only lost its parent would leave it running.
    slow_cxx = tmp_path / "bin" / "slow-cxx"
    slow_cxx.parent.mkdir()
    slow_cxx.write_text('#!/bin/sh\nc++ "$@"\nstatus=$?\ncase " $* " in *" -c "*) sleep 600;; esac\nexit $status\n')
    slow_cxx.chmod(0o755)
    (repo.path / "ds4sync.yaml").write_text(
        yaml.safe_dump(
            {
                "build": {
                    "profile": "cpu",
                    "profiles": {
                        "cpu": {
                            "requires": ["g++"],
                            "env": {"CXX": str(slow_cxx)},
                            "venv": {"create": True, "python": sys.executable, "inherit_site_packages": True},
                        }
                    },
                }
            }
        )
    )
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(ext.manifest.model_dump(mode="json", by_alias=True)))
    argv = [
        sys.executable,
        "-m",
        "ds4sync.cli",
        "build",
        "--repo",
        str(repo.path),
        "--manifest",
        str(manifest),
        "--json",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        tree = _wait_for_compiler(proc)
        assert tree, f"no compiler started: {proc.communicate(timeout=scaled(60))}"
        os.kill(proc.pid, signal.SIGINT)
        proc.communicate(timeout=scaled(120))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130
    now = _processes()
    survivors = {pid: name for pid, name in tree.items() if pid_alive(pid) and now.get(pid, (0, ""))[1] == name}
    assert "slow-cxx" in tree.values()
    assert survivors == {}
    assert not [name for name in _descendants(proc.pid).values() if name in COMPILERS]
