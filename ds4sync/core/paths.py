"""The one glob dialect for repository paths: merge rules, invariant files and patch-set paths.

Globs are matched with wcmatch on repository-relative POSIX paths: ``*`` and ``?`` stay within one
path segment, ``**`` crosses segments (``**/x`` also matches a top-level ``x``), ``{a,b}`` expands,
``[...]`` is a character class, and a leading dot needs no special care (dotfiles match). This is
the same dialect as ``.gitignore``-style tools and GitHub's path filters, so a pattern means the same
here as in the fork's CI. (Gate dependencies follow vLLM CI's own prefix and regex rules instead; see
``ds4sync.gates.selection``.)
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from types import ModuleType


@cache
def _glob() -> tuple[ModuleType, int]:
    """wcmatch's glob module and the dialect's flags (imported on first use: most commands match no path)."""
    from wcmatch import glob

    return glob, glob.GLOBSTAR | glob.BRACE | glob.DOTGLOB | glob.NEGATE


def is_glob(pattern: str) -> bool:
    """Whether ``pattern`` has wildcards, a class or braces (else it names one path)."""
    return any(ch in pattern for ch in "*?[{")


def path_matches(pattern: str, path: str) -> bool:
    """Whether the repository-relative POSIX ``path`` matches ``pattern``."""
    glob, flags = _glob()
    return bool(glob.globmatch(path, pattern, flags=flags))


def filter_paths(paths: Iterable[str], pattern: str) -> list[str]:
    """The ``paths`` that match ``pattern``, in their order."""
    glob, flags = _glob()
    return [str(path) for path in glob.globfilter(list(paths), pattern, flags=flags)]
