"""Who broke it: the upstream first-parent commit behind each finding, its PR, and the patch-set covering the file.

The culprit is found by pickaxe (``git log --first-parent -S<word>``) over the upstream range on the file
that defines the broken name, falling back to the nearest parent folder for a module that moved; a line
of the merged tree that neither side has came from the conflict resolution.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ds4sync.core.git import GitRepo
from ds4sync.core.paths import is_glob, path_matches
from ds4sync.models.semantic_results import Culprit, Origin, SemanticFinding, Severity
from ds4sync.semantic.lint import BLOCKING_CODES, LintHit
from ds4sync.semantic.resolve import TreeView
from ds4sync.semantic.rules import Raw

_PR = re.compile(r"\(#(\d+)\)")
_TICKED = re.compile(r"`([^`]+)`")


def pr_number(subject: str) -> int | None:
    """The pull request number a squash-merge subject ends with (``... (#41536)``), else None."""
    found = _PR.findall(subject)
    return int(found[-1]) if found else None


class Attributor:
    """Turns raw findings into :class:`SemanticFinding` with origin, culprit and patch-set (pickaxe cached)."""

    def __init__(
        self,
        repo: GitRepo,
        *,
        base: str,
        upstream: str,
        views: tuple[TreeView, TreeView, TreeView],
        coverage: Sequence[tuple[str, tuple[str, ...]]] = (),
    ) -> None:
        self.repo = repo
        self.range = f"{base}..{upstream}"
        self.fork_view, self.upstream_view, self.merged_view = views
        self.coverage = coverage
        self._pickaxe: dict[tuple[str, str], Culprit | None] = {}

    def finding(self, path: str, raw: Raw, severity: Severity | str) -> SemanticFinding:
        """A rule's finding in ``path``, attributed."""
        culprit = self.culprit(raw.defined_in or _guess_path(raw.symbol), raw.tokens)
        if culprit is None and path != raw.defined_in:
            culprit = self.culprit(path, raw.tokens)
        return SemanticFinding(
            kind=raw.kind,
            severity=severity,
            path=path,
            line=raw.line,
            symbol=raw.symbol,
            message=raw.message,
            defined_in=raw.defined_in,
            patchset=self.patchset(path),
            origin=self.origin(path, raw.line, culprit),
            culprit=culprit,
        )

    def lint_finding(self, hit: LintHit) -> SemanticFinding:
        """A ruff hit of the merged tree, attributed by pickaxe on the names its message quotes."""
        tokens = tuple(_TICKED.findall(hit.message))
        culprit = self.culprit(hit.path, tuple(t.split(".")[-1] for t in tokens))
        return SemanticFinding(
            kind="lint",
            severity="blocker" if hit.code in BLOCKING_CODES else "warning",
            path=hit.path,
            line=hit.line,
            symbol=f"{hit.code} {tokens[0] if tokens else ''}".strip(),
            message=f"{hit.code} {hit.message}",
            defined_in=hit.path,
            patchset=self.patchset(hit.path),
            origin=self.origin(hit.path, hit.line, culprit),
            culprit=culprit,
        )

    def culprit(self, path: str | None, tokens: Sequence[str]) -> Culprit | None:
        """The newest upstream first-parent commit whose diff of ``path`` changes how often a token occurs."""
        if not path:
            return None
        for candidate in _with_parents(path):
            for token in tokens:
                key = (candidate, token)
                if key not in self._pickaxe:
                    self._pickaxe[key] = self._log(token, candidate)
                if self._pickaxe[key] is not None:
                    return self._pickaxe[key]
            touched = self._touching(candidate)
            if touched is not None:
                # No token's count changed but the file has history in the range (a deleted module, a
                # reshaped return): its newest commit; a parent folder would only be less precise.
                return touched
        return None

    def _touching(self, path: str) -> Culprit | None:
        key = (path, "")
        if key not in self._pickaxe:
            self._pickaxe[key] = self._log(None, path)
        return self._pickaxe[key]

    def _log(self, pickaxe: str | None, path: str) -> Culprit | None:
        found = self.repo.newest_commit_touching(self.range, path, pickaxe=pickaxe)
        if found is None:
            return None
        sha, subject = found
        return Culprit(commit=sha, subject=subject, pr=pr_number(subject))

    def origin(self, path: str, line: int, culprit: Culprit | None) -> Origin:
        """``conflict resolution`` when the merged line is on neither side, else ``upstream`` with a culprit."""
        text = _line(self.merged_view, path, line)
        if text is not None and text.strip():
            sides = [_lines(v, path) for v in (self.fork_view, self.upstream_view)]
            if all(text.strip() not in side for side in sides):
                return "conflict resolution"
        return "upstream" if culprit is not None else "unknown"

    def patchset(self, path: str) -> str | None:
        """The first patch-set whose patches or invariants name ``path``."""
        for ident, patterns in self.coverage:
            for pattern in patterns:
                if (is_glob(pattern) and path_matches(pattern, path)) or path == pattern:
                    return ident
        return None


def _guess_path(symbol: str) -> str | None:
    """A module's file from its dotted name (``a.b.c`` -> ``a/b/c.py``) for a module that no longer exists."""
    parts = symbol.split(".")
    return "/".join(parts) + ".py" if len(parts) > 1 else None


def _with_parents(path: str) -> list[str]:
    """``a/b/c.py``, then ``a/b/c``, ``a/b`` (a moved module's history lives in its folder)."""
    parts = path.removesuffix(".py").split("/")
    return [path, *("/".join(parts[:i]) for i in range(len(parts), 1, -1))]


def _lines(view: TreeView, path: str) -> set[str]:
    oid = view.oids.get(path)
    if oid is None:
        return set()
    return {ln.strip() for ln in view.cache.text(oid).decode("utf-8", "replace").splitlines()}


def _line(view: TreeView, path: str, line: int) -> str | None:
    oid = view.oids.get(path)
    if oid is None:
        return None
    rows = view.cache.text(oid).decode("utf-8", "replace").splitlines()
    return rows[line - 1] if 0 < line <= len(rows) else None
