"""The cost of ``live:`` in verify: the DS4 catalogue checked on fork commits with and without it; prints a ratio.

Baseline: the catalogue with every ``live`` option removed. Ours: the catalogue as shipped (the decode
dispatch invariants walk imports from the DeepSeek V4 model; the DeepGEMM fallback one resolves
``deep_gemm.py``'s imports). Both read the same commit from git (``CommitTree``, a fresh one per check,
so no import graph is reused) through ``check_tree``, interleaved, ``--rounds`` times; the time is CPU
time of this process and its git children (user + sys), so the machine's load does not count.

A last line times the worst case: a file the entry does not reach, so the walk reads and parses every
module the model imports before it can say so.

Usage:
  python benchmarks/bench_liveness.py --repo CLONE --ref origin/codex/ds4-sm120-min-enable \\
      --ref origin/ds4-sm120-full [--profile DIR] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from ds4sync.core.git import GitRepo  # noqa: E402
from ds4sync.patchsets.check import check_tree  # noqa: E402
from ds4sync.patchsets.invariants import evaluate_one  # noqa: E402
from ds4sync.patchsets.model import ContainsInvariant, Liveness, PatchSet, load_catalogue  # noqa: E402
from ds4sync.patchsets.tree import CommitTree  # noqa: E402


def cpu(fn: Callable[[], object]) -> float:
    """User + sys seconds of ``fn`` in this process and the children it waited for."""
    before = os.times()
    fn()
    after = os.times()
    return sum(getattr(after, f) - getattr(before, f) for f in ("user", "system", "children_user", "children_system"))


def without_live(patchsets: list[PatchSet]) -> list[PatchSet]:
    """The same patch-sets with every invariant's ``live`` option removed."""
    stripped = []
    for ps in patchsets:
        invariants = tuple(
            inv.model_copy(update={"live": None}) if getattr(inv, "live", None) else inv for inv in ps.invariants
        )
        stripped.append(ps.model_copy(update={"invariants": invariants}))
    return stripped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True, help="a clone of the fork")
    parser.add_argument("--ref", action="append", required=True, help="a fork commit to check (repeatable)")
    parser.add_argument("--profile", type=Path, default=REPO_ROOT, help="profile folder (default: the DS4 one)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    repo = GitRepo(args.repo)
    catalogue, patchsets = load_catalogue(args.profile / "patches")
    plain = without_live(patchsets)
    live_count = sum(1 for ps in patchsets for inv in ps.invariants if getattr(inv, "live", None))
    print(f"catalogue: {sum(len(ps.invariants) for ps in patchsets)} invariants, {live_count} with live:")
    for ref in args.ref:
        sha = repo.resolve_commit(ref)
        assert sha, ref
        base, mine = [], []
        for _ in range(args.rounds):  # interleaved so drift hits both sides alike
            base.append(cpu(partial(check_tree, CommitTree(repo, sha), catalogue, plain, patches_dir="patches")))
            mine.append(cpu(partial(check_tree, CommitTree(repo, sha), catalogue, patchsets, patches_dir="patches")))
        report = check_tree(CommitTree(repo, sha), catalogue, patchsets, patches_dir="patches")
        held = [
            r.invariant
            for ps in report.patchsets
            for r in ps.invariants
            if r.status == "holds" and any(e.startswith("live: ") for e in r.evidence)
        ]
        b, m = statistics.median(base), statistics.median(mine)
        print(
            f"{ref} ({sha[:9]}): without live median {b:.3f} s CPU, with live {m:.3f} s CPU, "
            f"ratio {m / b:.2f}x; live chains found for {len(held)} invariant(s)"
        )
    worst = ContainsInvariant(
        kind="contains",
        files=("vllm/entrypoints/cli/main.py",),
        pattern=r"def main",
        live=Liveness(entry=("vllm.models.deepseek_v4.nvidia.model", "vllm.model_executor.models.deepseek_v4")),
    )
    sha = repo.resolve_commit(args.ref[0])
    assert sha
    times = [
        cpu(lambda: evaluate_one(CommitTree(repo, sha), worst, patchset="x", name="dead"))
        for _ in range(max(1, args.rounds // 2))
    ]
    result = evaluate_one(CommitTree(repo, sha), worst, patchset="x", name="dead")
    print(
        f"worst case on {args.ref[0]}: a file the model does not reach, {result.status}: "
        f"{statistics.median(times):.3f} s CPU"
    )


if __name__ == "__main__":
    main()
