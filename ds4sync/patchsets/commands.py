"""Core functions behind ``ds4sync patches list`` and ``patches check``."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ds4sync.core.errors import GitError
from ds4sync.core.git import GitRepo
from ds4sync.models.config import shipped_profile
from ds4sync.models.patchsets_results import CheckReport
from ds4sync.patchsets.check import check_checkout
from ds4sync.patchsets.model import Catalogue, PatchSet, load_catalogue
from ds4sync.patchsets.tree import CommitTree, Tree
from ds4sync.runner import Workspace, open_workspace, resolve_upstream


def catalogue_dir(ws: Workspace) -> Path:
    """``<profile>/patches`` of a workspace."""
    return ws.profile / "patches"


def list_patchsets(ws: Workspace) -> tuple[Catalogue, list[PatchSet]]:
    """The workspace's patch-sets in dependency order.

    Raises:
        ConfigError: a malformed patch-set file, an unknown dependency, a cycle.
    """
    return load_catalogue(catalogue_dir(ws))


def history_lookup(repo: GitRepo, head: str) -> Callable[[str], bool | None]:
    """``has(commit)``: whether ``commit`` is in ``head``'s history (None: this repository does not know it).

    An abbreviated SHA that names several commits here counts when any of them is in the history.
    """

    def has(commit: str) -> bool | None:
        found = repo.resolve_commit(commit)
        if found is not None:
            return repo.is_ancestor(found, head)
        # An abbreviated SHA that is ambiguous here resolves to nothing: any candidate in the history
        # counts (never let an ambiguous prefix turn a carried feature into not-carried).
        candidates = repo.commits_with_prefix(commit) if re.fullmatch(r"[0-9a-fA-F]{4,39}", commit) else []
        if not candidates:
            return None
        return any(repo.is_ancestor(sha, head) for sha in candidates)

    return has


def fork_branch_name(repo: GitRepo, rev: str | None) -> str | None:
    """The fork branch a checked tree stands for: ``rev`` as a local or remote-tracking branch
    (``origin/x`` -> ``x``), else the checkout's current branch (None when detached)."""
    if rev is None:
        return repo.current_branch()
    if repo.ref_exists(f"refs/heads/{rev}"):
        return rev
    for ref in repo.refs_under("refs/remotes/"):
        name = ref.removeprefix("refs/remotes/")
        if name == rev and "/" in name:
            return name.split("/", 1)[1]
    return None


def check_workspace(
    ws: Workspace, *, upstream: str | None = None, rev: str | None = None, branch: str | None = None
) -> CheckReport:
    """Every patch-set's invariants on the checkout at ``ws.repo.path`` (no merge, nothing written).

    ``upstream``: a ref whose tree (and history) decides ``drop_when`` (landed-upstream).
    ``rev``: check that commit's tree (read from git, no checkout) instead of the work tree.
    ``branch``: the fork branch the tree is of, for ``catalogue.branches`` (default: ``rev``
    as a branch name, else the checked-out branch).

    Raises:
        ConfigError: malformed patch-set files.
        GitError: the upstream ref or ``rev`` cannot be resolved.
    """
    tree = None
    has = None
    if upstream:
        sha = resolve_upstream(ws, upstream)
        tree = CommitTree(ws.repo, sha)

        def has(commit: str) -> bool:
            found = ws.repo.resolve_commit(commit)
            return found is not None and ws.repo.is_ancestor(found, sha)

    head = ws.repo.resolve_commit(rev) if rev else ws.repo.head()
    if head is None:
        raise GitError(f"'{rev}' names no commit", where=str(ws.repo.path), fix="give a branch, tag or SHA")
    checked: Path | Tree = CommitTree(ws.repo, head) if rev else ws.repo.path
    return check_checkout(
        checked,
        catalogue_dir(ws),
        upstream=tree,
        upstream_has=has,
        branch=branch or fork_branch_name(ws.repo, rev),
        head=head,
        history_has=history_lookup(ws.repo, head),
    )


def check_path(
    repo: Path,
    *,
    config: Path | None = None,
    profile: Path | None = None,
    upstream: str | None = None,
    rev: str | None = None,
    branch: str | None = None,
) -> CheckReport:
    """``patches check --repo``: a git checkout through its workspace, or any plain folder (an
    unpacked source tarball) with ``profile`` or the shipped profile.

    Raises:
        GitError: ``upstream`` or ``rev`` was given for a folder that is not a git checkout.
        ConfigError: malformed patch-set files.
    """
    try:
        ws = open_workspace(repo, config_path=config, profile=profile)
    except GitError:
        if upstream or rev or not Path(repo).is_dir():
            raise
        return check_checkout(Path(repo), Path(profile or shipped_profile()) / "patches", branch=branch)
    return check_workspace(ws, upstream=upstream, rev=rev, branch=branch)
