"""Upstream/fork pairs that read like prose, for the merge tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import git

from ds4sync.demo.repobuild import RepoBuilder

BRANCH = "fork"


@dataclass
class Pair:
    """An upstream repository and a clone of it with a fork branch."""

    upstream: RepoBuilder
    fork: RepoBuilder
    base: str

    @property
    def repo(self) -> Path:
        return self.fork.path


def make_pair(
    tmp_path: Path,
    base: dict,
    upstream_changes: list[dict],
    fork_changes: list[dict],
    *,
    upstream_renames: tuple = (),
    fork_renames: tuple = (),
) -> Pair:
    """Upstream gets ``base`` then ``upstream_changes``; the fork branch starts at base with ``fork_changes``.

    The fork is a clone with upstream as remote ``upstream``; its checkout stays on ``main``.
    """
    up = RepoBuilder(tmp_path / "upstream")
    base_sha = up.commit(base, "base")
    clone = git.Repo.clone_from(str(up.path), str(tmp_path / "fork"), origin="upstream")
    clone.close()
    fork = RepoBuilder(tmp_path / "fork")
    for i, change in enumerate(upstream_changes):
        up.commit(change, f"upstream change {i}")
    for old, new in upstream_renames:
        up.rename(old, new, f"upstream renames {old}")
    fork.branch(BRANCH, base_sha)
    for i, change in enumerate(fork_changes):
        fork.commit(change, f"fork change {i}")
    for old, new in fork_renames:
        fork.rename(old, new, f"fork renames {old}")
    fork.checkout("main")
    git.Repo(fork.path).git.fetch("-q", "upstream")
    return Pair(up, fork, base_sha)


def lines(*items: str) -> str:
    return "".join(f"{item}\n" for item in items)
