"""What per-hunk provenance costs ``plan``: each real sync's plan without hunks, with the shipped history (one
``git log -L`` per hunk and side), and with the per-file variant (``provenance_per_file.py``), side by side.

    python benchmarks/bench_provenance.py --repo CLONE --syncs PAIRS.json [--last N] [--unguarded]

``PAIRS.json`` is ``realsyncs.py --json``'s output. ``plan``: ``plan_merge`` with the hunk step switched off
(merge-tree, diffs, overlaps). ``per hunk`` (shipped, the baseline): every content conflict's hunks, their
``git log -L`` history on both sides and their owning patch-sets (the shipped profile's). ``per file``: the same
with one ``git log -L`` per file and side, split back per hunk (``--unguarded``: without its run-on guard).
Prints each sync's times and ratios and how many hunks' provenance differs from the shipped one (exit 1 if any).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import provenance_per_file

from ds4sync.core.git import GitRepo
from ds4sync.merge import plan, provenance
from ds4sync.merge.provenance import load_owners
from ds4sync.models.merge_results import MergeSummary
from ds4sync.patchsets.model import PatchSet

ROOT = Path(__file__).resolve().parents[1]


def _plan(repo: GitRepo, sync: dict, base: str, owners: list[PatchSet], mode: str) -> tuple[float, MergeSummary]:
    """One timed ``plan_merge`` of ``sync`` in ``mode`` (plan, per hunk, per file)."""
    real_hunks, real_history = plan._hunks, provenance._with_history
    if mode == "plan":
        plan._hunks = lambda *_a, **_k: {}
    if mode == "per file":
        provenance._with_history = provenance_per_file._with_history
    try:
        start = time.perf_counter()
        summary = plan.plan_merge(
            repo, fork_sha=sync["before_head"], upstream_sha=sync["new_base"], merge_base=base, patchsets=owners
        )
        return time.perf_counter() - start, summary
    finally:
        plan._hunks, provenance._with_history = real_hunks, real_history


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--syncs", type=Path, required=True)
    parser.add_argument("--last", type=int, default=6)
    parser.add_argument("--unguarded", action="store_true")
    args = parser.parse_args(argv)
    provenance_per_file.GUARDED = not args.unguarded
    repo = GitRepo(args.repo)
    owners = load_owners(ROOT / "patches")
    total = [0.0, 0.0, 0.0]
    differing = 0
    for sync in json.loads(args.syncs.read_text())[-args.last :]:
        base = repo.merge_base(sync["before_head"], sync["new_base"]) or ""
        runs = [_plan(repo, sync, base, owners, mode) for mode in ("plan", "per hunk", "per file")]
        times = [t for t, _ in runs]
        shipped, variant = ([h for c in s.conflicts for h in c.hunks] for _, s in runs[1:])
        differ = sum(a != b for a, b in zip(shipped, variant, strict=False)) + abs(len(shipped) - len(variant))
        differing += differ
        total = [a + b for a, b in zip(total, times, strict=True)]
        print(
            f"{sync['before'][:48]:48} conflicts {len(runs[0][1].conflicts):3} hunks {len(shipped):3}  "
            f"plan {times[0]:5.2f} s  per hunk {times[1]:5.2f} s  per file {times[2]:5.2f} s  "
            f"per hunk / per file {times[1] / max(times[2], 1e-9):4.2f}  differing {differ}"
        )
    print(
        f"total: plan {total[0]:.1f} s; per hunk {total[1]:.1f} s ({total[1] / max(total[0], 1e-9):.1f}x plan); "
        f"per file {total[2]:.1f} s ({total[2] / max(total[0], 1e-9):.1f}x plan); "
        f"per hunk / per file {total[1] / max(total[2], 1e-9):.2f}; hunks differing {differing}"
    )
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
