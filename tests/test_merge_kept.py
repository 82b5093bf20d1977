"""What a committed resolution kept, read from the blobs: each label, on one generated merge."""

from __future__ import annotations

from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.merge.kept import sides_kept
from tests.scenarios import lines


def test_each_resolution_is_labelled_by_the_side_it_kept(builder: RepoBuilder) -> None:
    names = ["ours.py", "theirs.py", "both.py", "reordered.py", "new.py", "dropped.py", "gone.py"]
    base = builder.commit({n: lines("a", "b") for n in names}, "base")
    builder.branch("up", base)
    builder.checkout("up")
    theirs = builder.commit({n: lines("a", "b", "up") for n in names}, "upstream")
    builder.checkout("main")
    ours = builder.commit({n: lines("a", "b", "fork") for n in names}, "fork")
    result = builder.commit(
        {
            "ours.py": lines("a", "b", "fork"),
            "theirs.py": lines("a", "b", "up"),
            "both.py": lines("a", "b", "fork", "up"),
            "reordered.py": lines("a", "b", "up", "fork"),  # a union in either order is still both sides
            "new.py": lines("a", "b", "fork", "written by a person"),
            "dropped.py": lines("a", "fork"),  # upstream's line dropped, and "b" too: neither side as it was
            "gone.py": None,
        },
        "the person's resolution",
    )
    kept = sides_kept(GitRepo(builder.path), names, base=base, ours=ours, theirs=theirs, result=result)
    assert kept == {
        "ours.py": "ours",
        "theirs.py": "theirs",
        "both.py": "both",
        "reordered.py": "both",
        "new.py": "new text",
        "dropped.py": "new text",
        "gone.py": "deleted",
    }
