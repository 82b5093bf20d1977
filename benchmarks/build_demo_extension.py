"""Time `ds4sync build` on a generated extension against the bare install command it wraps.

Writes the demo extension (CPU, or CUDA with --cuda) into a fresh git repository, runs
`ds4sync build --profile NAME --manifest ... --json` on it, then runs the bare
`python -m pip install -e . --no-build-isolation --no-deps -v` on a clean copy with the same
variables, and prints both times and their ratio as JSON (toolchain capture, build, proof).

    python benchmarks/build_demo_extension.py --workdir DIR [--cuda] [--profile sm90] [--out FILE]

The repository's `.venv` is a link to the running interpreter's environment (one with torch),
which is what the shipped profiles inherit from.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

from ds4sync.demo.native_ext import write_demo_extension


def _gpu() -> dict:
    query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    try:
        line = subprocess.run(query, capture_output=True, text=True, check=True).stdout.splitlines()[0]
        name, driver = line.split(", ")
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return {"gpu": None, "driver": None}
    return {"gpu": name, "driver": driver}


def _versions() -> dict:
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__, "torch_cuda": torch.version.cuda}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--cuda", action="store_true", help="build the CUDA variant")
    parser.add_argument("--profile", default=None, help="build profile (default: sm90 with --cuda, else a CPU one)")
    parser.add_argument("--baseline", action="store_true", help="also time the bare install command")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--direct", action="store_true", help="no git, no CLI: call the build core directly")
    args = parser.parse_args()
    work = args.workdir.resolve()
    if args.direct:
        return _direct(work, args)
    from ds4sync.demo.repobuild import RepoBuilder

    repo = RepoBuilder(work / "fork")
    ext = write_demo_extension(repo.path, namespace="ds4demo", package="ds4demo_ext", cuda=args.cuda)
    (repo.path / ".gitignore").write_text("build/\n*.so\n*.egg-info/\n.venv\n")
    subprocess.run(["git", "add", "-A"], cwd=repo.path, check=True)
    repo.commit({}, "Add the demo extension")
    os.symlink(sys.prefix, repo.path / ".venv")
    manifest = work / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(ext.manifest.model_dump(mode="json", by_alias=True)))
    profile = args.profile or ("sm90" if args.cuda else "cpu")
    config = []
    if not args.cuda:
        config = ["--config", str(work / "ds4sync.yaml")]
        (work / "ds4sync.yaml").write_text(
            yaml.safe_dump(
                {
                    "build": {
                        "profiles": {
                            "cpu": {
                                "requires": ["g++"],
                                "venv": {
                                    "create": True,
                                    "python": "{repo}/.venv/bin/python",
                                    "inherit_site_packages": True,
                                },
                            }
                        }
                    }
                }
            )
        )
    argv = [
        sys.executable,
        "-m",
        "ds4sync.cli",
        "build",
        "--repo",
        str(repo.path),
        "--profile",
        profile,
        "--manifest",
        str(manifest),
        "--state-dir",
        str(work / "state"),
        "--json",
        *config,
    ]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - start
    try:
        result = json.loads(done.stdout)
    except ValueError:
        print(done.stdout, done.stderr, file=sys.stderr)
        return 3
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        **_gpu(),
        **_versions(),
        "profile": profile,
        "cuda": args.cuda,
        "exit_code": done.returncode,
        "cli_wall_s": round(wall, 3),
        "toolchain_s": result["toolchain_s"],
        "build_s": result["build_s"],
        "proof_s": result["proof_s"],
        "total_s": result["total_s"],
        "summary": result["proof"]["summary"] if result["proof"] else None,
        "status": result["status"],
        "toolchain": result["toolchain"],
        "steps": result["steps"],
        "proof_items": result["proof"]["items"] if result["proof"] else None,
        "env": result["env"],
        "log_path": result["log_path"],
    }
    if args.cuda and result["status"] == "passed":
        report["gpu_check"] = _gpu_check(result["python"], result["proof"]["items"])
    if args.baseline:
        copy = work / "bare"
        shutil.copytree(repo.path, copy, ignore=shutil.ignore_patterns("build", "*.so", "*.egg-info", ".venv", ".git"))
        env = {**os.environ, **{k: v for k, v in result["env"].items() if k not in ("VIRTUAL_ENV",)}}
        bare = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--target",
            str(work / "bare-target"),
            "--no-build-isolation",
            "--no-deps",
            "-v",
            str(copy),
        ]
        start = time.monotonic()
        ok = subprocess.run(bare, cwd=copy, env=env, capture_output=True, text=True).returncode == 0
        report["baseline"] = {"argv": bare, "ok": ok, "wall_s": round(time.monotonic() - start, 3)}
        report["ratio_ds4sync_over_bare"] = round(wall / report["baseline"]["wall_s"], 3)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return done.returncode


_CHECK = """
import json, torch, ds4demo_ext._C
x = torch.randn(1 << 20, device="cuda"); y = torch.randn_like(x)
out = torch.ops.ds4demo.scaled_add(x, y, 2.0)
torch.cuda.synchronize()
print(json.dumps({"device": torch.cuda.get_device_name(), "capability": list(torch.cuda.get_device_capability()),
                  "max_abs_err": (out - (x + 2.0 * y)).abs().max().item()}))
"""


def _gpu_check(python: str, items: list[dict]) -> dict:
    """Run the built CUDA op against torch's own arithmetic; list the SASS targets in the shared object."""
    run = subprocess.run([python, "-c", _CHECK], capture_output=True, text=True, cwd="/")
    check: dict = {"op": run.stdout.strip() or run.stderr[-2000:]}
    so = next((i["detail"] for i in items if i["kind"] == "import"), None)
    if so and shutil.which("cuobjdump"):
        elf = subprocess.run(["cuobjdump", "--list-elf", so], capture_output=True, text=True)
        check["cuobjdump_list_elf"] = elf.stdout.strip().splitlines()[:8]
    return check


def _direct(work: Path, args: argparse.Namespace) -> int:
    """The same build through ``run_build`` with the shipped profile, for hosts without git."""
    from ds4sync.models.config import shipped_profile
    from ds4sync.models.native_profile import load_profiles, select_profile
    from ds4sync.native.driver import run_build

    src = work / "fork"
    ext = write_demo_extension(src, namespace="ds4demo", package="ds4demo_ext", cuda=args.cuda)
    os.symlink(sys.prefix, src / ".venv")
    name = args.profile or "sm90"
    profile = select_profile(load_profiles(shipped_profile()), name)
    start = time.monotonic()
    result = run_build(src, profile, manifest=ext.manifest, work_dir=work / "state", profile_name=name)
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        **_gpu(),
        **_versions(),
        "mode": "direct",
        "wall_s": round(time.monotonic() - start, 3),
        **result.model_dump(mode="json"),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if result else 1


if __name__ == "__main__":
    sys.exit(main())
