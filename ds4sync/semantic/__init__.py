"""The semantic check: what a merge broke without a textual conflict, found from git objects before any build.

Entry point: :func:`check_merge` (``plan`` runs it on merge-tree's tree, ``verify`` on the resolved
commit); results: :class:`SemanticResult` of :class:`SemanticFinding`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ds4sync.models.semantic_results import Culprit, SemanticFinding, SemanticResult

if TYPE_CHECKING:
    from ds4sync.semantic.check import check_merge

__all__ = ["Culprit", "SemanticFinding", "SemanticResult", "check_merge"]


def __getattr__(name: str) -> Any:
    # The run record names the models; only the check itself needs git and ast.
    if name == "check_merge":
        from ds4sync.semantic.check import check_merge

        return check_merge
    raise AttributeError(name)
