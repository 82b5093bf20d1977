"""``ds4sync patches check`` next to the by-hand audit it replaces; prints times and the ratio.

Baseline: one ``git grep -P`` per ``contains``/``absent`` invariant of the catalogue (what a maintainer
runs by hand after a sync; symbols, cross references and file checks are not counted for it, so the
baseline does less work). Ours: the whole ``ds4sync patches check --json`` command, start-up included.

Usage:
  python benchmarks/bench_patches_check.py --repo CHECKOUT [--profile DIR] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from ds4sync.patchsets.model import load_catalogue  # noqa: E402
from ds4sync.patchsets.tree import expand_braces  # noqa: E402


def by_hand(repo: Path, patches: Path) -> float:
    """One ``git grep -P -q`` per regex invariant, sequentially."""
    _catalogue, patchsets = load_catalogue(patches)
    start = time.perf_counter()
    for ps in patchsets:
        for inv in ps.invariants:
            if inv.kind not in ("contains", "absent"):
                continue
            paths = [p for pattern in inv.files for p in expand_braces(pattern)]
            subprocess.run(["git", "grep", "-q", "-P", inv.pattern, "--", *paths], cwd=repo, capture_output=True)
    return time.perf_counter() - start


def ours(repo: Path, profile: Path) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ds4sync.cli",
            "patches",
            "check",
            "--repo",
            str(repo),
            "--profile",
            str(profile),
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"patches check failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    return elapsed, json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True, help="a git checkout to check")
    parser.add_argument("--profile", type=Path, default=REPO_ROOT, help="profile folder (default: the DS4 one)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    base, mine, report = [], [], {}
    for _ in range(args.rounds):  # interleaved so drift hits both sides alike
        base.append(by_hand(args.repo, args.profile / "patches"))
        elapsed, report = ours(args.repo, args.profile)
        mine.append(elapsed)
    counts = report["counts"]
    print(
        f"checkout: {args.repo}  ({counts['invariants']} invariants in {counts['patchsets']} patch-sets, "
        f"{counts['holds']} hold, {counts['violated']} violated, {counts['advisory']} advisory)"
    )
    print(f"by hand (git grep per regex invariant): median {statistics.median(base):.3f} s")
    print(
        f"ds4sync patches check (all kinds, start-up included): median {statistics.median(mine):.3f} s "
        f"(engine {report['duration_s']:.3f} s)"
    )
    print(f"ratio ours / by hand: {statistics.median(mine) / statistics.median(base):.2f}x")


if __name__ == "__main__":
    main()
