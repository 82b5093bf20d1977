"""Cold against warm ccache for the demo extension build through the build driver.

Builds the generated CPU extension twice in the same folders with an empty CCACHE_DIR, removing
the installed venv and the built shared object between the two, and prints both install-step
times and their ratio as JSON. Needs torch, g++ and ccache (its masquerade ``c++``).

    python benchmarks/build_ccache.py --workdir DIR [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

from ds4sync.demo.native_ext import demo_profile, write_demo_extension
from ds4sync.native.driver import run_build


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir.resolve()
    profile = demo_profile(python=sys.executable)
    if "CXX" not in profile.env:
        print("ccache (with its masquerade c++) is not installed", file=sys.stderr)
        return 2
    ext = write_demo_extension(work / "proj")
    base = {**os.environ, "CCACHE_DIR": str(work / "ccache")}
    runs = []
    for label in ("cold", "warm"):
        shutil.rmtree(work / "build", ignore_errors=True)
        for built in ext.path.glob("**/*.so"):
            built.unlink()
        result = run_build(
            ext.path, profile, manifest=ext.manifest, work_dir=work / "build", profile_name="demo", base_env=base
        )
        install = next(s for s in result.steps if s.name == "install")
        runs.append(
            {
                "label": label,
                "status": result.status,
                "install_s": install.duration_s,
                "total_s": result.total_s,
                "compiler_cache": result.toolchain.compiler_cache,
            }
        )
    import torch

    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "runs": runs,
        "ratio_cold_over_warm_install": round(runs[0]["install_s"] / runs[1]["install_s"], 3),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if all(r["status"] == "passed" for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
