"""``ds4sync bisect`` side by side with ``git bisect run``, on a generated history or a real fork.

Generated (default): a fork and 1,000 upstream first-parent commits with one planted commit that breaks a
patch-set invariant. Baseline: ``git bisect start --first-parent`` + ``git bisect run`` with a shell check
that does the same test for that one invariant (merge-tree, then grep the merged file); ours: ``ds4sync
bisect`` over the whole catalogue (invariants of every patch-set, replay of the carry patch). Prints both
evaluation counts, the bound ``ceil(log2 N) + 2``, wall times and the ratio.

Real history: ``--repo`` a checkout of the fork with ``--branch`` (the fork branch), ``--good`` and ``--bad``
(upstream commits, good an ancestor of bad), ``--patchset`` (one patch-set id, repeatable) and ``--profile``
(default: the shipped DS4 profile). Runs the bisect cold and again from the step cache, and prints both.

    python benchmarks/bench_bisect.py [--commits 1000] [--culprit 613]
    python benchmarks/bench_bisect.py --repo FORK --branch ds4-sm120-full --good SHA --bad SHA --patchset ID
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "loop"))  # the generated-history builder the tests use

from ds4sync.loop.bisect import bisect  # noqa: E402
from ds4sync.runner import open_workspace  # noqa: E402

CHECK = """#!/bin/sh
# git bisect run: 0 good, 1 bad, 125 skip. The same question ds4sync asks, for one invariant only.
tree=$(git merge-tree --write-tree fork HEAD 2>/dev/null | head -1) || exit 125
git cat-file -p "$tree:vllm/hooks.py" | grep -q '^def on_load(' && exit 0 || exit 1
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def generated(commits: int, culprit: int) -> dict:
    from history import BREAK_INVARIANT, make_history

    with tempfile.TemporaryDirectory(prefix="ds4sync-bench-bisect-") as tmp:
        history = make_history(Path(tmp), commits, {culprit: BREAK_INVARIANT})
        planted = history.upstream[culprit]

        start = time.perf_counter()
        ws = history.workspace()
        ours = bisect(ws, fork_branch="fork", good=history.base, bad=history.upstream[-1])
        ours_s = time.perf_counter() - start
        assert ours.first_bad is not None and ours.first_bad.upstream_sha == planted, ours.culprit_line()

        start = time.perf_counter()
        cached = bisect(history.workspace(), fork_branch="fork", good=history.base, bad=history.upstream[-1])
        cached_s = time.perf_counter() - start

        check = Path(tmp) / "check.sh"
        check.write_text(CHECK)
        check.chmod(0o755)
        work = Path(tmp) / "bisect-wt"
        _git(history.root, "worktree", "add", "-q", "--detach", str(work), history.upstream[-1])
        start = time.perf_counter()
        _git(work, "bisect", "start", "--first-parent", history.upstream[-1], history.base)
        _git(work, "bisect", "run", str(check))
        git_s = time.perf_counter() - start
        log = _git(work, "bisect", "log")
        git_found = _git(work, "rev-parse", "refs/bisect/bad").strip()
        git_steps = sum(line.startswith(("# good:", "# bad:", "# skip:")) for line in log.splitlines()) - 2
        _git(work, "bisect", "reset")
    return {
        "history": f"generated: {commits} upstream first-parent commits, culprit at index {culprit}",
        "found_same_commit": git_found == planted,
        "ours_evaluations": ours.evaluations,
        "git_bisect_steps": git_steps,
        "bound": ours.bound,
        "ours_s": round(ours_s, 2),
        "ours_cached_s": round(cached_s, 2),
        "cached_steps_all": all(s.cached for s in cached.steps),
        "git_bisect_run_s": round(git_s, 2),
        "ratio_ours_to_git_bisect": round(ours_s / git_s, 2),
    }


def real(args: argparse.Namespace) -> dict:
    state = Path(tempfile.mkdtemp(prefix="ds4sync-bench-bisect-state-"))
    try:
        profile = Path(args.profile) if args.profile else ROOT
        rows = []
        for attempt in ("cold", "cached"):
            ws = open_workspace(Path(args.repo), branch=args.branch, state_dir=state, profile=profile)
            start = time.perf_counter()
            result = bisect(
                ws, fork_branch=args.branch, good=args.good, bad=args.bad, patchsets=tuple(args.patchset or ())
            )
            rows.append((attempt, time.perf_counter() - start, result))
    finally:
        shutil.rmtree(state, ignore_errors=True)
    cold, cached = rows[0][2], rows[1][2]
    return {
        "history": f"{args.repo} {args.branch}: {cold.candidates} upstream first-parent commits",
        "patchsets": args.patchset,
        "status": cold.status,
        "culprit": cold.culprit_line(),
        "evaluations": cold.evaluations,
        "bound": cold.bound,
        "modes": "".join(s.mode[0] for s in cold.steps),
        "cold_s": round(rows[0][1], 2),
        "cached_s": round(rows[1][1], 2),
        "cached_steps_all": all(s.cached for s in cached.steps),
        "ratio_cached_to_cold": round(rows[1][1] / rows[0][1], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--culprit", type=int, default=613)
    parser.add_argument("--repo")
    parser.add_argument("--branch")
    parser.add_argument("--good")
    parser.add_argument("--bad")
    parser.add_argument("--patchset", action="append")
    parser.add_argument("--profile")
    args = parser.parse_args()
    result = real(args) if args.repo else generated(args.commits, args.culprit)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
