"""ds4sync merge, plan and abort next to plain git on fork branches of one repository; prints medians and ratios.

Baselines, run side by side (interleaved: every round runs each branch's commands once, in turn):
  merge: ``git worktree add -b <branch> <dir> <fork>`` + ``git merge --no-ff --no-commit <upstream>``
  plan:  ``git merge-tree --write-tree <fork> <upstream>``
``ds4sync merge`` stops where a person must resolve (exit 4) or after the merge phases; ``ds4sync abort``
then drops the run (its time is printed, with no baseline: git has no run to drop).

Usage:
  python benchmarks/bench_merge.py                                   # synthetic: 6,000 files, 1,000 upstream commits
  python benchmarks/bench_merge.py --repo CLONE --upstream main BRANCH [BRANCH ...]     # branches of a clone
  python benchmarks/bench_merge.py --clone-from MIRROR --upstream main BRANCH [BRANCH ...]
      (a scratch clone of MIRROR with a local branch per BRANCH, from ``origin/BRANCH``; blobs the
      mirror lacks are left out of every checkout and stood in for, see ``placeholder_missing_blobs``)
  --before DIR   also time the ds4sync of another checkout (an older commit of this repository) in the
                 same rounds: before/after ratios measured under the same load
  --plan-only    plan and merge-tree only (no worktrees)

Goals: merge <= 1.5x plain git; plan <= 2x merge-tree + 0.3 s; --help < 0.3 s.
Wall times are printed with CPU times (user+sys of the command and every process it waited for), which a
loaded machine changes much less: compare CPU when other work shares the cores. The package's bytecode is
compiled first, as ``pip install`` does.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Timings:
    """Wall and CPU seconds of one command, one entry per round."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def add(self, wall: float, cpu: float) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)

    def median(self) -> tuple[float, float]:
        """(median wall, median CPU) seconds."""
        return statistics.median(self.wall), statistics.median(self.cpu)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _env(package: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["LC_ALL"] = "C"
    if package is not None:
        env["PYTHONPATH"] = str(package)
    return env


def timed(
    argv: list[str], cwd: Path, *, ok: tuple[int, ...] = (0,), package: Path | None = None
) -> tuple[float, float]:
    """(wall, CPU) seconds of one command; exits with its stderr when its status is not in ``ok``."""
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=_env(package))
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    return elapsed, _children_cpu() - cpu


