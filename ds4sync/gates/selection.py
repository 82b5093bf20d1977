"""Affected-gate selection from changed files, with vLLM CI's semantics.

Source: vllm-project/ci-infra ``buildkite/pipeline_generator`` (``_matches_source_dependency``,
``should_run_all``) and ``change_detection.py``:

- a changed path matches an entry when it equals ``entry.rstrip('/')`` or starts with
  ``entry.rstrip('/') + '/'`` (no globs, no substring test);
- an entry starting with ``!`` excludes the paths it matches from that gate's test;
- a changed file that ``re.match``-es a run-all pattern and no run-all exclude pattern
  selects every gate;
- a gate without ``source_file_dependencies`` always runs; an unknown diff runs everything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ds4sync.core.git import GitRepo
from ds4sync.gates.definition import Gate


def matches_entry(entry: str, path: str) -> bool:
    """Whether ``path`` equals ``entry`` or lies under it (vLLM's rule; the empty entry matches nothing)."""
    normalized = entry.rstrip("/")
    if not normalized:
        return False
    return path == normalized or path.startswith(normalized + "/")


def depends_on(entries: Sequence[str], changed: Iterable[str]) -> str | None:
    """The first changed path that a gate with these dependency entries is affected by, else None."""
    includes = [e for e in entries if not e.startswith("!")]
    excludes = [e[1:] for e in entries if e.startswith("!")]
    for path in changed:
        if any(matches_entry(e, path) for e in excludes):
            continue
        if any(matches_entry(e, path) for e in includes):
            return path
    return None


def run_all_trigger(changed: Iterable[str], patterns: Sequence[str], excludes: Sequence[str]) -> str | None:
    """The first changed file that triggers run-all (``re.match`` a pattern, no exclude), else None."""
    for path in changed:
        if any(re.match(p, path) for p in patterns) and not any(re.match(x, path) for x in excludes):
            return path
    return None


def changed_files(repo: GitRepo, since: str) -> list[str]:
    """Paths changed from the merge-base of ``since`` and HEAD to the work tree (committed, staged or not).

    Like vLLM's ``git diff --name-only --diff-filter=ACMDR <base> <commit>`` for a PR, plus
    uncommitted edits so that a local run sees them.
    """
    head = repo.head()
    base = repo.merge_base(since, head) or since
    committed = repo.changed_paths(base, head)
    uncommitted = repo.worktree_changed_names("HEAD", diff_filter="ACMDR")
    return list(dict.fromkeys(committed + uncommitted))


@dataclass(frozen=True)
class Selected:
    """One gate and why it runs (``reason``) or is skipped (``skip_reason``)."""

    gate: Gate
    reason: str
    skip_reason: str | None = None

    @property
    def runs(self) -> bool:
        """Whether the gate is selected."""
        return self.skip_reason is None


def select(
    gates: Sequence[Gate],
    changed: Sequence[str] | None,
    *,
    run_all: bool = False,
    patterns: Sequence[str] = (),
    excludes: Sequence[str] = (),
) -> tuple[list[Selected], str | None]:
    """Decide per gate whether it runs; returns the decisions and the run-all reason (if any).

    ``changed`` None means the diff is unknown (no ``--changed-since``): everything runs.
    """
    if run_all:
        return [Selected(g, "--all") for g in gates], "--all"
    if changed is None:
        return [Selected(g, "no change list: every gate runs") for g in gates], None
    trigger = run_all_trigger(changed, patterns, excludes)
    if trigger:
        return [Selected(g, f"run-all: {trigger} changed") for g in gates], f"{trigger} matches a run-all pattern"
    decisions = []
    for gate in gates:
        deps = gate.definition.source_file_dependencies
        if not deps:
            decisions.append(Selected(gate, "no source_file_dependencies: always runs"))
            continue
        hit = depends_on(deps, changed)
        decisions.append(
            Selected(gate, f"{hit} changed")
            if hit
            else Selected(gate, "", skip_reason=f"none of {len(changed)} changed files is in its dependencies")
        )
    return decisions, None
