"""The semantic check of a planned merge: on ``git merge-tree``'s tree, conflicted paths counted as unknown."""

from __future__ import annotations

from pathlib import Path

from ds4sync.core.errors import ConfigError
from ds4sync.core.git import GitRepo
from ds4sync.models.semantic_results import SemanticResult
from ds4sync.semantic.check import check_merge
from ds4sync.semantic.coverage import patchset_coverage
from ds4sync.semantic.phase import acknowledge, load_settings


def plan_semantic(repo: GitRepo, *, fork_sha: str, upstream_sha: str, patches: Path | None = None) -> SemanticResult:
    """Check the merge of ``upstream_sha`` into ``fork_sha``: merge-tree's tree (no work tree), its conflicts unknown.

    ``patches``: the profile's patch-set folder, for coverage and acknowledgements (a malformed file
    there is ignored here: ``verify`` stops on it with the file's name).
    """
    merged = repo.merge_tree(fork_sha, upstream_sha)
    unknown = {c.path for c in merged.conflicts} | {p for c in merged.conflicts for p in c.related}
    coverage: list[tuple[str, tuple[str, ...]]] = []
    settings = None
    if patches is not None and patches.is_dir():
        from ds4sync.patchsets.model import load_catalogue

        try:
            coverage = patchset_coverage(repo, load_catalogue(patches)[1])
            settings = load_settings(patches)
        except ConfigError:
            pass
    result = check_merge(
        repo,
        fork=fork_sha,
        upstream=upstream_sha,
        merged=merged.tree,
        unknown=unknown,
        coverage=coverage,
    )
    return acknowledge(result, settings) if settings is not None else result
