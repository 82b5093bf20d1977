"""ds4sync merge/plan next to plain git on the same repository pair; prints times and ratios.

Baselines, run side by side in one process:
  merge: ``git worktree add -b <branch> <dir> <fork>`` + ``git merge --no-ff --no-commit <upstream>``
  plan:  ``git merge-tree --write-tree <fork> <upstream>`` + the CLI's start-up (``ds4sync --help``)

Usage:
  python benchmarks/bench_merge.py                          # synthetic: 6,000 files, 1,000 upstream commits
  python benchmarks/bench_merge.py --repo DIR --branch B --upstream REV   # an existing fork checkout
Goals: merge <= 1.5x plain git; plan <= 2x (merge-tree + start-up); --help < 0.3 s.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from forkgen import generate_fork
from synthrepo import make_synthetic

DS4SYNC = [sys.executable, "-m", "ds4sync.cli"]


def _timed(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    return elapsed


def plain_merge(repo: Path, branch: str, upstream: str, scratch: Path) -> float:
    wt = scratch / "plain"
    start = time.perf_counter()
    subprocess.run(["git", "worktree", "add", "-q", "-b", "bench-plain", str(wt), branch], cwd=repo, check=True)
    subprocess.run(["git", "merge", "--no-ff", "--no-commit", "-q", upstream], cwd=wt, capture_output=True)
    elapsed = time.perf_counter() - start
    subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=repo, check=True)
    subprocess.run(["git", "branch", "-D", "-q", "bench-plain"], cwd=repo, check=True)
    return elapsed


def ds4sync_merge(repo: Path, branch: str, upstream: str) -> float:
    elapsed = _timed([*DS4SYNC, "merge", upstream, "--branch", branch, "--json"], repo, ok=(0, 4))
    _timed([*DS4SYNC, "abort"], repo)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path)
    parser.add_argument("--branch", default="fork")
    parser.add_argument("--upstream", default="main")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ds4sync-bench-"))
    try:
        repo = args.repo
        if repo is None:
            repo = scratch / "synthetic"
            t0 = time.perf_counter()
            base, _ = make_synthetic(repo)
            subprocess.run(["git", "checkout", "-q", "-b", args.branch, base], cwd=repo, check=True)
            generate_fork(repo, base=base, upstream=args.upstream)
            subprocess.run(["git", "checkout", "-q", "--detach", args.upstream], cwd=repo, check=True)
            print(f"synthetic repository ready in {time.perf_counter() - t0:.1f} s")
        files = len(subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True).stdout.splitlines())
        ahead = subprocess.run(
            ["git", "rev-list", "--count", f"{args.branch}..{args.upstream}"], cwd=repo, capture_output=True, text=True
        ).stdout.strip()
        print(f"repository: {files} files, {ahead} upstream commits to merge")
        rows = {"help": [], "merge-tree": [], "plan": [], "git merge": [], "ds4sync merge": []}
        for _ in range(args.rounds):
            rows["help"].append(_timed([*DS4SYNC, "--help"], repo))
            rows["merge-tree"].append(
                _timed(["git", "merge-tree", "--write-tree", args.branch, args.upstream], repo, ok=(0, 1))
            )
            rows["plan"].append(_timed([*DS4SYNC, "plan", args.upstream, "--branch", args.branch, "--json"], repo))
            rows["git merge"].append(plain_merge(repo, args.branch, args.upstream, scratch))
            rows["ds4sync merge"].append(ds4sync_merge(repo, args.branch, args.upstream))
        med = {name: statistics.median(values) for name, values in rows.items()}
        for name, value in med.items():
            print(f"{name:>14}: median {value:.3f} s over {args.rounds} rounds")
        ratio = med["ds4sync merge"] / med["git merge"]
        print(f"merge ratio: ds4sync merge / (worktree add + git merge) = {ratio:.2f}x (goal <= 1.5x)")
        print(
            f"plan ratio: ds4sync plan / (merge-tree + CLI start-up) = "
            f"{med['plan'] / (med['merge-tree'] + med['help']):.2f}x (goal <= 2x)"
        )
        print(f"ds4sync --help: {med['help']:.3f} s (goal < 0.3 s)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
