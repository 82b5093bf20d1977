"""What per-hunk provenance costs ``plan``: each real sync's plan without hunks, with every hunk range's history
asked alone (one ``git log -L`` per hunk and side, the baseline), and as shipped (one range of each file per walk
of a side, where git's answer is each range's own), side by side.

    python benchmarks/bench_provenance.py --repo CLONE --syncs PAIRS.json [--last N]

``PAIRS.json`` is ``realsyncs.py --json``'s output. ``plan``: ``plan_merge`` with the hunk step switched off
(merge-tree, diffs, overlaps). ``alone``: every content conflict's hunks, their ``git log -L`` history on both
sides and their owning patch-sets (the shipped profile's), each range walked alone (every side taken as one whose
walk holds a merge). ``shipped``: the same as ``plan`` runs it. Prints each sync's times and ratios and how many
hunks' provenance differs between the two (exit 1 if any).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ds4sync.core.git import GitRepo
from ds4sync.merge import plan
from ds4sync.merge.provenance import load_owners
from ds4sync.models.merge_results import MergeSummary
from ds4sync.patchsets.model import PatchSet

ROOT = Path(__file__).resolve().parents[1]


def _plan(repo: GitRepo, sync: dict, base: str, owners: list[PatchSet], mode: str) -> tuple[float, MergeSummary]:
    """One timed ``plan_merge`` of ``sync`` in ``mode`` (plan, alone, shipped)."""
    real_hunks, real_merges = plan._hunks, GitRepo.has_merges
    if mode == "plan":
        plan._hunks = lambda *_a, **_k: {}
    if mode == "alone":
        GitRepo.has_merges = lambda *_a, **_k: True  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        summary = plan.plan_merge(
            repo, fork_sha=sync["before_head"], upstream_sha=sync["new_base"], merge_base=base, patchsets=owners
        )
        return time.perf_counter() - start, summary
    finally:
        plan._hunks, GitRepo.has_merges = real_hunks, real_merges  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--syncs", type=Path, required=True)
    parser.add_argument("--last", type=int, default=6)
    args = parser.parse_args(argv)
    repo = GitRepo(args.repo)
    owners = load_owners(ROOT / "patches")
    total = [0.0, 0.0, 0.0]
    differing = 0
    for sync in json.loads(args.syncs.read_text())[-args.last :]:
        base = repo.merge_base(sync["before_head"], sync["new_base"]) or ""
        runs = [_plan(repo, sync, base, owners, mode) for mode in ("plan", "alone", "shipped")]
        times = [t for t, _ in runs]
        alone, shipped = ([h for c in s.conflicts for h in c.hunks] for _, s in runs[1:])
        differ = sum(a != b for a, b in zip(alone, shipped, strict=False)) + abs(len(alone) - len(shipped))
        differing += differ
        total = [a + b for a, b in zip(total, times, strict=True)]
        print(
            f"{sync['before'][:48]:48} conflicts {len(runs[0][1].conflicts):3} hunks {len(shipped):3}  "
            f"plan {times[0]:5.2f} s  alone {times[1]:5.2f} s  shipped {times[2]:5.2f} s  "
            f"alone / shipped {times[1] / max(times[2], 1e-9):4.2f}  differing {differ}"
        )
    print(
        f"total: plan {total[0]:.1f} s; alone {total[1]:.1f} s ({total[1] / max(total[0], 1e-9):.1f}x plan); "
        f"shipped {total[2]:.1f} s ({total[2] / max(total[0], 1e-9):.1f}x plan); "
        f"alone / shipped {total[1] / max(total[2], 1e-9):.2f}; hunks differing {differing}"
    )
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
