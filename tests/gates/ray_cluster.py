"""A real local Ray cluster running real pytest gates: run by test_ray_executor.py inside a private network namespace.

Usage: ``unshare --net python ray_cluster.py WORKDIR`` (root). The namespace has only the loopback device, so
every address the cluster binds or dials is on this machine, and the namespace tells our processes from any other
Ray on the machine when the cluster is stopped. It starts a head and three worker nodes (one
``sm90``, two ``sm120`` by custom resource), runs the same tier locally and through ``--executor ray``, then kills
the raylet under a gate that is running, once for a gate that allows a rerun and once for one that does not,
and prints one JSON object with what it saw.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import yaml

from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.gates.runner import TierOptions, run_tier
from ds4sync.models.gates_details import PytestDetails
from ds4sync.models.gates_results import GateResult
from ds4sync.runner import open_workspace
from tests.timing import scaled, scaled_s

SM120_TESTS = "import pytest\n\ndef test_c():\n    assert 3\n\n@pytest.mark.skip\ndef test_d():\n    pass\n"
RAY = str(Path(sys.executable).with_name("ray"))
PORT = "6399"

# The victim sleeps until its node is killed under it ({wait_s}: 120 s, scaled like every wait in the tests).
WAIT_FOR_KILL = """
import os, pathlib, time
def test_waits_for_its_node_to_die():
    flags = pathlib.Path(os.environ["DS4SYNC_TEST_FLAGS"])
    name = os.environ["DS4SYNC_TEST_NAME"]
    if (flags / f"{name}.killed").exists():
        return  # the rerun, on another node
    (flags / f"{name}.pid").write_text(str(os.getpid()))
    time.sleep({wait_s})
"""


def _ray(*args: str) -> None:
    subprocess.run([RAY, *args, "--disable-usage-stats"], check=True, capture_output=True, timeout=scaled(180))


def start_cluster(temp: Path) -> None:
    common = ["--node-ip-address", "127.0.0.1", "--object-store-memory", "80000000"]
    _ray("start", "--head", "--port", PORT, "--num-cpus", "2", "--include-dashboard=false", "--temp-dir", str(temp),
         "--resources", json.dumps({"sm90": 1}), *common)  # fmt: skip
    for resources in ({"sm120": 1}, {"sm120": 1}, {"spare": 1}):
        _ray("start", "--address", f"127.0.0.1:{PORT}", "--num-cpus", "1", "--resources", json.dumps(resources),
             *common)  # fmt: skip


def stop_cluster() -> None:
    """End every process of this network namespace but this one: the cluster, and nothing else on the machine.

    (``ray stop`` finds Ray processes by name machine-wide, so it would also end a cluster that is not ours.)
    """
    ours = os.readlink("/proc/self/ns/net")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(entry / "ns" / "net") == ours:
                os.kill(int(entry.name), signal.SIGKILL)


def make_repo(root: Path, flags: Path) -> Path:
    repo = RepoBuilder(root / "fork")
    repo.commit(
        {
            "tests/test_cpu.py": "def test_a():\n    assert 1\n\ndef test_b():\n    assert 2\n",
            "tests/test_sm120.py": SM120_TESTS,
            "tests/test_fails.py": "def test_e():\n    assert 1 == 2, 'planted'\n",
            "tests/test_victim.py": WAIT_FOR_KILL.replace("{wait_s}", str(scaled_s(120))),
        },
        "sample project",
    )

    def gate(name: str, path: str, **extra: object) -> dict:
        env = {"DS4SYNC_TEST_FLAGS": str(flags), "DS4SYNC_TEST_NAME": name}
        return {"name": name, "kind": "pytest", "run": {"paths": [path], "args": ["-q"]}, "env": env, **extra}

    profile = root / "profile" / "gates"
    profile.mkdir(parents=True)
    tier = {
        "tier": "unit",
        "gates": [
            gate("cpu", "tests/test_cpu.py"),
            gate("sm120-kind", "tests/test_sm120.py", gpu_kind="sm120"),
            gate("sm90-kind", "tests/test_cpu.py", gpu_kind="sm90"),
            gate("fails", "tests/test_fails.py"),
        ],
    }
    (profile / "unit.yaml").write_text(yaml.safe_dump(tier))
    victims = {
        "tier": "gpu",
        "gates": [
            gate("victim-rerun", "tests/test_victim.py", gpu_kind="sm120", rerun_failures=1, timeout=scaled_s(300)),
            gate("victim-once", "tests/test_victim.py", gpu_kind="sm120", timeout=scaled_s(300)),
        ],
    }
    (profile / "gpu.yaml").write_text(yaml.safe_dump(victims))
    return repo.path


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _raylet_of(pid: int) -> int:
    """The raylet process above ``pid`` (Ray workers are its children; pytest is the worker's child)."""
    while pid > 1:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        if comm.startswith("raylet"):
            return pid
        pid = _parent(pid)
    raise RuntimeError("no raylet above the gate's process")


def kill_under(flags: Path, name: str, seen: dict) -> None:
    """Wait for the gate ``name`` to start, then SIGKILL the raylet of its node."""
    marker = flags / f"{name}.pid"
    deadline = time.monotonic() + scaled(240)
    while not marker.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} never started")
        time.sleep(0.2)
    victim = int(marker.read_text())
    worker = _parent(victim)
    raylet = _raylet_of(victim)
    (flags / f"{name}.killed").write_text("")
    # The node goes away whole, as a lost host does: its worker, the gate's processes, its raylet.
    for pid in (worker, raylet):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgid(victim), signal.SIGKILL)
    seen[name] = raylet


