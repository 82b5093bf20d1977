"""Which side a committed resolution kept: the fork's, upstream's, both, new text, or the file deleted.

A reviewer reading "resolved by a person" needs to know what the person did with each conflicted
file. The answer comes from the blobs alone: the merge commit's file compared with the fork's, with
upstream's and with the merge-base's (all read from objects, in one ``ls-tree`` per tree and one
``cat-file --batch`` for the files whose text must be compared).
"""

from __future__ import annotations

from collections.abc import Iterable

from ds4sync.core.git import GitRepo
from ds4sync.core.model import updated
from ds4sync.models.merge_results import Kept, MergeSummary


def sides_kept(
    repo: GitRepo, paths: Iterable[str], *, base: str, ours: str, theirs: str, result: str
) -> dict[str, Kept]:
    """``{path: what the resolution in ``result`` kept}`` for each conflicted path.

    - ``deleted``: the path is not in ``result``;
    - ``ours`` / ``theirs``: ``result``'s blob is the fork's (``ours``) / upstream's (``theirs``) blob;
    - ``both``: every line each side added since ``base`` is in ``result``, and ``result`` has no line that
      is in none of the three (what a union of the two sides gives, in any order);
    - ``new text``: anything else: the person wrote lines neither side has, or dropped some of each side's.

    Args:
        base, ours, theirs, result: commits (the merge-base, the fork head, the upstream commit, the merge).
    """
    wanted = list(dict.fromkeys(paths))
    trees = {name: repo.blob_ids(rev, wanted) for name, rev in (("base", base), ("ours", ours), ("theirs", theirs))}
    merged = repo.blob_ids(result, wanted)
    kept: dict[str, Kept] = {}
    to_read: list[str] = []
    for path in wanted:
        oid = merged.get(path)
        if oid is None:
            kept[path] = "deleted"
        elif oid == trees["ours"].get(path):
            kept[path] = "ours"
        elif oid == trees["theirs"].get(path):
            kept[path] = "theirs"
        else:
            to_read.append(path)
    if not to_read:
        return kept
    oids = [t[p] for p in to_read for t in (*trees.values(), merged) if p in t]
    text = repo.blobs(oids)
    for path in to_read:
        lines = {name: _lines(text.get(trees[name].get(path, ""), b"")) for name in trees}
        kept[path] = _both_or_new(lines["base"], lines["ours"], lines["theirs"], _lines(text[merged[path]]))
    return kept


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines()


def _both_or_new(base: list[bytes], ours: list[bytes], theirs: list[bytes], result: list[bytes]) -> Kept:
    have = set(result)
    base_set = set(base)
    added = [line for line in (*ours, *theirs) if line not in base_set]
    if all(line in have for line in added) and have <= base_set | set(ours) | set(theirs):
        return "both"
    return "new text"


def with_review_facts(repo: GitRepo, summary: MergeSummary, merge_commit: str) -> MergeSummary:
    """``summary`` with what each conflict's resolution kept and which overlaps ended as upstream's file.

    Read once the merge is committed; changes no status, only what the report shows a reviewer.
    """
    conflicts = [c.path for c in summary.conflicts]
    kept = sides_kept(
        repo,
        conflicts,
        base=summary.merge_base,
        ours=summary.fork_sha,
        theirs=summary.upstream_sha,
        result=merge_commit,
    )
    overlaps = [o.path for o in summary.overlaps]
    upstream, merged = repo.blob_ids(summary.upstream_sha, overlaps), repo.blob_ids(merge_commit, overlaps)
    return updated(
        summary,
        conflicts=tuple(updated(c, kept=kept.get(c.path)) for c in summary.conflicts),
        overlaps=tuple(
            updated(o, equals_upstream=o.path in merged and merged[o.path] == upstream.get(o.path))
            for o in summary.overlaps
        ),
    )
