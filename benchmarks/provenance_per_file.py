"""The per-file variant of hunk history that ``bench_provenance.py --per-file`` measures against the shipped one.

One ``git log -L`` per file and side with every hunk's range, split back per hunk by the lines git prints for
each range; a hunk whose commits the split cannot be sure of is asked alone (``git log -L`` per hunk, as shipped).
``--unguarded`` drops one guard (a change that ends on a range's last line may run on into the next range, and
git then prints only the first range) to show what it protects: hunks that lose upstream PRs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from ds4sync.core.git import GitRepo, LineCommit
from ds4sync.merge.provenance import Sides, _range
from ds4sync.models.merge_hunks import ConflictHunk, HunkCommit, pr_number

#: Whether the run-on guard is on (``--unguarded`` turns it off).
GUARDED = True


def line_logs(
    repo: GitRepo,
    base: str,
    head: str,
    path: str,
    spans: Sequence[tuple[int, int]],
    *,
    lines: Sequence[str],
    first_parent: bool = False,
) -> list[list[LineCommit] | None] | None:
    """``line_log`` for several ranges of one file in one walk: the commits of each span, in order.

    ``lines``: the file's lines as ``head`` has it (newlines dropped). One ``git log -L`` with every
    span; git prints, per commit, one ``@@`` hunk for each tracked range that commit changed, with the
    range's lines after the commit (context and ``+``) and before it (context and ``-``). Each hunk is
    matched to its span by those lines, which git's own earlier hunks (or ``lines``) give for every
    range, in file order. A span is ``None`` when its commits are not certain (a change that ends on
    the last line of a range before it may run on into it: git merges the two and may print only the
    first), and the whole answer is ``None`` when nothing is (spans that touch, which git
    would merge; a hunk whose lines fit two ranges or none; a merge in a walk of all parents): ask
    ``line_log`` per span then.
    """
    ordered = sorted(range(len(spans)), key=lambda i: spans[i])
    if any(spans[b][0] <= spans[a][1] + 1 for a, b in itertools.pairwise(ordered)):
        return None
    status, out, _ = repo.run(
        "log",
        "--format=%x1e%H%x1f%P%x1f%s",
        *(["--first-parent"] if first_parent else []),
        *(f"-L{spans[i][0]},{spans[i][1]}:{path}" for i in ordered),
        "--end-of-options",
        f"{base}..{head}",
        ok_codes=(0, 128),
        strip=False,
    )
    if status != 0:
        return [[] for _ in spans]
    # (the range's lines, span index) of each range git tracks, in file order, as of the commit being read
    tracked = [(tuple(lines[spans[i][0] - 1 : spans[i][1]]), i) for i in ordered]
    found: list[list[LineCommit] | None] = [[] for _ in spans]
    for record in out.split("\x1e")[1:]:
        head_line, _, patch = record.partition("\n")
        sha, parents, subject = ([*head_line.split("\x1f", 2), "", ""])[:3]
        if not first_parent and len(parents.split()) > 1:
            return None  # a merge hands the ranges to several parents
        hunks = _range_hunks(patch)
        slots = _match_ranges([after for after, _, _ in hunks], [text for text, _ in tracked])
        if slots is None:
            return None
        commit = LineCommit(sha, subject)
        cut = len(tracked)
        for (_after, before, ends_added), slot in zip(hunks, slots, strict=True):
            commits = found[tracked[slot][1]]
            if commits is not None:
                commits.append(commit)
            tracked[slot] = (before, tracked[slot][1])
            if ends_added and GUARDED:
                # the change may run on into the ranges after this one, which git then leaves
                # unprinted and merges with it: their commits are asked one range at a time
                cut = min(cut, slot + 1)
        for _, i in tracked[cut:]:
            found[i] = None
        tracked = [t for t in tracked[:cut] if t[0]]  # lines this commit added: nothing older to follow
    return found


def _with_history(
    repo: GitRepo,
    hunks: list[ConflictHunk],
    sides: Sides,
    texts: dict[str, list[str]],
    *,
    pool: ThreadPoolExecutor | None,
) -> list[ConflictHunk]:
    """Each hunk with the upstream first-parent commits and the fork commits that changed its lines.

    One ``git log -L`` per file and side with every hunk's range (``line_logs``), one per
    hunk where git's answer cannot be split back per hunk.
    """
    groups: dict[tuple[str, str, str, bool], list[tuple[int, tuple[int, int]]]] = {}
    empty: list[tuple[int, str]] = []
    for hunk in hunks:
        for side, head, first_parent in (("upstream", sides.upstream, True), ("fork", sides.fork, False)):
            path = hunk.upstream_path if side == "upstream" else hunk.fork_path
            start = hunk.upstream_start if side == "upstream" else hunk.fork_start
            count = hunk.upstream_count if side == "upstream" else hunk.fork_count
            span = _range(start, count, len(texts[side])) if path and start else None
            if path is None or span is None:
                empty.append((hunk.index, side))
            else:
                groups.setdefault((side, head, path, first_parent), []).append((hunk.index, span))

    def run(group: tuple[tuple[str, str, str, bool], list[tuple[int, tuple[int, int]]]]) -> list[tuple]:
        (side, head, path, first_parent), members = group
        spans = [span for _, span in members]
        alone = _touching(spans)
        apart = [i for i in range(len(spans)) if i not in alone]
        found: dict[int, list[LineCommit]] = {}
        if len(apart) > 1:
            lines = [line.rstrip("\n") for line in texts[side]]
            logs = line_logs(
                repo, sides.base, head, path, [spans[i] for i in apart], lines=lines, first_parent=first_parent
            )
            found.update((i, log) for i, log in zip(apart, logs or (), strict=False) if log is not None)
        for i, (a, b) in enumerate(spans):
            if i not in found:
                found[i] = repo.line_log(sides.base, head, path, a, b, first_parent=first_parent)
        return [
            (index, side, tuple(HunkCommit(sha=c.sha, subject=c.subject, pr=pr_number(c.subject)) for c in found[i]))
            for i, (index, _) in enumerate(members)
        ]

    jobs = list(groups.items())
    done = list(pool.map(run, jobs)) if pool is not None else [run(j) for j in jobs]
    results = [row for rows in done for row in rows] + [(i, s, ()) for i, s in empty]
    history: dict[tuple[int, str], tuple[HunkCommit, ...]] = {(i, s): c for i, s, c in results}
    return [
        h.model_copy(
            update={"upstream_commits": history[(h.index, "upstream")], "fork_commits": history[(h.index, "fork")]}
        )
        for h in hunks
    ]


def _touching(spans: Sequence[tuple[int, int]]) -> set[int]:
    """The spans that overlap or abut another: git merges such ``-L`` ranges, so each is asked alone."""
    ordered = sorted(range(len(spans)), key=lambda i: spans[i])
    alone: set[int] = set()
    reach, reacher = 0, -1
    for i in ordered:
        if reacher >= 0 and spans[i][0] <= reach + 1:
            alone.update((i, reacher))
        if spans[i][1] > reach:
            reach, reacher = spans[i][1], i
    return alone


def _range_hunks(patch: str) -> list[tuple[tuple[str, ...], tuple[str, ...], bool]]:
    """The ``@@`` hunks of one commit in ``git log -L``'s patch: (lines after, lines before, whether the
    range's last line after the commit is one the commit added) each."""
    hunks: list[tuple[list[str], list[str], list[bool]]] = []
    for line in patch.split("\n"):
        if line.startswith("@@ "):
            hunks.append(([], [], [False]))
        elif hunks and line[:1] in (" ", "+", "-"):
            if line[0] != "-":
                hunks[-1][0].append(line[1:])
                hunks[-1][2][0] = line[0] == "+"
            if line[0] != "+":
                hunks[-1][1].append(line[1:])
    return [(tuple(after), tuple(before), added[0]) for after, before, added in hunks]


def _match_ranges(changed: list[tuple[str, ...]], tracked: list[tuple[str, ...]]) -> list[int] | None:
    """The one order-keeping placement of a commit's changed ranges among the tracked ranges, by their lines.

    ``changed``: each ``@@`` hunk's lines after the commit, in file order; ``tracked``: every range git
    tracks, as its lines. ``None`` unless exactly one placement fits.
    """
    found: list[list[int]] = []

    def place(i: int, start: int, chosen: list[int]) -> None:
        if len(found) > 1:
            return
        if i == len(changed):
            found.append(chosen)
            return
        for slot in range(start, len(tracked) - (len(changed) - i) + 1):
            if tracked[slot] == changed[i]:
                place(i + 1, slot + 1, [*chosen, slot])

    place(0, 0, [])
    return found[0] if len(found) == 1 else None
