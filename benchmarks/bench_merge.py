"""ds4sync merge/plan next to plain git on the same repository pair; prints times and ratios.

Baselines, run side by side in one process:
  merge: ``git worktree add -b <branch> <dir> <fork>`` + ``git merge --no-ff --no-commit <upstream>``
  plan:  ``git merge-tree --write-tree <fork> <upstream>``

Usage:
  python benchmarks/bench_merge.py                          # synthetic: 6,000 files, 1,000 upstream commits
  python benchmarks/bench_merge.py --repo DIR --branch B --upstream REV [--plan-only]   # an existing fork
Goals: merge <= 1.5x plain git; plan <= 2x merge-tree + 0.3 s; --help < 0.3 s.
Wall times are printed with CPU times (user+sys of the process and its children), which a loaded
machine changes much less: compare the two when other work shares the cores. The package's
bytecode is compiled first, as ``pip install`` does (an editable install under
PYTHONDONTWRITEBYTECODE would otherwise compile every module on every start).
"""

from __future__ import annotations

import argparse
import compileall
import resource
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


CPU: dict[str, list[float]] = {}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0,), *, name: str | None = None) -> float:
    """Wall seconds of one command; its CPU seconds go to ``CPU[name]``."""
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    if name:
        CPU.setdefault(name, []).append(_children_cpu() - cpu)
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
    parser.add_argument("--plan-only", action="store_true", help="time plan and merge-tree only (no worktrees)")
    args = parser.parse_args()
    import ds4sync

    compileall.compile_dir(str(Path(ds4sync.__file__).parent), quiet=1)
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
        tree = ["git", "ls-tree", "-r", "--name-only", args.upstream]
        files = len(subprocess.run(tree, cwd=repo, capture_output=True, text=True).stdout.splitlines())
        ahead = subprocess.run(
            ["git", "rev-list", "--count", f"{args.branch}..{args.upstream}"], cwd=repo, capture_output=True, text=True
        ).stdout.strip()
        print(f"repository: {files} files, {ahead} upstream commits to merge")
        rows: dict[str, list[float]] = {"help": [], "merge-tree": [], "plan": []}
        if not args.plan_only:
            rows.update({"git merge": [], "ds4sync merge": []})
        for _ in range(args.rounds):
            rows["help"].append(_timed([*DS4SYNC, "--help"], repo, name="help"))
            mt = ["git", "merge-tree", "--write-tree", args.branch, args.upstream]
            rows["merge-tree"].append(_timed(mt, repo, ok=(0, 1), name="merge-tree"))
            plan = [*DS4SYNC, "plan", args.upstream, "--branch", args.branch, "--json"]
            rows["plan"].append(_timed(plan, repo, name="plan"))
            if not args.plan_only:
                rows["git merge"].append(plain_merge(repo, args.branch, args.upstream, scratch))
                rows["ds4sync merge"].append(ds4sync_merge(repo, args.branch, args.upstream))
        med = {name: statistics.median(values) for name, values in rows.items()}
        cpu = {name: statistics.median(values) for name, values in CPU.items()}
        for name, value in med.items():
            extra = f", CPU {cpu[name]:.3f} s" if name in cpu else ""
            print(f"{name:>14}: median {value:.3f} s{extra} over {args.rounds} rounds")
        if not args.plan_only:
            ratio = med["ds4sync merge"] / med["git merge"]
            print(f"merge ratio: ds4sync merge / (worktree add + git merge) = {ratio:.2f}x (goal <= 1.5x)")
        goal = 2 * med["merge-tree"] + 0.3
        print(
            f"plan ratio: ds4sync plan / git merge-tree = {med['plan'] / med['merge-tree']:.2f}x wall "
            f"({med['plan']:.2f} s; goal 2x merge-tree + 0.3 s = {goal:.2f} s: "
            f"{'met' if med['plan'] <= goal else 'MISSED'})"
        )
        cpu_goal = 2 * cpu["merge-tree"] + 0.3
        print(
            f"plan ratio (CPU): {cpu['plan'] / cpu['merge-tree']:.2f}x ({cpu['plan']:.2f} s; "
            f"goal {cpu_goal:.2f} s: {'met' if cpu['plan'] <= cpu_goal else 'MISSED'})"
        )
        print(f"ds4sync --help: {med['help']:.3f} s (goal < 0.3 s)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
