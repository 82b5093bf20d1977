"""Core functions behind ``ds4sync patches list`` and ``patches check``."""

from __future__ import annotations

from pathlib import Path

from ds4sync.config import shipped_profile
from ds4sync.core.errors import GitError
from ds4sync.patchsets.check import CheckReport, check_checkout
from ds4sync.patchsets.model import Catalogue, PatchSet, load_catalogue
from ds4sync.patchsets.tree import CommitTree
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


def check_workspace(ws: Workspace, *, upstream: str | None = None) -> CheckReport:
    """Every patch-set's invariants on the checkout at ``ws.repo.path`` (no merge, nothing written).

    ``upstream``: a ref whose tree (and history) decides ``drop_when`` (landed-upstream).

    Raises:
        ConfigError: malformed patch-set files.
        GitError: the upstream ref cannot be resolved.
    """
    tree = None
    has = None
    if upstream:
        sha = resolve_upstream(ws, upstream)
        tree = CommitTree(ws.repo, sha)

        def has(commit: str) -> bool:
            found = ws.repo.resolve_commit(commit)
            return found is not None and ws.repo.is_ancestor(found, sha)

    return check_checkout(ws.repo.path, catalogue_dir(ws), upstream=tree, upstream_has=has)


def check_path(
    repo: Path, *, config: Path | None = None, profile: Path | None = None, upstream: str | None = None
) -> CheckReport:
    """``patches check --repo``: a git checkout through its workspace, or any plain folder (an
    unpacked source tarball) with ``profile`` or the shipped profile.

    Raises:
        GitError: ``upstream`` was given for a folder that is not a git checkout.
        ConfigError: malformed patch-set files.
    """
    try:
        ws = open_workspace(repo, config_path=config, profile=profile)
    except GitError:
        if upstream or not Path(repo).is_dir():
            raise
        return check_checkout(Path(repo), Path(profile or shipped_profile()) / "patches")
    return check_workspace(ws, upstream=upstream)
