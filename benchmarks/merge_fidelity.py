"""Does ds4sync's merge say what git says? Conflicts by kind, paths, rename-free overlaps, times next to plain git.

On an existing fork checkout (nothing is downloaded or built):

    python benchmarks/merge_fidelity.py --repo DIR --branch FORK_BRANCH --upstream REV [--rounds 3]

It runs, side by side on the same pair:
  plain git:  ``git worktree add`` + ``git merge --no-ff --no-commit`` (conflicts from ``git ls-files -u``,
              kinds from git's own ``CONFLICT (<kind>)`` lines), and ``git merge-tree --write-tree``
  ds4sync:    ``ds4sync plan`` and ``ds4sync merge`` (stops for a person at resolve; aborted after)

and prints: conflict counts by kind (git's labels and ds4sync's kinds), whether the plan's paths equal
the paths git's merge left unmerged, the overlap list with any rename artefact flagged (an overlap at a
path one side deleted or renamed away), and the median times with their ratios.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DS4SYNC = [sys.executable, "-m", "ds4sync.cli"]
LABEL = re.compile(r"^CONFLICT \(([^)]*)\)", re.MULTILINE)


def git(repo: Path, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env={"LC_ALL": "C", **_env()})
    if proc.returncode not in ok:
        raise SystemExit(f"git {' '.join(args)} failed: {proc.stderr.strip()[-300:]}")
    return proc.stdout + proc.stderr


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def ds4sync(repo: Path, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run([*DS4SYNC, *args, "--repo", str(repo)], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"ds4sync {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    body = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return elapsed, body.get("data", body)


def plain_merge(repo: Path, branch: str, upstream: str, scratch: Path) -> tuple[float, set[str], collections.Counter]:
    wt = scratch / "plain"
    start = time.perf_counter()
    git(repo, "worktree", "add", "-q", "-b", "fidelity-plain", str(wt), branch)
    said = git(wt, "-c", "rerere.enabled=false", "merge", "--no-ff", "--no-commit", upstream, ok=(0, 1))
    elapsed = time.perf_counter() - start
    unmerged = {line.split("\t", 1)[1] for line in git(wt, "ls-files", "-u").splitlines() if "\t" in line}
    git(repo, "worktree", "remove", "--force", "--force", str(wt))
    git(repo, "branch", "-D", "-q", "fidelity-plain")
    return elapsed, unmerged, collections.Counter(LABEL.findall(said))


def gone_paths(repo: Path, base: str, head: str) -> set[str]:
    """Paths a side deleted or renamed away since the merge-base (git's rename detection)."""
    out = git(repo, "diff", "--name-status", "-M", base, head)
    gone = set()
    for line in out.splitlines():
        fields = line.split("\t")
        if fields[0].startswith(("D", "R")):
            gone.add(fields[1])
    return gone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--branch", required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    repo, branch, upstream = args.repo.resolve(), args.branch, args.upstream
    scratch = Path(tempfile.mkdtemp(prefix="ds4sync-fidelity-"))
    times: dict[str, list[float]] = {"merge-tree": [], "plan": [], "git merge": [], "ds4sync merge": []}
    try:
        for _ in range(args.rounds):
            start = time.perf_counter()
            git(repo, "merge-tree", "--write-tree", branch, upstream, ok=(0, 1))
            times["merge-tree"].append(time.perf_counter() - start)
            elapsed, plan = ds4sync(repo, "plan", upstream, "--branch", branch, "--json")
            times["plan"].append(elapsed)
            elapsed, unmerged, labels = plain_merge(repo, branch, upstream, scratch)
            times["git merge"].append(elapsed)
            elapsed, merged = ds4sync(repo, "merge", upstream, "--branch", branch, "--json", ok=(0, 1, 4))
            times["ds4sync merge"].append(elapsed)
            ds4sync(repo, "abort", "--yes")
        base = plan["merge_base"]
        print(
            f"{repo} {branch} <- {upstream}: {plan['upstream_commits']} upstream, {plan['fork_commits']} fork commits"
        )
        print(f"git merge CONFLICT lines by git's label: {dict(labels.most_common())}")
        kinds = collections.Counter(c["kind"] for c in plan["conflicts"])
        print(f"ds4sync plan conflicts by kind ({len(plan['conflicts'])}): {dict(kinds.most_common())}")
        eol = [c["path"] for c in plan["conflicts"] if c.get("eol_only")]
        print(f"eol-only: {len(eol)} {eol[:5]}")
        planned = {c["path"] for c in plan["conflicts"]}
        merged_paths = {c["path"] for c in merged.get("conflicts", [])}
        print(f"plan paths == git's unmerged paths: {planned == unmerged} ({len(planned)} vs {len(unmerged)})")
        print(f"ds4sync merge paths == git's unmerged paths: {merged_paths == unmerged}")
        for c in plan["conflicts"]:
            if c["kind"] not in ("content", "add/add"):
                print(f"  {c['kind']:>16}  {c['path']}")
        gone = gone_paths(repo, base, upstream) | gone_paths(repo, base, branch)
        overlaps = plan["overlaps"]
        artefacts = [o for o in overlaps if o["path"] in gone]
        print(f"overlaps: {len(overlaps)}, rename artefacts (at a path a side deleted/renamed away): {len(artefacts)}")
        for o in sorted(overlaps, key=lambda o: -(o["upstream_lines"] + o["fork_lines"])):
            moved = f"  (was {o['base_path']})" if o.get("base_path") else ""
            print(f"  {o['upstream_lines']:>5} up {o['fork_lines']:>5} fork  {o['path']}{moved}")
        med = {name: statistics.median(values) for name, values in times.items()}
        for name, value in med.items():
            print(f"{name:>14}: median {value:.3f} s over {args.rounds} rounds")
        print(f"plan / merge-tree = {med['plan'] / med['merge-tree']:.2f}x (plan adds CLI start-up, diffs, counts)")
        print(f"ds4sync merge / (worktree add + git merge) = {med['ds4sync merge'] / med['git merge']:.2f}x")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
