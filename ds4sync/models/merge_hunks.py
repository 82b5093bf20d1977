"""Conflict hunks: what each side wrote in one conflicted region, who changed it, and what answered it.

Models plus pure text functions (no git): the hunks come from git's own diff3 merge of the three
stages (:meth:`ds4sync.core.git.GitRepo.merge_file_diff3`), which writes exactly the hunks
``git merge`` writes; :mod:`ds4sync.merge.provenance` adds their history.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ds4sync.core.model import FrozenModel

#: Where a hunk's resolution came from: the shared store, a path rule, a model endpoint (a proposal,
#: never a person's), or a person.
HunkSource = Literal["store", "rule", "model", "person"]

_PR = re.compile(r"\(#(\d+)\)")


def pr_number(subject: str) -> int | None:
    """The pull request a first-parent subject names, ``(#NNNN)`` (the last one: GitHub's squash suffix)."""
    found = _PR.findall(subject)
    return int(found[-1]) if found else None


class HunkCommit(FrozenModel):
    """A commit that changed the hunk's lines since the merge-base: SHA, subject, and its PR when named."""

    sha: str
    subject: str
    pr: int | None = None


class HunkOwner(FrozenModel):
    """The patch-set that owns the fork side of a hunk.

    ``matched_by``: ``patch lines`` (a line the patch adds is in the fork text), ``patch`` (its patch
    touches the file), ``invariant`` (an invariant reads the file).
    """

    patchset: str
    title: str = ""
    rationale: str = ""
    matched_by: tuple[str, ...] = ()


class HunkProposal(FrozenModel):
    """One resolver's proposed text for a hunk and what validation made of it.

    ``status``: ``validated`` (every check passed) or ``dropped`` (``reason`` names the failed check).
    ``resolver``: who proposed it (``model``); ``endpoint``: the model name it came from. ``written``:
    the validated text is in the worktree file (only once every hunk of the file has one).
    """

    resolver: str
    endpoint: str = ""
    status: Literal["validated", "dropped"]
    reason: str = ""
    text: str | None = None
    written: bool = False


class ConflictHunk(FrozenModel):
    """One conflict hunk of a content conflict: the three texts, their lines, their history, their owner.

    ``*_start``/``*_count``: the 1-based first line and the line count of the hunk in the merge-base,
    fork and upstream file (``*_path``, which differ when a side renamed the file); a count of 0
    is a deletion before that line. ``upstream_commits``: first-parent upstream commits since the
    merge-base that changed those lines (with their PR numbers), newest first; ``fork_commits``:
    the fork commits that did. ``source``: what resolved it (None: nothing yet).
    """

    index: int
    base: str
    fork: str
    upstream: str
    base_path: str | None = None
    fork_path: str | None = None
    upstream_path: str | None = None
    base_start: int = 0
    base_count: int = 0
    fork_start: int = 0
    fork_count: int = 0
    upstream_start: int = 0
    upstream_count: int = 0
    upstream_commits: tuple[HunkCommit, ...] = ()
    fork_commits: tuple[HunkCommit, ...] = ()
    owners: tuple[HunkOwner, ...] = ()
    source: HunkSource | None = None
    proposals: tuple[HunkProposal, ...] = ()

    @property
    def upstream_prs(self) -> tuple[int, ...]:
        """PR numbers of the upstream commits, newest first, each once."""
        return tuple(dict.fromkeys(c.pr for c in self.upstream_commits if c.pr is not None))

    def brief(self) -> dict[str, object]:
        """The provenance as ``plan --json`` carries it (texts left out: ``ds4sync conflicts`` shows them)."""
        return {
            "index": self.index,
            "lines": {
                "base": [self.base_start, self.base_count],
                "fork": [self.fork_start, self.fork_count],
                "upstream": [self.upstream_start, self.upstream_count],
            },
            "upstream_prs": list(self.upstream_prs),
            "upstream_commits": [c.model_dump(exclude_none=True) for c in self.upstream_commits],
            "fork_commits": [c.model_dump(exclude_none=True) for c in self.fork_commits],
            "patchsets": [o.patchset for o in self.owners],
            **({"source": self.source} if self.source else {}),
            **({"proposals": [p.model_dump(exclude={"text"}) for p in self.proposals]} if self.proposals else {}),
        }


@dataclass(frozen=True)
class Diff3:
    """A file merged by git in diff3 style, split at its conflict hunks.

    ``common[i]`` is the merged text before hunk ``i`` (``common[-1]`` after the last), so
    ``len(common) == len(hunks) + 1``; each hunk is (fork, base, upstream) text.
    """

    common: tuple[str, ...]
    hunks: tuple[tuple[str, str, str], ...]

    def assemble(self, texts: list[str | None]) -> str | None:
        """The file with hunk ``i`` replaced by ``texts[i]``; None when any is None."""
        if any(t is None for t in texts):
            return None
        parts = [self.common[0]]
        for text, common in zip(texts, self.common[1:], strict=True):
            parts += [text or "", common]
        return "".join(parts)


def split_diff3(text: str, *, marker_size: int = 7) -> Diff3:
    """Split ``git merge-file --diff3`` output at its markers (``<``, ``|``, ``=``, ``>`` of ``marker_size``).

    Raises:
        ValueError: a hunk is not closed (the text is not diff3 output).
    """
    common: list[str] = []
    hunks: list[tuple[str, str, str]] = []
    current: list[str] = []
    sides: dict[str, list[str]] = {}
    state = "common"
    for line in text.splitlines(keepends=True):
        mark = _mark(line, marker_size)
        if state == "common" and mark == "<":
            common.append("".join(current))
            sides, state = {"fork": [], "base": [], "upstream": []}, "fork"
        elif state == "fork" and mark == "|":
            state = "base"
        elif state in ("fork", "base") and mark == "=":
            state = "upstream"
        elif state == "upstream" and mark == ">":
            hunks.append(("".join(sides["fork"]), "".join(sides["base"]), "".join(sides["upstream"])))
            current, state = [], "common"
        elif state == "common":
            current.append(line)
        else:
            sides[state].append(line)
    if state != "common":
        raise ValueError("a conflict hunk is not closed")
    common.append("".join(current))
    return Diff3(tuple(common), tuple(hunks))


def _mark(line: str, size: int) -> str | None:
    body = line.rstrip("\r\n")
    head = body[:1]
    if head not in ("<", "|", "=", ">") or body[:size] != head * size:
        return None
    rest = body[size:]
    return head if rest == "" or rest[:1] == " " else None


def has_markers(text: str, *, marker_size: int = 7) -> bool:
    """Whether ``text`` holds any conflict-marker line (``<``, ``|``, ``=``, ``>`` of ``marker_size``)."""
    return any(_mark(line, marker_size) for line in text.splitlines())


def locate(side: list[str], section: list[str], cursor: int, anchor: str | None) -> tuple[int, int]:
    """Where ``section`` (lines) sits in ``side`` (lines) at or after index ``cursor``: (1-based start, count).

    A section is a contiguous slice of its side's file, found by its text (the first match at or
    after the previous hunk's end). An empty section (the side deleted the lines) sits after
    ``anchor``, the last common line before the hunk, when that is found; else at ``cursor``.
    """
    k = len(section)
    if k:
        for i in range(cursor, len(side) - k + 1):
            if side[i : i + k] == section:
                return i + 1, k
        return 0, k
    if anchor is not None:
        for i in range(cursor, len(side)):
            if side[i] == anchor:
                return i + 2, 0
    return cursor + 1, 0


def hunk_resolutions(split: Diff3, resolved: str) -> list[str | None]:
    """Each hunk's text in ``resolved``, a resolution of the file ``split`` came from (None where unknown).

    The merged lines nearest each hunk anchor it: what ``resolved`` holds between the lines just before
    the hunk and the lines just after it (found in order, each anchor grown until it holds at least
    :data:`ANCHOR_CHARS` non-blank characters) is that hunk's resolution. A hunk whose anchors are not
    found (the person changed the lines around it) or that touches another hunk is unknown.
    """
    found: list[str | None] = []
    pos = 0
    last = len(split.hunks) - 1
    for i in range(len(split.hunks)):
        before = _anchor(split.common[i], tail=True)
        after = _anchor(split.common[i + 1], tail=False)
        if before:
            at = resolved.find(before, pos)
            start = at + len(before) if at >= 0 else -1
        else:
            start = 0 if i == 0 else -1  # no line between two hunks: nothing tells them apart
        if start < 0:
            found.append(None)
            continue
        if after:
            end = resolved.find(after, start)
        elif i == last:
            end = len(resolved)
        else:
            end = -1
        if end < 0:
            found.append(None)
            continue
        found.append(resolved[start:end])
        pos = end
    return found


#: Non-blank characters an anchor needs before it is trusted (a lone blank line or ``)`` matches anywhere).
ANCHOR_CHARS = 24


def _anchor(common: str, *, tail: bool) -> str:
    """The lines of ``common`` nearest the hunk (its end when ``tail``), as few as hold ``ANCHOR_CHARS``."""
    lines = common.splitlines(keepends=True)
    taken: list[str] = []
    for line in reversed(lines) if tail else lines:
        taken.append(line)
        if sum(len(x.strip()) for x in taken) >= ANCHOR_CHARS:
            break
    return "".join(reversed(taken) if tail else taken)
