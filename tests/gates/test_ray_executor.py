"""``--executor ray`` on a real local Ray cluster (head and three worker nodes, custom resources as GPU kinds).

The cluster runs inside a private network namespace that has only the loopback device (``unshare --net``),
so nothing it binds or dials leaves this machine. It needs root and the ``ray`` package.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.serial,  # four Ray nodes on the machine's cores, and a raylet killed mid-gate
    pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root and unshare"),
]


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    pytest.importorskip("ray")
    work = tmp_path_factory.mktemp("ray")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "RAY_USAGE_STATS_ENABLED": "0", "DS4SYNC_RAY_CACHE": str(work / "node-cache")}  # fmt: skip
    script = Path(__file__).with_name("ray_cluster.py")
    proc = subprocess.run(
        ["unshare", "--net", sys.executable, str(script), str(work)],
        capture_output=True, text=True, timeout=scaled(900), env=env, cwd=work,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    data = json.loads(lines[-1].removeprefix("RESULT "))
    print(json.dumps({k: data[k] for k in ("local_s", "ray_s", "victim-rerun", "victim-once")}))
    return data


def test_counts_on_the_cluster_equal_the_local_run(cluster_run: dict) -> None:
    local, remote = cluster_run["local"], cluster_run["ray"]
    assert set(local) == set(remote) == {"cpu", "sm120-kind", "sm90-kind", "fails"}
    for name in local:
        assert remote[name]["status"] == local[name]["status"], name
        assert remote[name]["counts"] == local[name]["counts"], name
    assert local["fails"]["status"] == "failed" and local["cpu"]["counts"]["passed"] == 2
    assert local["sm120-kind"]["counts"]["skipped"] == 1


def test_each_gate_lands_on_a_node_of_its_gpu_kind_and_brings_its_files_back(cluster_run: dict) -> None:
    nodes, remote = cluster_run["nodes"], cluster_run["ray"]
    assert "sm120" in nodes[remote["sm120-kind"]["executor"]["node_id"]]
    assert "sm90" in nodes[remote["sm90-kind"]["executor"]["node_id"]]
    for name, gate in remote.items():
        assert gate["executor"]["kind"] == "ray" and gate["executor"]["node_ip"] == "127.0.0.1", name
        assert gate["log"] and gate["junit"] and gate["environment"], name


def test_a_node_lost_mid_gate_is_an_error_naming_it_or_a_rerun_elsewhere(cluster_run: dict) -> None:
    rerun, once = cluster_run["victim-rerun"], cluster_run["victim-once"]
    assert set(cluster_run["killed_raylets"]) == {"victim-rerun", "victim-once"}, (rerun, once)
    assert rerun["status"] == "passed", rerun
    assert rerun["executor"]["retried_after_lost"], rerun
    assert once["status"] == "error" and "was lost" in once["reason"], once
    assert once["executor"]["lost_nodes"], once


def test_gate_tasks_leave_no_worktree_or_log_folder_on_the_nodes(cluster_run: dict) -> None:
    """Every task removes its checkout and logs; a task killed with its node cannot, so the next task on the
    host removes them: after the rerun of ``victim-rerun`` only the last victim's folders are left."""
    assert cluster_run["left_after_unit"] == {"worktrees": [], "logs": [], "registered": 0}
    end = cluster_run["left_at_end"]
    assert [name.split("-")[:2] for name in end["worktrees"]] == [["victim", "once"]], end
    assert [name.split("-")[:2] for name in end["logs"]] == [["victim", "once"]], end
    assert end["registered"] == 1, end