def git(cwd: Path, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    """``git ARGS`` output, stripped."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=_env())
    if proc.returncode not in ok:
        raise SystemExit(f"git {' '.join(args[:6])} failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    return proc.stdout.strip()


def plain_merge(repo: Path, branch: str, upstream: str, scratch: Path) -> tuple[float, float]:
    """``git worktree add`` + ``git merge --no-ff --no-commit`` (rerere off), then both undone (not timed)."""
    wt = scratch / "plain"
    cpu = _children_cpu()
    start = time.perf_counter()
    git(repo, "worktree", "add", "-q", "-b", "bench-plain", str(wt), branch)
    git(wt, "-c", "rerere.enabled=false", "merge", "--no-ff", "--no-commit", "-q", upstream, ok=(0, 1))
    elapsed, used = time.perf_counter() - start, _children_cpu() - cpu
    git(repo, "worktree", "remove", "--force", str(wt))
    git(repo, "branch", "-D", "-q", "bench-plain")
    return elapsed, used


def missing_blobs(repo: Path, revs: list[str]) -> list[str]:
    """Paths whose blob in any of ``revs`` is not in the object store (a snapshot without its large files)."""
    paths: set[str] = set()
    for rev in revs:
        entries = [line.split(None, 3) for line in git(repo, "ls-tree", "-r", rev).splitlines()]
        blobs = {oid: path for _mode, kind, oid, path in entries if kind == "blob"}
        check = subprocess.run(
            ["git", "cat-file", "--batch-check=%(objectname) %(objecttype)"],
            cwd=repo,
            input="\n".join(blobs) + "\n",
            capture_output=True,
            text=True,
            env=_env(),
        ).stdout
        paths.update(blobs[line.split()[0]] for line in check.splitlines() if line.endswith(" missing"))
    return sorted(paths)


def clone_mirror(source: Path, dest: Path, upstream: str, branches: list[str]) -> Path:
    """A shared, unchecked-out clone of ``source`` with local ``upstream`` and ``branches`` (from ``origin/``)."""
    from bench_sync_memory import clone, placeholder_missing_blobs

    def rev(name: str) -> str:
        found = git(source, "rev-parse", "--verify", "-q", f"refs/heads/{name}^{{commit}}", ok=(0, 1))
        return found or git(source, "rev-parse", "--verify", f"refs/remotes/origin/{name}^{{commit}}")

    heads = {name: rev(name) for name in [upstream, *branches]}
    exclude = missing_blobs(source, list(heads.values()))
    repo = clone(source, dest, upstream, heads[upstream], exclude)
    for name in branches:
        git(repo, "branch", "-f", name, heads[name])
    placeholder_missing_blobs(repo, list(heads.values()), exclude)
    if exclude:
        print(f"left out of checkouts (blobs missing from the source): {', '.join(exclude)}")
    return repo


@dataclass
class Variant:
    """One ds4sync to time: ``package`` is put on PYTHONPATH (None: the one this script belongs to)."""

    name: str
    package: Path

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "ds4sync.cli", *args]


def one_round(
    repo: Path,
    branch: str,
    upstream: str,
    variants: list[Variant],
    rows: dict[str, Timings],
    scratch: Path,
    *,
    plan_only: bool,
) -> None:
    """Each command once for ``branch``, into ``rows`` (keys ``command`` or ``command [variant]``)."""
    rows.setdefault("merge-tree", Timings()).add(
        *timed(["git", "merge-tree", "--write-tree", branch, upstream], repo, ok=(0, 1))
    )
    for v in variants:
        plan = v.argv("plan", upstream, "--branch", branch, "--json")
        rows.setdefault(f"plan [{v.name}]", Timings()).add(*timed(plan, repo, package=v.package))
    if plan_only:
        return
    rows.setdefault("git merge", Timings()).add(*plain_merge(repo, branch, upstream, scratch))
    for v in variants:
        merge = v.argv("merge", upstream, "--branch", branch, "--json")
        rows.setdefault(f"merge [{v.name}]", Timings()).add(*timed(merge, repo, ok=(0, 4), package=v.package))
        abort = v.argv("abort", "--yes")
        rows.setdefault(f"abort [{v.name}]", Timings()).add(*timed(abort, repo, package=v.package))


def print_branch(branch: str, rows: dict[str, Timings], variants: list[Variant], *, plan_only: bool) -> None:
    """Medians per command and the ratios to plain git, wall and CPU."""
    print(f"\n## {branch}")
    for name, t in rows.items():
        wall, cpu = t.median()
        print(f"  {name:>24}: median {wall:7.3f} s wall, {cpu:7.3f} s CPU ({len(t.wall)} rounds)")
    mt = rows["merge-tree"].median()
    for v in variants:
        plan = rows[f"plan [{v.name}]"].median()
        print(f"  plan ratio [{v.name}]: {plan[0] / mt[0]:.1f}x wall, {plan[1] / mt[1]:.1f}x CPU of git merge-tree")
        if not plan_only:
            gm, merge = rows["git merge"].median(), rows[f"merge [{v.name}]"].median()
            print(f"  merge ratio [{v.name}]: {merge[0] / gm[0]:.2f}x wall, {merge[1] / gm[1]:.2f}x CPU of git merge")


def print_summary(per_branch: dict[str, dict[str, Timings]], variants: list[Variant]) -> None:
    """Over the branches: the median of each branch's ratio (plan, merge) and of abort's seconds."""
    print("\n## all branches: median of the per-branch ratios")
    branches = list(per_branch)
    for v in variants:
        for what, base in (("plan", "merge-tree"), ("merge", "git merge"), ("abort", None)):
            key = f"{what} [{v.name}]"
            if key not in per_branch[branches[0]]:
                continue
            if base is None:
                walls = [per_branch[b][key].median()[0] for b in branches]
                print(f"  {key}: median {statistics.median(walls):.2f} s wall over the branches")
                continue
            wall, cpu = (
                statistics.median(per_branch[b][key].median()[i] / per_branch[b][base].median()[i] for b in branches)
                for i in (0, 1)
            )
            print(f"  {key} / {base}: {wall:.2f}x wall, {cpu:.2f}x CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("branches", nargs="*", help="fork branches (default: the synthetic repository's `fork`)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--repo", type=Path, help="a clone holding the upstream ref and the branches")
    where.add_argument("--clone-from", type=Path, help="clone this repository (a mirror) into a scratch folder")
    parser.add_argument("--upstream", default="main")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, help="a checkout of an older ds4sync to time in the same rounds")
    parser.add_argument("--plan-only", action="store_true", help="time plan and merge-tree only (no worktrees)")
    args = parser.parse_args()
    variants = [Variant("after" if args.before else "ds4sync", REPO_ROOT)]
    if args.before:
        variants.insert(0, Variant("before", args.before.resolve()))
    for v in variants:
        compileall.compile_dir(str(v.package / "ds4sync"), quiet=1)
    scratch = Path(tempfile.mkdtemp(prefix="ds4sync-bench-"))
    try:
        branches = args.branches or ["fork"]
        if args.clone_from:
            repo = clone_mirror(args.clone_from.resolve(), scratch / "clone", args.upstream, branches)
        elif args.repo:
            repo = args.repo.resolve()
        else:
            repo = synthetic(scratch / "synthetic", branches[0], args.upstream)
        for branch in branches:
            ahead = git(repo, "rev-list", "--count", f"{branch}..{args.upstream}")
            fork = git(repo, "rev-list", "--count", f"{args.upstream}..{branch}")
            print(f"{branch}: {ahead} upstream commits to merge, {fork} fork commits")
        help_rows = Timings()
        per_branch: dict[str, dict[str, Timings]] = {b: {} for b in branches}
        for number in range(1, args.rounds + 1):
            help_rows.add(*timed(variants[-1].argv("--help"), repo, package=variants[-1].package))
            for branch in branches:
                rows = per_branch[branch]
                one_round(repo, branch, args.upstream, variants, rows, scratch, plan_only=args.plan_only)
                said = ", ".join(f"{name} {t.wall[-1]:.2f}/{t.cpu[-1]:.2f}" for name, t in rows.items())
                print(f"round {number} {branch} (wall/CPU s): {said}", flush=True)
        for branch in branches:
            print_branch(branch, per_branch[branch], variants, plan_only=args.plan_only)
        print_summary(per_branch, variants)
        print(f"ds4sync --help: {help_rows.median()[0]:.3f} s (goal < 0.3 s)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def synthetic(path: Path, branch: str, upstream: str) -> Path:
    """The synthetic repository: 6,000 files, 1,000 upstream commits, a fork branch with its own changes."""
    from forkgen import generate_fork
    from synthrepo import make_synthetic

    start = time.perf_counter()
    base, _ = make_synthetic(path)
    subprocess.run(["git", "checkout", "-q", "-b", branch, base], cwd=path, check=True)
    generate_fork(path, base=base, upstream=upstream)
    subprocess.run(["git", "checkout", "-q", "--detach", upstream], cwd=path, check=True)
    print(f"synthetic repository ready in {time.perf_counter() - start:.1f} s")
    return path


if __name__ == "__main__":
    main()
