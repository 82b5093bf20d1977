"""Validation of proposed conflict-hunk resolutions: a proposal is only a proposal until every check passes.

Per hunk: no conflict marker left; the context lines around the hunk come back unchanged (nothing
outside the hunk edited). Per file, with every hunk answered: the file parses (Python by ``ast``,
YAML, JSON and TOML by their parsers); every invariant of the owning patch-sets that holds on the fork
still holds; the semantic check (when installed) finds nothing new. Each check returns the reason it
failed, or None.
"""

from __future__ import annotations

import ast
import json
import tomllib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ds4sync.core.git import GitRepo
from ds4sync.models.merge_hunks import has_markers
from ds4sync.patchsets.invariants import evaluate
from ds4sync.patchsets.model import PatchSet
from ds4sync.patchsets.tree import Tree


@dataclass(frozen=True)
class Region:
    """What a resolver is asked to replace: ``before`` + the hunk + ``after`` (merged text around it)."""

    before: str
    after: str


def check_hunk(text: str, region: Region, *, marker_size: int = 7) -> tuple[str | None, str | None]:
    """(the hunk's replacement, None) when ``text`` passes, else (None, why).

    ``text`` is a resolver's reply for ``region``: the context lines before, the resolution, the
    context lines after, the context exactly as given.
    """
    if has_markers(text, marker_size=marker_size):
        return None, "conflict markers left in the proposal"
    if not text.endswith("\n") and text:
        text += "\n"
    if not text.startswith(region.before):
        return None, "lines outside the hunk changed (the context before the hunk did not come back unchanged)"
    rest = text[len(region.before) :]
    if not rest.endswith(region.after):
        return None, "lines outside the hunk changed (the context after the hunk did not come back unchanged)"
    return rest[: len(rest) - len(region.after)], None


def check_parses(path: str, text: str) -> str | None:
    """Why ``text`` does not parse as the type ``path`` names (``.py``, ``.yaml``/``.yml``, ``.json``,
    ``.toml``), or None (other types are not parsed)."""
    parsers: dict[str, Callable[[str], Any]] = {
        ".py": lambda t: ast.parse(t, filename=path),
        ".json": json.loads,
        ".toml": tomllib.loads,
        ".yaml": _yaml,
        ".yml": _yaml,
    }
    suffix = "." + path.rsplit(".", 1)[-1] if "." in path.rsplit("/", 1)[-1] else ""
    parse = parsers.get(suffix)
    if parse is None:
        return None
    try:
        parse(text)
    except (SyntaxError, ValueError) as exc:
        return f"{path} does not parse: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    except Exception as exc:
        return f"{path} does not parse: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def _yaml(text: str) -> Any:
    import yaml

    return list(yaml.safe_load_all(text))


class OverlayTree:
    """``tree`` with some files' text replaced (the proposed file in place of the conflicted one)."""

    def __init__(self, tree: Tree, files: dict[str, str]) -> None:
        self.tree = tree
        self.files = files
        self.label = f"{tree.label} + proposals"

    def paths(self) -> list[str]:
        """The tree's paths plus the overlaid ones, sorted."""
        return sorted({*self.tree.paths(), *self.files})

    def read(self, path: str) -> str | None:
        """The overlaid text, else the tree's."""
        return self.files[path] if path in self.files else self.tree.read(path)


def check_invariants(fork: Tree, merged: Tree, owners: Sequence[PatchSet]) -> str | None:
    """Why the proposal breaks an invariant of an owning patch-set: one that holds on the ``fork`` tree and
    not on ``merged`` (the merge with the proposal in place); None when all still hold."""
    for patchset in owners:
        before = {r.invariant: r.status for r in evaluate(fork, patchset)}
        for result in evaluate(merged, patchset):
            if before.get(result.invariant) == "holds" and result.status == "violated":
                return (
                    f"invariant {result.invariant} of patch-set {patchset.id} no longer holds"
                    f"{': ' + result.detail if result.detail else ''}"
                )
    return None


class SemanticGuard:
    """The semantic check of each proposal of one merge in turn (``fork`` head and ``upstream`` commit fixed).

    The checks share one cache of parsed files: a proposal changes one file, so every check after the first
    parses only what it has not seen (the merged blob of that file), not every fork-touched module again.
    The cache lives as long as the guard: one merge's proposals.
    """

    def __init__(self, repo: GitRepo, *, fork: str, upstream: str) -> None:
        from ds4sync.semantic.resolve import FactsCache  # the semantic package loads only where proposals are made

        self.repo, self.fork, self.upstream = repo, fork, upstream
        self._facts = FactsCache(repo)

    def findings(self, merged: Callable[[], str], *, unknown: Collection[str] = ()) -> str | None:
        """Why the proposal adds a semantic blocker (:func:`ds4sync.semantic.check_merge` on the tree with the
        proposals in place, ``merged``, built only then; ``unknown``: files still conflicted, not read), or None.
        Warnings (lint, lost wiring) do not reject a proposal; a blocker does: an import that no longer resolves,
        a removed definition still referenced, a call that no longer binds."""
        from ds4sync.semantic import check_merge

        result = check_merge(
            self.repo, fork=self.fork, upstream=self.upstream, merged=merged(), unknown=unknown, facts=self._facts
        )
        blockers = result.blockers()
        if not blockers:
            return None
        return f"the semantic check found {len(blockers)} blocker(s): {blockers[0].line_text()}"
