"""The duplicate-work check: which open pull requests of the fork already do (part of) this sync.

An open PR is this sync's own when its head is the sync's head branch. It is possible duplicate
work when it targets the same base with a sync-like title, or when it carries commits of this
sync's upstream range (the upstream commits the merge brings in). Everything else is listed as
unrelated, with the reason, the way a hand-written sync PR lists the open PRs it checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ds4sync.core.model import FrozenModel, updated
from ds4sync.core.words import many


class OpenPull(FrozenModel):
    """One open pull request as the check saw it, and how it relates to this sync.

    ``relation`` is ``own`` (this sync's PR), ``duplicate`` (possible duplicate work) or
    ``unrelated``; ``reason`` says why in words; ``shared_commits`` counts the upstream commits
    of this sync it carries (None when its commits were not read).
    """

    number: int
    title: str
    author: str = ""
    updated_at: str = ""
    url: str = ""
    head: str = ""
    base: str = ""
    draft: bool = False
    relation: str = "unrelated"
    reason: str = ""
    shared_commits: int | None = None


class DuplicateCheck(FrozenModel):
    """The open PRs of ``repo`` checked before publishing, and the conclusion."""

    repo: str
    checked_at: str
    head_branch: str
    base: str
    upstream_commits: int
    open_prs: tuple[OpenPull, ...] = ()
    conclusion: str = ""

    @property
    def own(self) -> OpenPull | None:
        """This sync's open PR, if one exists."""
        return next((p for p in self.open_prs if p.relation == "own"), None)

    @property
    def duplicates(self) -> tuple[OpenPull, ...]:
        """Open PRs that may do the same work."""
        return tuple(p for p in self.open_prs if p.relation == "duplicate")


def check_duplicates(
    pulls: Iterable[Mapping[str, Any]],
    *,
    repo: str,
    checked_at: str,
    head_branch: str,
    base: str,
    upstream_range: set[str],
    title_pattern: str,
    commits_of: Callable[[int], list[str]],
    max_inspected: int = 50,
) -> DuplicateCheck:
    """Classify the forge's open PRs (GitHub's pull-request JSON) against this sync.

    ``upstream_range`` holds the SHAs the merge brings in from upstream; ``commits_of(number)``
    returns a PR's commit SHAs and is called for at most ``max_inspected`` PRs (not our own).
    """
    sync_like = re.compile(title_pattern, re.IGNORECASE)
    seen: list[OpenPull] = []
    inspected = 0
    for data in pulls:
        pull = _pull(data)
        if pull.head == head_branch and _same_repo(data, repo):
            seen.append(updated(pull, relation="own", reason=f"this sync's PR (head {head_branch})"))
            continue
        shared = None
        if upstream_range and inspected < max_inspected:
            inspected += 1
            shared = len(upstream_range.intersection(commits_of(pull.number)))
        seen.append(_classify(pull, base=base, sync_like=sync_like, shared=shared, total=len(upstream_range)))
    check = DuplicateCheck(
        repo=repo,
        checked_at=checked_at,
        head_branch=head_branch,
        base=base,
        upstream_commits=len(upstream_range),
        open_prs=tuple(seen),
    )
    return updated(check, conclusion=conclusion(check))


def _classify(pull: OpenPull, *, base: str, sync_like: re.Pattern[str], shared: int | None, total: int) -> OpenPull:
    titled = bool(sync_like.search(pull.title))
    reasons = []
    if shared:
        reasons.append(f"carries {shared} of this sync's {many(total, 'upstream commit')}")
    if pull.base == base and titled:
        reasons.append(f"targets {base} with a sync-like title")
    if reasons:
        return updated(pull, relation="duplicate", reason="; ".join(reasons), shared_commits=shared)
    why = f"targets {pull.base}, not {base}" if pull.base != base else "not an upstream integration (title)"
    if shared == 0:
        why += f"; shares none of this sync's {many(total, 'upstream commit')}"
    return updated(pull, relation="unrelated", reason=why, shared_commits=shared)


def conclusion(check: DuplicateCheck) -> str:
    """One paragraph, like a hand-written sync PR's duplicate-work check."""
    own, dups = check.own, check.duplicates
    others = len(check.open_prs) - (1 if own else 0)
    parts = []
    if own is not None:
        parts.append(f"#{own.number} is this sync's own PR (head {check.head_branch}): it is updated, not duplicated.")
    if dups:
        listed = ", ".join(f"#{p.number} ({p.reason})" for p in dups)
        parts.append(f"Possible duplicate work: {listed}; a person should compare before this PR is merged.")
    elif others:
        parts.append(
            f"None of the {many(others, 'other open PR')} is an upstream integration into {check.base} "
            f"or carries this sync's upstream commits."
        )
    else:
        parts.append("No other open PR.")
    return " ".join(parts)


def _pull(data: Mapping[str, Any]) -> OpenPull:
    head, base, user = _mapping(data.get("head")), _mapping(data.get("base")), _mapping(data.get("user"))
    return OpenPull(
        number=int(data.get("number", 0)),
        title=str(data.get("title", "")),
        author=str(user.get("login", "")),
        updated_at=str(data.get("updated_at", "")),
        url=str(data.get("html_url", "")),
        head=str(head.get("ref", "")),
        base=str(base.get("ref", "")),
        draft=bool(data.get("draft", False)),
    )


def _same_repo(data: Mapping[str, Any], repo: str) -> bool:
    """Whether the PR's head branch lives in ``repo`` (a PR from another fork with the same branch name is not ours)."""
    head_repo = _mapping(data.get("head")).get("repo")
    if not isinstance(head_repo, Mapping):
        return True  # GitHub sends null for a deleted head repository; the branch name is all there is
    return str(head_repo.get("full_name", repo)).lower() == repo.lower()


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
