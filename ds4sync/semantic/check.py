"""The semantic check of one merge: what merged cleanly and is broken, each break with its upstream culprit.

Every rule is a differential: a finding counts only when the merged tree has it and neither the fork
head nor upstream has the same finding (same file, same kind, same symbol; lines may move). Only what
changed is read: fork-touched Python files of the merged tree, and the modules they use that differ
between the three trees; the upstream range is walked only to attribute a finding (pickaxe).
"""

from __future__ import annotations

import contextlib
import gc
import re
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple

from ds4sync.core.git import GitRepo
from ds4sync.models.semantic_results import SemanticFinding, SemanticResult
from ds4sync.semantic.attribution import Attributor
from ds4sync.semantic.lint import BLOCKING_CODES, LintHit, lint_blobs
from ds4sync.semantic.resolve import FactsCache, TreeView
from ds4sync.semantic.rules import Raw, check_file
from ds4sync.semantic.wiring import lost_wiring

#: Patch-set coverage: (patch-set id, the paths and globs its patches and invariants name).
Coverage = Sequence[tuple[str, tuple[str, ...]]]

_BLOCKING_KINDS = frozenset({"unresolved-import", "removed-definition", "call-contract", "return-arity"})


def check_merge(
    repo: GitRepo,
    *,
    fork: str,
    upstream: str,
    merged: str,
    unknown: Collection[str] = (),
    coverage: Coverage = (),
    facts: FactsCache | None = None,
) -> SemanticResult:
    """Find what merging ``upstream`` into ``fork`` broke without a textual conflict.

    Args:
        repo: the repository holding all three objects.
        fork: the fork head commit (SHA or ref).
        upstream: the upstream commit merged in.
        merged: the merged tree or commit: in ``plan`` the tree ``git merge-tree --write-tree`` wrote
            (pass its conflicted paths as ``unknown``), in ``verify`` the resolved worktree's commit.
        unknown: paths not to read (conflicted: what they will hold is a person's to decide); names
            defined in them resolve as unknown, never as missing.
        coverage: patch-sets and the paths/globs they cover (:func:`ds4sync.semantic.coverage.patchset_coverage`).
        facts: parsed files to share with other checks of the same repository (the checks of a loop that
            changes one file at a time: each then parses only the blobs it has not seen). Keyed by blob id
            and path, so a shared cache never answers for other content; it keeps every file it parsed
            (syntax trees included) for as long as the caller keeps it. None: one of its own, dropped after.

    Returns:
        A :class:`SemanticResult`; its ``findings`` sorted by path and line. Blockers are imports
        that no longer resolve, references to removed definitions, calls that no longer bind,
        changed returned-tuple arity, and ruff's undefined-name codes; other lint codes and lost fork
        wiring are warnings.

    Raises:
        GitError: an object is not in the repository, or the histories are unrelated.
        ToolMissingError: ruff is not installed.
    """
    start = time.perf_counter()
    base = _merge_base(repo, fork, upstream)
    scan = _scan(repo, base, fork=fork, upstream=upstream, merged=merged, unknown=unknown, cache=facts)
    findings = _attributed(repo, scan, base=base, upstream=upstream, coverage=coverage)
    upstream_py = [p for p in scan.upstream_status.result() if p.endswith(".py")]
    return SemanticResult(
        fork_sha=repo.resolve_commit(fork) or fork,
        upstream_sha=repo.resolve_commit(upstream) or upstream,
        merged=merged,
        merge_base=base,
        files_checked=len(scan.files),
        upstream_files=len(upstream_py),
        unknown=tuple(sorted(scan.mv.unknown)),
        findings=findings,
        seconds=round(time.perf_counter() - start, 3),
    )


def _attributed(repo: GitRepo, scan: _Scan, *, base: str, upstream: str, coverage: Coverage) -> list[SemanticFinding]:
    """Each finding of ``scan`` with its severity and upstream culprit, sorted by path and line."""
    attributor = Attributor(repo, base=base, upstream=upstream, views=(scan.fv, scan.uv, scan.mv), coverage=coverage)
    findings = [attributor.finding(path, raw, _severity(raw)) for path, raw in scan.raws]
    findings += [attributor.lint_finding(hit) for hit in scan.hits]
    findings += [attributor.finding(path, raw, "warning") for path, raw in scan.lost]
    findings.sort(key=lambda f: (f.path, f.line, f.kind, f.symbol))
    return findings


