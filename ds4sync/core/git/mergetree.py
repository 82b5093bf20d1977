"""``git merge-tree --write-tree -z --messages`` output, parsed into conflicts with git's names for them."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Conflict kinds, as git names them in its ``CONFLICT (<name>): ...`` messages. ``content``
#: with ``add/add`` split out (git says ``CONFLICT (add/add)`` for those), ``modify/delete``
#: oriented from the fork (``delete/modify``: deleted in the fork, modified upstream),
#: ``file location``: a file added inside a directory the other side renamed.
CONFLICT_KINDS = (
    "content",
    "add/add",
    "modify/delete",
    "delete/modify",
    "rename/delete",
    "rename/rename",
    "rename/add",
    "binary",
    "file/directory",
    "distinct types",
    "file location",
    "directory rename split",
    "directory rename collision",
    "submodule",
    "other",
)
#: Kinds where git writes conflict markers into the file: removing them resolves it. Every
#: other kind leaves no marker, and only the person's ``git add``/``git rm`` resolves it.
MARKER_KINDS = frozenset({"content", "add/add"})

# Precedence when one path appears in several merge messages: the most specific wins.
_KIND_ORDER = {
    kind: i
    for i, kind in enumerate(
        (
            "binary",
            "submodule",
            "file/directory",
            "distinct types",
            "file location",
            "directory rename split",
            "directory rename collision",
            "rename/rename",
            "rename/add",
            "rename/delete",
            "modify/delete",
            "delete/modify",
            "add/add",
            "content",
            "other",
        )
    )
}
_LABEL = re.compile(r"^CONFLICT\s*\(([^)]*)\)")


@dataclass(frozen=True)
class Conflict:
    """One conflicted path of a merge, with git's conflict kind.

    ``kind`` is one of :data:`CONFLICT_KINDS`, named from the fork's side: a
    ``modify/delete`` is modified in the fork and deleted upstream, a
    ``delete/modify`` the reverse. ``related`` holds the other paths of the same
    conflict (the two new names of a rename/rename, the old path of a file location).
    ``stages`` maps index stage (1 base, 2 ours, 3 theirs) to ``(mode, oid)``; it is empty
    for a conflict git reports only in its messages (a directory rename split: ``git merge``
    fails, ``git ls-files -u`` lists nothing).
    """

    path: str
    kind: str
    message: str = ""
    related: tuple[str, ...] = ()
    stages: tuple[tuple[int, str, str], ...] = ()


#: The ``<type>`` git gives the message it writes before each three-way content merge
#: (git-merge-tree(1), "-z": a stable string); the merge's own list of paths whose content
#: both sides changed, at the path the merge writes, renames followed.
AUTO_MERGING = "Auto-merging"


@dataclass(frozen=True)
class MergeTreeResult:
    """What ``git merge-tree --write-tree`` predicts for merging two commits.

    ``auto_merged``: the paths git merged three-way because both sides changed their
    content (its ``Auto-merging`` messages), conflicted or not, in git's order.
    """

    tree: str
    conflicts: tuple[Conflict, ...]
    auto_merged: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        """Whether the merge has no conflict."""
        return not self.conflicts


def parse_merge_tree(out: str, *, ours: str, theirs: str, ours_label: str | None = None) -> MergeTreeResult:
    """Parse ``git merge-tree --write-tree -z --messages`` output into conflicts with kinds.

    The format (git-merge-tree(1), "-z"): the tree OID, NUL; per conflicted index entry
    ``<mode> <oid> <stage>\\t<path>`` NUL; an empty entry; then messages as
    ``<n>`` NUL ``<path>`` x n NUL ``<type>`` NUL ``<message>`` NUL.

    git names the side copies it writes after the branch argument (``path~<ours>``);
    ``ours_label`` renames them, in paths and messages, to what ``git merge`` in a
    worktree on ``ours`` writes (``path~HEAD``).
    """
    head, _, rest = out.partition("\0")
    tree = head.strip()
    parts = rest.split("\0")
    stages: dict[str, list[tuple[int, str, str]]] = {}
    i = 0
    while i < len(parts) and parts[i] != "":
        meta, path = parts[i].split("\t", 1)
        mode, oid, stage = meta.split()
        stages.setdefault(path, []).append((int(stage), mode, oid))
        i += 1
    i += 1
    kinds: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    message_only: list[tuple[str, str, tuple[str, ...]]] = []
    auto_merged: dict[str, None] = {}
    while i < len(parts) and parts[i].isdigit():
        count = int(parts[i])
        paths = tuple(parts[i + 1 : i + 1 + count])
        kind_type, message = parts[i + 1 + count], parts[i + 2 + count]
        i += 3 + count
        if kind_type == AUTO_MERGING:
            auto_merged.update(dict.fromkeys(paths))
            continue
        kind = _kind_of(kind_type, message, ours=ours)
        if kind is None:
            continue
        if not any(p in stages for p in paths):
            message_only.append((kind, message.strip(), paths))  # git says conflict, the index holds none
        for path in paths:
            known = kinds.get(path)
            if known is None or _KIND_ORDER.get(kind, 99) < _KIND_ORDER.get(known[0], 99):
                kinds[path] = (kind, message.strip(), tuple(p for p in paths if p != path))

    def relabel(text: str) -> str:
        if ours_label is None:
            return text
        text = text.replace(f"~{_label_path(ours)}", f"~{ours_label}")
        return re.sub(rf"\b{re.escape(ours)}\b", ours_label, text)

    conflicts = []
    for path, entries in stages.items():
        kind, message, related = kinds.get(path, ("other", "", ()))
        conflicts.append(
            Conflict(
                relabel(path),
                kind,
                relabel(message),
                tuple(relabel(p) for p in related),
                tuple(sorted(entries)),
            )
        )
    for kind, message, paths in message_only:
        conflicts.append(Conflict(relabel(paths[0]), kind, relabel(message), tuple(relabel(p) for p in paths[1:])))
    return MergeTreeResult(tree, tuple(conflicts), tuple(auto_merged))


def _label_path(branch: str) -> str:
    """How merge-ort spells a branch name inside a path (``/`` becomes ``_``)."""
    return branch.replace("/", "_")


def _kind_of(kind_type: str, message: str, *, ours: str) -> str | None:
    if not kind_type.startswith("CONFLICT"):
        return None
    type_label = kind_type[len("CONFLICT") :].strip().strip("()").strip()
    match = _LABEL.match(message.strip())
    label = match.group(1).strip() if match else type_label
    if type_label.startswith("submodule") or label == "submodule":
        return "submodule"
    if type_label == "binary":
        return "binary"
    if type_label == "directory rename suggested" or label == "file location":
        return "file location"
    if type_label in ("contents", "content"):
        return "add/add" if label == "add/add" else "content"
    if type_label == "modify/delete":
        return "delete/modify" if f"deleted in {ours} " in message else "modify/delete"
    if type_label == "distinct modes":
        return "distinct types"
    if type_label == "rename involved in collision":
        return "rename/add"
    if "directory rename" in type_label and "split" in type_label:
        return "directory rename split"
    if "directory rename" in type_label:
        return "directory rename collision"
    if type_label in CONFLICT_KINDS:
        return type_label
    return label if label else "other"
