"""``git merge-tree --write-tree -z --messages`` output, parsed into conflicts with their kinds."""

from __future__ import annotations

from dataclasses import dataclass

CONFLICT_KINDS = (
    "content",
    "add/add",
    "modify/delete",
    "delete/modify",
    "rename/delete",
    "rename/rename",
    "binary",
    "file/directory",
    "mode",
    "other",
)
# Precedence when one path appears in several merge messages: the most specific wins.
_KIND_ORDER = {
    kind: i
    for i, kind in enumerate(
        (
            "binary",
            "rename/rename",
            "rename/delete",
            "modify/delete",
            "delete/modify",
            "file/directory",
            "add/add",
            "mode",
            "content",
            "other",
        )
    )
}


@dataclass(frozen=True)
class Conflict:
    """One conflicted path of a merge, with git's conflict kind.

    ``kind`` is one of :data:`CONFLICT_KINDS`, named from the fork's side: a
    ``modify/delete`` is modified in the fork and deleted upstream, a
    ``delete/modify`` the reverse. ``related`` holds the other paths of the same
    conflict (the two new names of a rename/rename).
    """

    path: str
    kind: str
    message: str = ""
    related: tuple[str, ...] = ()


@dataclass(frozen=True)
class MergeTreeResult:
    """What ``git merge-tree --write-tree`` predicts for merging two commits."""

    tree: str
    conflicts: tuple[Conflict, ...]

    @property
    def clean(self) -> bool:
        """Whether the merge has no conflict."""
        return not self.conflicts


def parse_merge_tree(out: str, *, ours: str, theirs: str) -> MergeTreeResult:
    """Parse ``git merge-tree --write-tree -z --messages`` output into conflicts with kinds.

    The format (git-merge-tree(1), "-z"): the tree OID, NUL; per conflicted index entry
    ``<mode> <oid> <stage>\\t<path>`` NUL; an empty entry; then messages as
    ``<n>`` NUL ``<path>`` x n NUL ``<type>`` NUL ``<message>`` NUL.
    """
    head, _, rest = out.partition("\0")
    tree = head.strip()
    parts = rest.split("\0")
    unmerged: list[str] = []
    i = 0
    while i < len(parts) and parts[i] != "":
        unmerged.append(parts[i].split("\t", 1)[1])
        i += 1
    i += 1
    kinds: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    while i < len(parts) and parts[i].isdigit():
        count = int(parts[i])
        paths = tuple(parts[i + 1 : i + 1 + count])
        kind_type, message = parts[i + 1 + count], parts[i + 2 + count]
        i += 3 + count
        kind = _kind_of(kind_type, message, ours=ours)
        if kind is None:
            continue
        for path in paths:
            known = kinds.get(path)
            if known is None or _KIND_ORDER[kind] < _KIND_ORDER[known[0]]:
                kinds[path] = (kind, message.strip(), tuple(p for p in paths if p != path))
    conflicts = []
    for path in dict.fromkeys(unmerged):
        kind, message, related = kinds.get(path, ("other", "", ()))
        conflicts.append(Conflict(path, kind, message, related))
    return MergeTreeResult(tree, tuple(conflicts))


def _kind_of(kind_type: str, message: str, *, ours: str) -> str | None:
    if not kind_type.startswith("CONFLICT"):
        return None
    label = kind_type[len("CONFLICT (") : -1]
    if label == "contents":
        return "add/add" if "(add/add)" in message else "content"
    if label in ("modify/delete", "rename/delete"):
        if label == "modify/delete" and f"deleted in {ours} " in message:
            return "delete/modify"
        return label
    simple = {
        "binary": "binary",
        "rename/rename": "rename/rename",
        "file/directory": "file/directory",
        "distinct modes": "mode",
    }
    return simple.get(label, "other")