def _merge_base(repo: GitRepo, fork: str, upstream: str) -> str:
    """The merge-base of ``fork`` and ``upstream``.

    Raises:
        GitError: the histories are unrelated.
    """
    base = repo.merge_base(fork, upstream)
    if base is None:
        from ds4sync.core.errors import GitError

        raise GitError(f"{fork[:12]} and {upstream[:12]} share no history", where=str(repo.path))
    return base


class _Scan(NamedTuple):
    """What the rules, ruff and the wiring check found in the four trees, before attribution."""

    mv: TreeView  # merged
    fv: TreeView  # fork
    uv: TreeView  # upstream
    files: list[str]  # fork-touched Python files of the merged tree that were read
    raws: list[tuple[str, Raw]]
    hits: list[LintHit]
    lost: list[tuple[str, Raw]]  # lost fork wiring
    upstream_status: Future[dict[str, str]]  # upstream's changes since the merge-base


def _scan(
    repo: GitRepo,
    base: str,
    *,
    fork: str,
    upstream: str,
    merged: str,
    unknown: Collection[str],
    cache: FactsCache | None = None,
) -> _Scan:
    """Read the merged, fork, upstream and merge-base trees side by side and run every rule on the fork-touched
    files (the cycle collector paused)."""
    cache = cache if cache is not None else FactsCache(repo)
    with _no_cycle_collection(), ThreadPoolExecutor(max_workers=4) as pool:
        fork_status = pool.submit(repo.name_status, base, fork)
        up_status = pool.submit(repo.name_status, base, upstream)
        views = {
            name: pool.submit(TreeView, repo, rev, cache, unknown=unknown if name == "merged" else ())
            for name, rev in (("merged", merged), ("fork", fork), ("upstream", upstream), ("base", base))
        }
        mv, fv, uv, bv = (views[n].result() for n in ("merged", "fork", "upstream", "base"))
        mv.stand_in, mv.keeps = uv, _fork_kept(fv, bv)
        fork_paths = sorted(p for p, s in fork_status.result().items() if s != "D" and p.endswith(".py"))
        touched = [p for p in fork_paths if p in mv.oids]
        files = [p for p in touched if p not in mv.unknown]
        cache.prefetch(
            o for p in fork_paths for o in (mv.oids.get(p), fv.oids.get(p), bv.oids.get(p), uv.oids.get(p)) if o
        )
        lint = pool.submit(_lint, cache, files, mv, fv, uv)
        wiring = pool.submit(lost_wiring, repo, cache, views=(bv, fv, mv), touched=files, fork_paths=fork_paths)
        raws = _rules(files, mv, fv, uv, bv)
        hits = lint.result()
        lost = wiring.result()
    return _Scan(mv, fv, uv, files, raws, hits, lost, up_status)


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused while the check parses: a syntax tree is millions of objects and
    holds no cycle, yet every full collection walks all the trees kept so far (about 40% of the check's
    CPU on the vLLM fork). Reference counting still frees them; collection resumes after, as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _fork_kept(fv: TreeView, bv: TreeView) -> Callable[[str, str], bool]:
    """Whether the fork left a definition's signature as at the merge-base (then upstream's wins any resolution)."""

    def keeps(path: str, qualname: str) -> bool:
        fork, base = fv.facts(path), bv.facts(path)
        if fork is None or base is None or fork.broken or base.broken:
            return False
        mine, theirs = fork.defs.get(qualname), base.defs.get(qualname)
        return mine is not None and theirs is not None and mine.signature == theirs.signature

    return keeps


def _severity(raw: Raw) -> str:
    return "blocker" if raw.kind in _BLOCKING_KINDS else "warning"


