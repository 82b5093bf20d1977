"""``ds4sync drift`` over 500 open PRs, beside ``git merge-tree`` alone.

A generated upstream (our own generator, ``tests/loop/pullrefs.py``) with ``--prs`` open PRs as
``refs/pull/N/head``, a 10% share of them editing a file the fork changed, and a fork with one patch-set.
The forge's listing comes from an in-process stand-in (the PRs as GitHub's REST list returns them; no
network), so the time is drift's own: fetching the heads, one tree diff per PR, the merges, the invariants,
the cache.

- ours, cold: the first night (every PR evaluated); ours, warm: the next night (every PR from the cache);
- baseline: ``git merge-tree --write-tree <fork head> <PR head>`` once per PR, nothing else (no fetch, no
  filtering, no invariants), run side by side on the same repository.

Prints the night's time, the per-PR cost of each and the ratio.

    python benchmarks/drift_bench.py [--prs 500]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ds4sync.drift.watch import run_drift  # noqa: E402
from tests.loop.pullrefs import make_pull_history, random_pulls  # noqa: E402


class _ListingStandIn:
    """The forge calls drift makes, answered from the generated PRs (GitHub cannot run here)."""

    def __init__(self, pulls: list[dict[str, Any]]) -> None:
        self._pulls = pulls

    def __enter__(self) -> _ListingStandIn:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def open_pulls(self, *, keep=None, limit=None, updated_since=None) -> list[dict[str, Any]]:
        kept = [p for p in self._pulls if keep is None or keep(p)]
        return kept[:limit] if limit else kept

    def pull(self, number: int) -> dict[str, Any]:
        return {"number": number, "mergeable": True}

    def pull_reviews(self, number: int) -> list[dict[str, Any]]:
        return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prs", type=int, default=500)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ds4sync-bench-drift-") as tmp:
        made = time.perf_counter()
        history = make_pull_history(Path(tmp), random_pulls(args.prs), extra_files=200)
        made = time.perf_counter() - made
        ws = history.workspace()
        forge = _ListingStandIn(history.pulls_json())

        start = time.perf_counter()
        cold = run_drift(ws, forge=forge)
        cold_s = time.perf_counter() - start
        start = time.perf_counter()
        warm = run_drift(ws, forge=forge)
        warm_s = time.perf_counter() - start
        assert warm.cache_hits == cold.listed and warm.merges == 0

        fork_head = cold.fork_head
        start = time.perf_counter()
        for head in history.heads.values():
            subprocess.run(
                ["git", "merge-tree", "--write-tree", fork_head, head],
                cwd=history.fork,
                capture_output=True,
                check=False,
            )
        base_s = time.perf_counter() - start

    n = cold.listed
    print(f"generated upstream with {n} open PR refs in {made:.1f} s; fork changes {cold.fork_files} files")
    print(
        f"drift found {len(cold.entries)} PRs touching the fork ({len(cold.actionable)} to act on), "
        f"{cold.merges} three-way merges, {len(cold.quiet)} quiet"
    )
    print("| run | night (s) | per PR (ms) | ratio to merge-tree alone |")
    print("|---|---|---|---|")
    print(f"| git merge-tree alone, every PR | {base_s:.2f} | {1000 * base_s / n:.1f} | 1.00 |")
    print(
        f"| ds4sync drift, cold (fetch + evaluate) | {cold_s:.2f} | {1000 * cold_s / n:.1f} | {cold_s / base_s:.2f} |"
    )
    print(f"| ds4sync drift, warm (cache) | {warm_s:.2f} | {1000 * warm_s / n:.1f} | {warm_s / base_s:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
