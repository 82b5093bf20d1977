"""For every invariant of a catalogue, find a commit of a fork's history where it is violated.

An invariant that holds on every commit one can name proves nothing. This reads commits from git
(no checkout), evaluates each invariant on the given refs and, for those that hold on all of them,
walks back the first-parent history of ``--walk`` (exponential steps) until one is violated.

Prints one markdown table: invariant, status on each ref, and a witness (a ref or ``<walk>~N``
where it is violated), or ``none found`` with the oldest commit tried.

Usage:
  python scripts/invariant_witnesses.py --repo FORK_CLONE --ref origin/codex/ds4-sm120-min-enable \
      --ref origin/ds4-sm120-full --ref origin/main --walk origin/main [--profile DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from ds4sync.core.git import GitRepo  # noqa: E402
from ds4sync.patchsets.invariants import evaluate_one  # noqa: E402
from ds4sync.patchsets.model import load_catalogue  # noqa: E402
from ds4sync.patchsets.tree import CommitTree  # noqa: E402


def main() -> int:
    """Parse the arguments, evaluate, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, type=Path, help="a clone of the fork (any checkout state)")
    parser.add_argument("--ref", action="append", required=True, help="refs to evaluate every invariant on")
    parser.add_argument("--walk", help="ref whose first-parent history is searched when all refs hold")
    parser.add_argument("--profile", type=Path, default=REPO_ROOT, help="profile folder holding patches/")
    parser.add_argument("--max-back", type=int, default=6000, help="oldest first-parent step tried")
    args = parser.parse_args()

    repo = GitRepo(args.repo)
    _catalogue, patchsets = load_catalogue(args.profile / "patches")
    trees = {ref: CommitTree(repo, repo.out("rev-parse", f"{ref}^{{commit}}")) for ref in args.ref}
    walk: list[tuple[str, CommitTree]] = []
    if args.walk:
        step = 100
        while step <= args.max_back:
            sha = repo.resolve_commit(f"{args.walk}~{step}")  # ~N follows first parents
            if sha is None:
                break
            walk.append((f"{args.walk}~{step}", CommitTree(repo, sha)))
            step *= 2

    short = {ref: ref.removeprefix("origin/") for ref in args.ref}
    print("| patch-set / invariant | " + " | ".join(short.values()) + " | violated at |")
    print("|---|" + "---|" * len(args.ref) + "---|")
    for ps in patchsets:
        for inv, name in zip(ps.invariants, ps.invariant_ids(), strict=True):
            if inv.kind == "test":
                continue
            states = {ref: evaluate_one(tree, inv, patchset=ps.id, name=name) for ref, tree in trees.items()}
            witness = next((short[ref] for ref, r in states.items() if r.status == "violated"), None)
            if witness is None:
                for label, tree in walk:
                    if evaluate_one(tree, inv, patchset=ps.id, name=name).status == "violated":
                        witness = label
                        break
                else:
                    tried = walk[-1][0] if walk else "(no --walk)"
                    witness = f"none found (back to {tried})"
            cells = " | ".join(states[ref].status for ref in args.ref)
            print(f"| {ps.id} / {name} | {cells} | {witness} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
