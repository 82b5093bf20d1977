"""Real syncs mined from a fork's own rebase history: the ground truth the resolution, semantic and drift
benchmarks score against.

A fork that rebases keeps the state before a rebase (a ``backup/...`` branch, or any branch left on an older
base) and later carries the same commits on a newer upstream base. Each such pair is one real sync whose result a
person wrote:

    before:  fork commits F on upstream base B0         (the branch as it was)
    after:   the same commits F' on upstream base B1     (B0 is an ancestor of B1; F' matched to F by subject)

Merging B1 into ``before`` is the sync ds4sync would have run; the tree of the ``after`` commit that closes the
matched run of commits is what the person kept. Pairs are found by commit subjects alone, so a rebase that squashed
or reworded most commits is not paired (it leaves no ground truth to compare with).

    python benchmarks/realsyncs.py --repo CLONE [--upstream main] [--json]

prints the pairs found (``CLONE`` is any non-bare clone, ``--no-checkout`` is enough; every branch and
remote-tracking branch other than the upstream one is a candidate).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from ds4sync.core.git import GitRepo

#: Share of the ``before`` commits that the ``after`` run must carry, and most share of that run that may be new.
MIN_CARRIED = 0.7
MAX_NEW = 0.35


@dataclass(frozen=True)
class RealSync:
    """One rebase of fork commits onto a newer upstream base, with the person's result.

    Attributes:
        before: the branch that holds the fork before the sync; ``before_head`` its tip SHA.
        old_base: merge-base of ``before_head`` with the upstream branch.
        after: the branch that carries the same commits later; ``after_head`` the SHA of the commit that
            closes the matched run (its tree is the person's result).
        new_base: merge-base of ``after_head`` with the upstream branch (``old_base`` is its proper ancestor).
        upstream_commits: first-parent upstream commits in ``old_base..new_base``.
        carried, total: ``before`` commits whose subject the ``after`` run carries, of all ``before`` commits.
        new: commits of the ``after`` run whose subject ``before`` does not have.
    """

    before: str
    before_head: str
    old_base: str
    after: str
    after_head: str
    new_base: str
    upstream_commits: int
    carried: int
    total: int
    new: int


@dataclass(frozen=True)
class _Line:
    name: str
    head: str
    base: str
    commits: tuple[tuple[str, str], ...]  # (sha, subject), oldest first


def _lines(repo: GitRepo, upstream: str) -> list[_Line]:
    refs = repo.out("for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes").splitlines()
    upstream_sha = repo.resolve_commit(upstream)
    lines: dict[str, _Line] = {}
    for ref in refs:
        if ref.endswith("/HEAD"):
            continue
        name = ref.removeprefix("refs/heads/").removeprefix("refs/remotes/origin/").removeprefix("refs/remotes/")
        head = repo.resolve_commit(ref)
        if head is None or head == upstream_sha or name in lines:
            continue
        base = repo.merge_base(head, upstream)
        if base is None or base == head:
            continue
        out = repo.out("log", "--reverse", "--no-merges", "--format=%H%x1f%s", "--end-of-options", f"{base}..{head}")
        commits = tuple(tuple(row.split("\x1f", 1)) for row in out.splitlines() if "\x1f" in row)
        if commits:
            lines[name] = _Line(name, head, base, commits)  # type: ignore[arg-type]
    return list(lines.values())


def _match(before: _Line, after: _Line) -> tuple[int, int, int] | None:
    """(index closing the matched run in ``after``, carried, new), or None when ``after`` does not carry ``before``."""
    wanted = {subject for _, subject in before.commits}
    best: tuple[int, int, int] | None = None
    seen: set[str] = set()
    new = 0
    for index, (_, subject) in enumerate(after.commits):
        if subject in wanted:
            seen.add(subject)
        else:
            new += 1
        carried = len(seen)
        if (
            carried >= MIN_CARRIED * len(wanted)
            and new <= MAX_NEW * (index + 1)
            and (best is None or carried > best[1])
        ):
            best = (index, carried, new)
    return best


def find_real_syncs(repo: GitRepo, *, upstream: str = "main") -> list[RealSync]:
    """Every (before, after) pair of the repository's branches that is a rebase onto a newer upstream base.

    For each ``before`` line, the ``after`` line with the nearest newer base wins (ties: more commits carried).
    Pairs with the same two SHAs are listed once. Ordered by the sync's new base date, then name.
    """
    lines = _lines(repo, upstream)
    found: dict[tuple[str, str], RealSync] = {}
    for before in lines:
        best: tuple[int, int, RealSync] | None = None
        for after in lines:
            if after.base == before.base or not repo.is_ancestor(before.base, after.base):
                continue
            match = _match(before, after)
            if match is None:
                continue
            index, carried, new = match
            distance = len(repo.out("rev-list", "--first-parent", f"{before.base}..{after.base}").split())
            sync = RealSync(
                before=before.name,
                before_head=before.head,
                old_base=before.base,
                after=after.name,
                after_head=after.commits[index][0],
                new_base=after.base,
                upstream_commits=distance,
                carried=carried,
                total=len({s for _, s in before.commits}),
                new=new,
            )
            key = (distance, -carried, 0)
            if best is None or key < (best[0], best[1], 0):
                best = (distance, -carried, sync)
        if best is not None:
            sync = best[2]
            found.setdefault((sync.before_head, sync.after_head), sync)
    dates = {s.new_base: repo.out("log", "-1", "--format=%ct", s.new_base) for s in found.values()}
    return sorted(found.values(), key=lambda s: (dates[s.new_base], s.before))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--upstream", default="main")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    syncs = find_real_syncs(GitRepo(args.repo), upstream=args.upstream)
    if args.json:
        print(json.dumps([asdict(s) for s in syncs], indent=2))
        return 0
    for s in syncs:
        print(
            f"{s.before:70} -> {s.after:55} {s.old_base[:10]}..{s.new_base[:10]} "
            f"upstream {s.upstream_commits:5}  carried {s.carried}/{s.total}  new {s.new}"
        )
    print(f"{len(syncs)} real syncs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
