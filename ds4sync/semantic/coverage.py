"""Which patch-set covers a file: the paths its patches touch and the files its invariants name."""

from __future__ import annotations

from collections.abc import Sequence

from ds4sync.core.git import GitRepo
from ds4sync.patchsets.model import PatchSet


def patchset_coverage(repo: GitRepo, patchsets: Sequence[PatchSet]) -> list[tuple[str, tuple[str, ...]]]:
    """(patch-set id, paths and globs) for each patch-set: its ``.patch`` files' paths, then its invariants'.

    Symbol invariants name a module (``pkg.mod:Name``): its ``pkg/mod.py`` and ``pkg/mod/__init__.py``.
    """
    coverage = []
    for ps in patchsets:
        paths: list[str] = sorted(repo.patch_paths(ps.patch_files())) if ps.patches and ps.folder else []
        for inv in ps.invariants:
            for attr in ("files", "path"):
                value = getattr(inv, attr, None)
                if value:
                    paths.extend(value)
            symbol = getattr(inv, "symbol", None)
            if symbol:
                module = symbol.partition(":")[0].replace(".", "/")
                root = getattr(inv, "root", "")
                prefix = f"{root.rstrip('/')}/" if root else ""
                paths += [f"{prefix}{module}.py", f"{prefix}{module}/__init__.py"]
            for side in ("source", "target"):
                ref = getattr(inv, side, None)
                if ref is not None and getattr(ref, "files", None):
                    paths.extend(ref.files)
        coverage.append((ps.id, tuple(dict.fromkeys(paths))))
    return coverage
