"""A real `gpu` tier on a CUDA machine: the generated sample project's CUDA tests through `ds4sync gate`.

Writes the sample project (``sample_project.write_sample_project(cuda=True)``) into a
temporary git repository, creates a paused run record for it so that the tier is recorded
like inside a sync run, then runs ``ds4sync gate --tier gpu`` twice (cold, then with the
cache) on every visible GPU and prints: GPU, driver, torch and CUDA versions, the date,
the live table, the JSON result and the record's ``results["gates"]["gpu"]`` entry.

Usage: python benchmarks/gpu_tier_demo.py [--python PYTHON]   (needs torch with CUDA in PYTHON)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "gates"))  # the sample project generator
from sample_project import write_sample_project

from ds4sync.core.record import ForkRef, RecordStore, RunRecord, UpstreamRef
from ds4sync.demo.repobuild import RepoBuilder

VERSIONS = (
    "import torch, triton, sys; print('torch', torch.__version__, '| CUDA', torch.version.cuda, '| triton', "
    "triton.__version__, '| python', sys.version.split()[0], '| GPUs', torch.cuda.device_count(), "
    "[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])"
)


def sh(argv: list[str], **kw) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, text=True, capture_output=True, check=False, **kw)
    except FileNotFoundError:
        return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]}: not found")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    print("date:", datetime.now(UTC).isoformat(timespec="seconds"))
    smi = sh(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total", "--format=csv"])
    print(smi.stdout.strip() or smi.stderr.strip())
    versions = sh([args.python, "-c", VERSIONS])
    print(versions.stdout.strip() or versions.stderr.strip()[-300:])
    count = int(versions.stdout.split("| GPUs ")[1].split()[0]) if "| GPUs " in versions.stdout else 0
    gpus = ",".join(str(i) for i in range(count))
    with tempfile.TemporaryDirectory(prefix="gpu-tier-") as tmp:
        repo = RepoBuilder(Path(tmp) / "proj")
        write_sample_project(repo.path, cuda=True)
        repo.repo.add_all()
        head = repo.commit({}, "sample project with CUDA tests")
        store = RecordStore(repo.path / ".git" / "ds4sync")
        record = RunRecord(
            run_id="demo-gpu-tier",
            repo=str(repo.path),
            state_dir=str(store.root),
            upstream=UpstreamRef(remote="upstream", ref="main", sha=head),
            fork=ForkRef(branch="main", head_before=head),
            sync_branch="sync/demo",
            worktree=str(repo.path),
            backup_ref="refs/ds4sync/backup/demo",
            status="paused",
        )
        store.save(record)
        base = [
            sys.executable,
            "-m",
            "ds4sync.cli",
            "gate",
            "--tier",
            "gpu",
            "--repo",
            str(repo.path),
            "--profile",
            str(repo.path / "profile"),
            "--python",
            args.python,
            "--gpus",
            gpus,
            "--jobs",
            "2",
        ]
        for title, extra in (("cold run", []), ("second run (cache)", ["--json"])):
            res = sh(base + extra, env={**os.environ, "COLUMNS": "150"})
            print(
                f"\n=== ds4sync gate --tier gpu --gpus '{gpus}' --jobs 2 {' '.join(extra)}: {title}, "
                f"exit {res.returncode}"
            )
            print(res.stdout.rstrip())
            if res.stderr.strip():
                print("stderr:", res.stderr.strip()[-2000:])
        saved = json.loads(store.record_path(record.run_id).read_text())["results"]["gates"]["gpu"]
        print("\n=== record.results['gates']['gpu'] (abridged: one gate a line)")
        print(json.dumps({k: saved[k] for k in ("tier", "head", "python", "environment", "duration_s")}))
        for g in saved["gates"]:
            print(
                json.dumps(
                    {
                        "name": g["name"],
                        "status": g["status"],
                        "reason": g["reason"],
                        "counts": {k: v for k, v in g["counts"].items() if v},
                        "devices": g["devices"],
                        "env_overrides": g["env_overrides"],
                        "duration_s": round(g["duration_s"], 2),
                        "command": " ".join(g["command"]),
                        "failures": [[f["node_id"], f["env_category"]] for f in g["failures"]],
                        "flaky": g["flaky"],
                    }
                )
            )


if __name__ == "__main__":
    main()
