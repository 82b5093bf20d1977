"""Lost fork wiring: fork-added functions and classes referenced on the fork head and by nothing in the merged tree.

When upstream moves the code a fork hooked into, the fork's own kernels and dispatch stay defined but
nothing calls them any more. References are words on the lines of fork-touched files (a definition
line does not count).
"""

from __future__ import annotations

import re
from collections import Counter

from ds4sync.core.git import GitRepo
from ds4sync.semantic.pyast import module_name
from ds4sync.semantic.resolve import FactsCache, TreeView
from ds4sync.semantic.rules import Raw

#: Names shorter than this are too common for a word search to count references of.
MIN_NAME = 6
_WORD = re.compile(r"\w+")


def lost_wiring(
    repo: GitRepo,
    cache: FactsCache,
    *,
    views: tuple[TreeView, TreeView, TreeView],
    touched: list[str],
    fork_paths: list[str],
) -> list[tuple[str, Raw]]:
    """Fork-added module-level functions and classes still defined in the merged tree and no longer referenced.

    ``views``: (merge-base, fork head, merged); ``touched``: fork-touched Python paths of the merged tree;
    ``fork_paths``: every fork-touched Python path of the fork head (some may be gone from the merged tree).
    Returns (path, warning) pairs; the warning's ``defined_in`` is a file that referenced it on the fork head.
    """
    del repo, cache  # the views read their own trees, from the shared cache
    base, fork_view, merged_view = views
    if all(merged_view.oids.get(p) == fork_view.oids.get(p) for p in fork_paths):
        return []  # every file that could name a fork definition is as on the fork head: nothing was lost
    added: dict[str, tuple[str, int]] = {}
    for path in touched:
        if path in merged_view.unknown:
            continue
        before = set(_definitions(base, path))
        kept = _definitions(merged_view, path)
        for name in _definitions(fork_view, path):
            if name in before or name in added or len(name) < MIN_NAME or name.startswith("__"):
                continue
            if name in kept:
                added[name] = (path, kept[name])
    if not added:
        return []
    on_fork, where = _references(fork_view, fork_paths, set(added))
    # A conflicted file is the person's to decide: it counts as keeping the fork's references.
    in_merged, _ = _references(merged_view, touched, set(added), unknown_from=fork_view)
    lost = []
    for name, (path, line) in sorted(added.items()):
        if on_fork[name] and not in_merged[name]:
            symbol = f"{module_name(path) or path}.{name}"
            raw = Raw(
                "lost-wiring",
                line,
                symbol,
                f"`{name}` is referenced {on_fork[name]} time(s) on the fork head and nowhere in the merged tree",
                ("lost-wiring", symbol),
                where.get(name),
                (name,),
            )
            lost.append((path, raw))
    return lost


_TOP_DEF = re.compile(rb"^(?:async[ \t]+def|def|class)[ \t]+(\w+)", re.MULTILINE)


def _definitions(view: TreeView, path: str) -> dict[str, int]:
    """Module-level ``def``/``class`` names of ``path`` in ``view`` -> 1-based line (a column-0 scan, no parse)."""
    oid = view.oids.get(path)
    if oid is None:
        return {}
    data = view.cache.text(oid)
    return {m.group(1).decode("utf-8", "replace"): data.count(b"\n", 0, m.start()) + 1 for m in _TOP_DEF.finditer(data)}


def _references(
    view: TreeView, paths: list[str], names: set[str], *, unknown_from: TreeView | None = None
) -> tuple[Counter[str], dict[str, str]]:
    """Per name: lines of ``paths`` in ``view`` that name it, ``def``/``class`` lines apart; and one such file.

    Only fork-touched files can name a fork-added definition on the fork head (every other file is the
    merge-base's, older than the name), so only they are read, from the blobs already fetched.
    """
    counts: Counter[str] = Counter()
    where: dict[str, str] = {}
    for path in paths:
        oid = view.oids.get(path)
        if path in view.unknown and unknown_from is not None:
            oid = unknown_from.oids.get(path)
        if oid is None:
            continue
        for text in view.cache.text(oid).decode("utf-8", "replace").splitlines():
            words = set(_WORD.findall(text)) & names
            if not words:
                continue
            stripped = text.lstrip()
            for word in words:
                if re.match(rf"(async\s+def|def|class)\s+{word}\b", stripped):
                    continue
                counts[word] += 1
                where.setdefault(word, path)
    return counts, where