def node_leftovers(cache: Path) -> dict:
    """What gate tasks left in the nodes' shared cache: task folders, and the clone's registered worktrees."""
    listing = subprocess.run(
        ["git", "-C", str(cache / "repo"), "worktree", "list", "--porcelain"], capture_output=True, text=True
    ).stdout
    return {
        "worktrees": sorted(p.name for p in (cache / "worktrees").glob("*")),
        "logs": sorted(p.name for p in (cache / "logs").glob("*")),
        "registered": listing.count("worktree ") - 1,  # the clone's own entry is the first
    }


def _executor(gate: GateResult) -> dict[str, Any] | None:
    """Where the cluster ran the gate, as JSON (None: it ran here)."""
    return gate.details.executor.model_dump(mode="json") if gate.details.executor else None


def main() -> None:
    work = Path(sys.argv[1])
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    flags = work / "flags"
    flags.mkdir(parents=True)
    repo = make_repo(work, flags)
    ws = open_workspace(repo, profile=work / "profile", state_dir=work / "state")
    out: dict = {}
    start = time.monotonic()
    local = run_tier(ws, TierOptions(tier="unit", use_cache=False, python=sys.executable))
    out["local"] = {
        g.name: {"status": g.status, "counts": g.counts.model_dump(), "s": g.duration_s} for g in local.gates
    }
    out["local_s"] = time.monotonic() - start
    start_cluster(work / "ray")
    try:
        start = time.monotonic()
        on_ray: dict[str, Any] = {
            "executor": "ray",
            "address": f"127.0.0.1:{PORT}",
            "use_cache": False,
            "python": sys.executable,
        }
        remote = run_tier(ws, TierOptions(tier="unit", **on_ray))
        out["ray_s"] = time.monotonic() - start
        out["ray"] = {
            g.name: {
                "status": g.status,
                "counts": g.counts.model_dump(),
                "s": g.duration_s,
                "executor": _executor(g),
                "log": bool(g.log_path and Path(g.log_path).is_file()),
                "junit": isinstance(g.details, PytestDetails) and Path(g.details.junit or "-").is_file(),
                "environment": bool(g.details.executor and g.details.executor.environment),
            }
            for g in remote.gates
        }
        out["left_after_unit"] = node_leftovers(work / "node-cache")
        import ray

        out["nodes"] = {
            n["NodeID"]: sorted(k for k in n["Resources"] if k in ("sm90", "sm120", "spare")) for n in ray.nodes()
        }
        killed: dict = {}
        for name in ("victim-rerun", "victim-once"):
            killer = threading.Thread(target=kill_under, args=(flags, name, killed))
            killer.start()
            result = run_tier(ws, TierOptions(tier="gpu", names=(name,), **on_ray))
            killer.join()
            (gate,) = result.gates
            out[name] = {"status": gate.status, "reason": gate.reason, "executor": _executor(gate)}
        out["killed_raylets"] = killed
        out["left_at_end"] = node_leftovers(work / "node-cache")
    except BaseException:
        traceback.print_exc()  # before the cluster goes: a driver left connected to a dead head hangs for 60 s
        raise
    finally:
        with contextlib.suppress(Exception):
            import ray

            ray.shutdown()
        stop_cluster()
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
