"""What per-hunk provenance costs ``plan``: the plan of each real sync without hunks and with them, side by side.

    python benchmarks/bench_provenance.py --repo CLONE --syncs PAIRS.json [--last N]

``PAIRS.json`` is ``realsyncs.py --json``'s output. Baseline: ``plan_merge`` with the hunk step switched off
(merge-tree, diffs, overlaps); ours: the same call with every content conflict's hunks, their ``git log -L``
history on both sides and their owning patch-sets (the shipped profile's). Prints each sync's times and the ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ds4sync.core.git import GitRepo
from ds4sync.merge import plan
from ds4sync.merge.provenance import load_owners

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--syncs", type=Path, required=True)
    parser.add_argument("--last", type=int, default=6)
    args = parser.parse_args(argv)
    repo = GitRepo(args.repo)
    owners = load_owners(ROOT / "patches")
    real = plan._hunks
    total = [0.0, 0.0]
    for sync in json.loads(args.syncs.read_text())[-args.last :]:
        base = repo.merge_base(sync["before_head"], sync["new_base"])
        times = []
        for with_hunks in (False, True):
            plan._hunks = real if with_hunks else (lambda *_a, **_k: {})  # type: ignore[assignment]
            start = time.perf_counter()
            summary = plan.plan_merge(
                repo, fork_sha=sync["before_head"], upstream_sha=sync["new_base"], merge_base=base, patchsets=owners
            )
            times.append(time.perf_counter() - start)
        plan._hunks = real
        hunks = [h for c in summary.conflicts for h in c.hunks]
        total = [total[0] + times[0], total[1] + times[1]]
        print(
            f"{sync['before'][:48]:48} conflicts {len(summary.conflicts):3} hunks {len(hunks):3} "
            f"plan {times[0]:6.2f} s  with provenance {times[1]:6.2f} s  ratio {times[1] / max(times[0], 1e-9):5.1f}"
        )
    print(f"total: plan {total[0]:.1f} s, with provenance {total[1]:.1f} s, ratio {total[1] / max(total[0], 1e-9):.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
