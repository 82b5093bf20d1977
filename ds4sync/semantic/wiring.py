"""Lost fork wiring: fork-added functions and classes referenced on the fork head and by nothing in the merged tree.

When upstream moves the code a fork hooked into, the fork's own kernels and dispatch stay defined but
nothing calls them any more. References are counted with ``git grep -w`` over each whole tree (the
package, not only fork files); a definition line does not count as a reference.
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
    fork: str,
    merged: str,
) -> list[tuple[str, Raw]]:
    """Fork-added module-level functions and classes still defined in the merged tree and no longer referenced.

    ``views``: (merge-base, fork head, merged); ``touched``: fork-touched Python paths of the merged tree.
    Returns (path, warning) pairs; the warning's ``defined_in`` is a file that referenced it on the fork head.
    """
    del cache  # the views share it
    base, fork_view, merged_view = views
    added: dict[str, tuple[str, int]] = {}
    for path in touched:
        fork_facts = fork_view.facts(path)
        merged_facts = merged_view.facts(path)
        if fork_facts is None or merged_facts is None or fork_facts.broken or merged_facts.broken:
            continue
        base_facts = base.facts(path)
        before = base_facts.names if base_facts is not None else set()
        for name, definition in fork_facts.defs.items():
            if "." in name or definition.kind not in ("function", "class") or name in before:
                continue
            if len(name) < MIN_NAME or name.startswith("__") or name in added:
                continue
            kept = merged_facts.defs.get(name)
            if kept is not None:
                added[name] = (path, kept.line)
    if not added:
        return []
    on_fork, where = _references(repo, fork, set(added))
    in_merged, _ = _references(repo, merged, set(added))
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


def _references(repo: GitRepo, rev: str, names: set[str]) -> tuple[Counter[str], dict[str, str]]:
    """Per name: lines of the tree's Python files naming it, ``def``/``class`` lines apart; and one such file."""
    patterns = [arg for name in sorted(names) for arg in ("-e", name)]
    status, out, _ = repo.run(
        "grep", "-I", "-z", "-w", "-F", *patterns, rev, "--", "*.py", ok_codes=(0, 1), strip=False
    )
    counts: Counter[str] = Counter()
    where: dict[str, str] = {}
    if status != 0:
        return counts, where
    for record in out.split("\n"):
        fields = record.split("\0", 1)
        if len(fields) != 2:
            continue
        path = fields[0].split(":", 1)[1] if ":" in fields[0] else fields[0]
        text = fields[1]
        stripped = text.lstrip()
        for word in set(_WORD.findall(text)) & names:
            if re.match(rf"(async\s+def|def|class)\s+{word}\b", stripped):
                continue
            counts[word] += 1
            where.setdefault(word, path)
    return counts, where
