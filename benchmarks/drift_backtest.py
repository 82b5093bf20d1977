"""Backtest ``ds4sync drift`` on a fork's real syncs: would it have announced the conflicts beforehand?

For each real sync (``benchmarks/realsyncs.py``: a branch before a rebase, ``before_head`` on ``old_base``,
paired with the later branch on ``new_base``), every upstream first-parent commit in ``old_base..new_base`` is
treated as an open PR seen before the sync (its own changes: first parent to commit). Two predictors flag it:

- drift: the PR's changes merged three-way into the fork's tree (``before_head``), file by file, only files
  the fork changed (``ds4sync.drift.evaluate.evaluate_pull``, the same code ``ds4sync drift`` runs);
- overlap: the PR changes a file the fork changed.

The truth is what really conflicted when merging ``new_base`` into ``before_head`` (``git merge-tree``).
A flagged PR is right when a file it names really conflicted. Printed per predictor: PRs flagged (share of
all), precision, and the files announced beforehand among those that conflicted (recall over files).

    python benchmarks/drift_backtest.py --repo CLONE [--upstream main] [--limit N] [--syncs PAIRS.json] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from realsyncs import RealSync, find_real_syncs  # noqa: E402

from ds4sync.core.errors import GitError  # noqa: E402
from ds4sync.core.git import GitRepo  # noqa: E402
from ds4sync.drift.evaluate import ForkContext, evaluate_pull  # noqa: E402


@dataclass
class Tally:
    """One predictor's counts over every sync."""

    prs: int = 0
    flagged: int = 0
    right: int = 0
    announced: set[tuple[int, str]] = field(default_factory=set)  # (sync index, path) named before the sync

    def row(self, name: str, conflicted: int) -> str:
        share = self.flagged / self.prs if self.prs else 0.0
        precision = self.right / self.flagged if self.flagged else 0.0
        return (
            f"| {name} | {self.prs} | {self.flagged} ({share:.1%}) | {self.right} | {precision:.1%} "
            f"| {len(self.announced)} of {conflicted} ({len(self.announced) / conflicted if conflicted else 0:.0%}) |"
        )


def backtest(repo: GitRepo, *, upstream: str, limit: int | None, syncs_file: Path | None = None) -> dict:
    if syncs_file is not None:  # the pairs `realsyncs.py --json` printed (finding them is the slow part)
        syncs = [RealSync(**item) for item in json.loads(syncs_file.read_text())][:limit]
    else:
        syncs = find_real_syncs(repo, upstream=upstream)[:limit]
    drift, overlap = Tally(), Tally()
    conflicted_total = 0
    start = time.perf_counter()
    merges = 0
    per_sync = []
    skipped: list[str] = []
    for index, sync in enumerate(syncs):
        try:
            truth = {c.path for c in repo.merge_tree(sync.before_head, sync.new_base).conflicts}
        except GitError as exc:  # a clone missing objects of this pair: the sync cannot be replayed
            skipped.append(f"{sync.before}: {exc.one_line()}")
            continue
        print(f"sync {index + 1}/{len(syncs)} {sync.before}: {len(truth)} conflicted", file=sys.stderr, flush=True)
        conflicted_total += len(truth)
        ctx = ForkContext.build(
            repo,
            fork_head=sync.before_head,
            fork_base=sync.old_base,
            catalogue=None,
            patchsets=[],
            patches_dir=ROOT / "nonexistent",
        )
        commits = repo.out("rev-list", "--first-parent", "--reverse", f"{sync.old_base}..{sync.new_base}").split()
        flagged_here = 0
        for commit in commits:
            parent = repo.out("rev-parse", f"{commit}^1")
            drift.prs += 1
            overlap.prs += 1
            touched = set(repo.changed_names(parent, commit)) & ctx.fork_files
            if touched:
                overlap.flagged += 1
                overlap.right += bool(touched & truth)
                overlap.announced |= {(index, p) for p in touched & truth}
                found = evaluate_pull(ctx, commit, base=parent)
                merges += found.merged
                named = {c.path for c in found.conflicts}
                if named:
                    flagged_here += 1
                    drift.flagged += 1
                    drift.right += bool(named & truth)
                    drift.announced |= {(index, p) for p in named & truth}
        per_sync.append(
            {
                "before": sync.before,
                "upstream_commits": len(commits),
                "conflicted": len(truth),
                "drift_flagged": flagged_here,
            }
        )
    return {
        "syncs": len(syncs) - len(skipped),
        "skipped": skipped,
        "conflicted_files": conflicted_total,
        "drift": drift,
        "overlap": overlap,
        "merges": merges,
        "seconds": round(time.perf_counter() - start, 1),
        "per_sync": per_sync,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repo", type=Path, required=True, help="a non-bare clone of the fork (--no-checkout is enough)"
    )
    parser.add_argument("--upstream", default="main")
    parser.add_argument("--limit", type=int, default=None, help="only the first N syncs")
    parser.add_argument("--syncs", type=Path, default=None, help="the output of realsyncs.py --json for this clone")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = backtest(GitRepo(args.repo), upstream=args.upstream, limit=args.limit, syncs_file=args.syncs)
    drift, overlap, conflicted = result["drift"], result["overlap"], result["conflicted_files"]
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k not in ("drift", "overlap")}, indent=2))
    print(
        f"{result['syncs']} real syncs, {drift.prs} upstream commits treated as open PRs, "
        f"{conflicted} files really conflicted; {result['merges']} three-way merges in {result['seconds']} s"
    )
    for line in result["skipped"]:
        print(f"skipped {line}")
    print("| predictor | PRs | flagged | right | precision | conflicted files announced beforehand |")
    print("|---|---|---|---|---|---|")
    print(drift.row("drift (3-way merge of the fork's files)", conflicted))
    print(overlap.row("file overlap", conflicted))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