def _rules(files: list[str], mv: TreeView, fv: TreeView, uv: TreeView, bv: TreeView) -> list[tuple[str, Raw]]:
    """The per-file rules on the merged tree, minus the same keys on the fork head and those upstream had all along.

    A file the merge left as the fork had it can only break through a module that differs from the
    fork's; a file that changed can also break through a module the fork changed (an upstream line
    using a name the fork removed). Modules that cannot make a difference are not read.
    """

    def changed_for(path: str) -> Callable[[str | None], bool]:
        as_fork = mv.oids.get(path) == fv.oids.get(path)

        def changed(target: str | None) -> bool:
            if target is None or target in mv.unknown:
                return True
            oid = mv.oids.get(target)
            return oid != fv.oids.get(target) or (not as_fork and oid != uv.oids.get(target))

        return changed

    mention = _mentions_changed(mv, fv)
    files = [p for p in files if mv.oids.get(p) != fv.oids.get(p) or mention(mv.cache.text(mv.oids[p]))]
    predicates = {path: changed_for(path) for path in files}
    _prefetch_targets(files, mv, predicates)
    merged: dict[str, list[Raw]] = {}
    for path in files:
        facts = mv.facts(path)
        if facts is not None and not facts.broken:
            raws = check_file(mv, path, facts.uses(), predicates[path])
            if raws:
                merged[path] = raws
    for view in (fv, uv, bv):
        _prefetch_targets(sorted(merged), view, dict.fromkeys(merged, _always))
    found: list[tuple[str, Raw]] = []
    for path, raws in merged.items():
        on_fork, on_upstream, on_base = (_keys(view, path) for view in (fv, uv, bv))
        # Upstream's own tree having the break excuses it only when upstream had it before the range
        # too: a break upstream brought in itself (a changed forward its own caller was not updated
        # for) still breaks the fork's file, which the fork must fix before it boots.
        before = on_fork | (on_upstream & on_base)
        found += [(path, r) for r in raws if r.key not in before]
    return found


def _keys(view: TreeView, path: str) -> set[tuple[str, ...]]:
    facts = view.facts(path)
    if facts is None or facts.broken:
        return set()
    return {r.key for r in check_file(view, path, facts.uses(), _always)}


def _mentions_changed(mv: TreeView, fv: TreeView) -> Callable[[bytes], bool]:
    """Whether a text names a module (or its package) that differs between the merged tree and the fork head.

    A file the merge left as the fork had it can only break through such a module, and every import
    of one names it or its package as a word (``from .mod import x``, ``from pkg import mod``), so a
    file naming none is skipped without being parsed.
    """
    words: set[bytes] = set()
    for path in {*mv.oids, *fv.oids}:
        if mv.oids.get(path) != fv.oids.get(path) or path in mv.unknown:
            parts = path.removesuffix(".py").split("/")
            if parts[-1] == "__init__":
                parts = parts[:-1]
            words.update(part.encode() for part in parts[-2:])
    if not words:
        return lambda _text: False
    # A word of letters, digits and underscores is one token of the text: a set lookup per token, not one
    # alternation of thousands of words tried at every position. Any other word is searched as before.
    plain = {w for w in words if _TOKEN.fullmatch(w)}
    rest = sorted(words - plain)
    pattern = re.compile(rb"\b(?:" + b"|".join(re.escape(w) for w in rest) + rb")\b") if rest else None

    def mentions(text: bytes) -> bool:
        if not plain.isdisjoint(_TOKEN.findall(text)):
            return True
        return pattern is not None and pattern.search(text) is not None

    return mentions


_TOKEN = re.compile(rb"\w+")


def _always(_path: str | None) -> bool:
    return True


def _prefetch_targets(files: list[str], view: TreeView, changed: dict[str, Callable[[str | None], bool]]) -> None:
    """Read, in one batch, every module the files import in ``view`` that their rule would read."""
    wanted = set()
    for path in files:
        facts = view.facts(path)
        if facts is None or facts.broken:
            continue
        for imp in facts.uses().imports:
            for name in (imp.module, f"{imp.module}.{imp.name}" if imp.name else imp.module):
                target = view.module_path(name)
                if target is not None and changed[path](target):
                    wanted.add(view.oids[target])
    view.cache.prefetch(wanted)


def _lint(cache: FactsCache, files: list[str], mv: TreeView, fv: TreeView, uv: TreeView) -> list[LintHit]:
    """ruff's F rules on the merged files that differ from the fork's, minus the same hits on either side."""
    candidates = [p for p in files if mv.oids[p] != fv.oids.get(p)]
    if not candidates:
        return []
    merged = lint_blobs({p: cache.text(mv.oids[p]) for p in candidates})
    hit_paths = sorted({h.path for h in merged})
    if not hit_paths:
        return []
    with ThreadPoolExecutor(max_workers=2) as pool:
        sides: list[Future[list[LintHit]]] = [
            pool.submit(lint_blobs, {p: cache.text(v.oids[p]) for p in hit_paths if p in v.oids}) for v in (fv, uv)
        ]
        before = {(h.path, h.code, h.message) for side in sides for h in side.result()}
    return [h for h in merged if (h.path, h.code, h.message) not in before]


__all__ = ["BLOCKING_CODES", "Coverage", "check_merge"]
