"""A nightly with nothing new: the quiet skip next to the path the nightly took before it, side by side.

Setup: a synthetic upstream (3,000 files, 200 commits) and a fork with its own commit; one real
nightly syncs it (the "last sync"). Then, with neither side moved:
  baseline: what the nightly did before the skip check: take the lock, fetch upstream's ref,
            resolve and compare it, and find the sync branch already made (``start_merge(..., fetch=True)``
            ending in SyncBranchTaken)
  ours:     ``run_nightly`` (ls-remote of upstream's ref, compare with the last run's SHAs, prune check)
  cli:      ``ds4sync nightly --repo ...`` as a timer runs it (interpreter start-up included)

Usage: python benchmarks/bench_nightly_skip.py [--repeats N]
Goal: the skip's work (ours) well under one second; the CLI, start-up included, under one second.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import git
import yaml
from synthrepo import make_synthetic

from ds4sync.loop.nightly import run_nightly
from ds4sync.loop.sync import SyncBranchTaken, start_merge
from ds4sync.runner import open_workspace

BRANCH = "fork"


def _setup(root: Path) -> Path:
    upstream = root / "upstream"
    fork_point, _tip = make_synthetic(upstream, files=3000, upstream_commits=200)
    fork = root / "fork"
    git.Repo.clone_from(str(upstream), str(fork), origin="upstream").close()
    repo = git.Repo(str(fork))
    repo.git.checkout("-q", "-b", BRANCH, fork_point)
    (fork / "fork_feature.py").write_text("FEATURE = True\n")
    repo.index.add(["fork_feature.py"])
    repo.index.commit("fork: a feature of its own")
    repo.git.checkout("-q", "main")
    repo.close()
    profile = root / "profile"  # an empty profile: the synthetic tree is not the DS4 fork
    for folder in ("patches/resolutions", "gates"):
        (profile / folder).mkdir(parents=True)
    (fork / "ds4sync.yaml").write_text(
        yaml.safe_dump(
            {"upstream": {"remote": "upstream", "ref": "main"}, "fork": {"branch": BRANCH}, "profile": str(profile)}
        )
    )
    return fork


def _median(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    """Build the pair, sync once, then time the three no-change paths and print them with ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ds4sync-bench-skip-") as tmp:
        fork = _setup(Path(tmp))
        ws = open_workspace(fork)
        first = run_nightly(ws, notify=False)
        assert first.record is not None and first.record.status == "done", first.message

        def baseline() -> None:
            try:
                start_merge(open_workspace(fork), "main", fetch=True)
            except SyncBranchTaken:
                return
            raise SystemExit("baseline did not end at the existing sync branch")

        def ours() -> None:
            night = run_nightly(open_workspace(fork), notify=False)
            if not night.skipped:
                raise SystemExit(f"not a skip: {night.message}")

        def cli() -> None:
            env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
            done = subprocess.run(
                [sys.executable, "-m", "ds4sync.cli", "nightly", "--repo", str(fork)], capture_output=True, env=env
            )
            if done.returncode != 0:
                raise SystemExit(done.stderr.decode()[-400:])

        def startup() -> None:
            env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
            subprocess.run([sys.executable, "-m", "ds4sync.cli", "--help"], capture_output=True, env=env, check=True)

        base_s, ours_s, cli_s, help_s = (_median(fn, args.repeats) for fn in (baseline, ours, cli, startup))
    print(f"no-change nightly, median of {args.repeats} (3,000 files, 200 upstream commits):")
    print(f"  baseline (lock + fetch + compare + sync branch taken): {base_s * 1000:8.1f} ms")
    ratio = ours_s / base_s
    print(f"  ours     (ls-remote + compare with the last run)      : {ours_s * 1000:8.1f} ms   ratio {ratio:.2f}x")
    print(f"  cli      (ds4sync nightly, start-up included)         : {cli_s * 1000:8.1f} ms")
    print(f"  start-up (ds4sync --help, for scale)                  : {help_s * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
