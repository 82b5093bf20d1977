from pathlib import Path

from ds4sync.cli import main
from ds4sync.repobuild import RepoBuilder


def test_merge_end_to_end_clean(builder: RepoBuilder, tmp_path: Path) -> None:
    builder.commit({"a.txt": "one\n", "b.txt": "b\n"}, "base")
    builder.branch("fork")
    builder.commit({"b.txt": "b fork\n"}, "fork change")
    builder.checkout("main")
    upstream = builder.commit({"a.txt": "one upstream\n"}, "upstream change")
    code = main(["merge", upstream, "--repo", str(builder.path), "--branch", "fork"])
    assert code == 0
