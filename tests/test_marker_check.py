"""No conflict marker reaches a merge commit through `resume`, whatever git called the conflict.

Every conflict kind git produces, in one merge; git's own marker sizes, when the merge itself changes
``conflict-marker-size``; and a fixture that holds a whole hunk on purpose, accepted by name. Real git in
tmp_path repositories; the markers are found here by a plain reading of the files, not by ds4sync's check.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from ds4sync.cli import main
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, Pair, lines, make_pair

MARKER = re.compile(rb"^(<{7,}) .*\n(?:.*\n)*?(={7,})\n(?:.*\n)*?(>{7,})( |$)", re.M)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def has_marker(data: bytes) -> bool:
    """A hunk of any length git could write (7 or more, the three lines of one length)."""
    return any(len(m[1]) == len(m[2]) == len(m[3]) for m in MARKER.finditer(data))


def marked_in(root: Path) -> set[str]:
    """Work-tree files holding a conflict hunk, read plainly."""
    return {
        str(f.relative_to(root))
        for f in root.rglob("*")
        if ".git" not in f.relative_to(root).parts and f.is_file() and not f.is_symlink() and has_marker(f.read_bytes())
    }


def marked_in_commit(repo: Path, commit: str) -> set[str]:
    found = set()
    for entry in git(repo, "ls-tree", "-r", "-z", commit).split("\0"):
        if not entry:
            continue
        meta, path = entry.split("\t", 1)
        mode, kind, oid = meta.split()
        if kind == "blob" and mode != "120000":
            data = subprocess.run(["git", "cat-file", "blob", oid], cwd=repo, capture_output=True, check=True).stdout
            if has_marker(data):
                found.add(path)
    return found


def stage_everything(worktree: Path) -> None:
    """What a person who follows "`git add`" everywhere does: stage every path as it is (the submodule by its
    fork commit, which has no checkout to add)."""
    git(worktree, "add", "-A", "--", ".", ":(exclude)sub")
    if (worktree / "sub").exists() or "sub" in git(worktree, "ls-files", "-u"):
        git(worktree, "update-index", "--cacheinfo", f"160000,{'2' * 40},sub")


def body(tag: str) -> str:
    return lines(*(f"{tag} line {i}" for i in range(1, 9)))


def edit(text: str, tag: str) -> str:
    return text.replace("line 2", f"line 2 {tag}")


def gitlink(repo: Path, path: str, sha: str) -> None:
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{sha},{path}")


def all_kinds_pair(tmp_path: Path) -> Pair:
    """One merge with a conflict of each kind git produces (content, add/add, modify/delete, delete/modify,
    rename/delete, rename/rename 1to2 with both sides editing, rename/rename 2to1, directory rename
    collision, file/directory, binary, submodule)."""
    pair = make_pair(
        tmp_path,
        {
            "content.py": body("c"),
            "md.py": body("md"),
            "dm.py": body("dm"),
            "rd.py": body("rd"),
            "rr.py": body("rr"),
            "two_a.py": body("ta"),
            "two_b.py": body("tb"),
            "olddir/k.py": body("k"),
            "blob.bin": b"\x00\x01base",
            "fd": body("fd"),
        },
        [
            {
                "content.py": edit(body("c"), "UP"),
                "added.py": body("added up"),
                "md.py": None,
                "dm.py": edit(body("dm"), "UP"),
                "blob.bin": b"\x00\x02up",
            }
        ],
        [
            {
                "content.py": edit(body("c"), "FORK"),
                "added.py": body("added fork"),
                "md.py": edit(body("md"), "FORK"),
                "dm.py": None,
                "rd.py": None,
                "olddir/new.py": body("fork new"),
                "blob.bin": b"\x00\x03fork",
                "fd": edit(body("fd"), "FORK"),
            }
        ],
    )
    up, fork = pair.upstream.path, pair.repo
    git(up, "mv", "rd.py", "rd_up.py")
    (up / "rd_up.py").write_text(edit(body("rd"), "UP"))
    git(up, "mv", "rr.py", "rr_up.py")
    (up / "rr_up.py").write_text(edit(body("rr"), "UP"))
    git(up, "mv", "two_b.py", "two.py")
    git(up, "mv", "olddir", "newdir")
    (up / "newdir" / "new.py").write_text(body("upstream new"))
    git(up, "rm", "-q", "fd")
    (up / "fd").mkdir()
    (up / "fd" / "inner.py").write_text(body("inner"))
    git(up, "add", "-A")
    gitlink(up, "sub", "1" * 40)
    git(up, "commit", "-q", "-m", "upstream renames and moves")
    git(fork, "checkout", "-q", BRANCH)
    git(fork, "mv", "rr.py", "rr_fork.py")
    (fork / "rr_fork.py").write_text(edit(body("rr"), "FORK"))
    git(fork, "mv", "two_a.py", "two.py")
    git(fork, "add", "-A")
    gitlink(fork, "sub", "2" * 40)
    git(fork, "commit", "-q", "-m", "fork renames")
    git(fork, "checkout", "-q", "main")
    git(fork, "fetch", "-q", "upstream")
    return pair


#: Where git writes markers in that merge, and the kind ds4sync records for each.
GIT_MARKS = {
    "content.py": "content",
    "added.py": "add/add",
    "rr_fork.py": "rename/rename",
    "rr_up.py": "rename/rename",
    "two.py": "add/add",
    "newdir/new.py": "file location",
}


@pytest.mark.slow
def test_no_marker_of_any_conflict_kind_reaches_the_merge_commit(tmp_path: Path, capsys) -> None:
    pair = all_kinds_pair(tmp_path)
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    assert code == 4
    data = cli_data(out)
    worktree = Path(data["worktree"])
    kinds = {c["path"]: c["kind"] for c in data["conflicts"]}
    assert {"content", "add/add", "modify/delete", "delete/modify", "rename/delete", "rename/rename"} <= set(
        kinds.values()
    )
    assert {"file location", "file/directory", "binary", "submodule"} <= set(kinds.values())
    assert marked_in(worktree) == set(GIT_MARKS)  # where git wrote markers, read plainly
    assert {p: kinds[p] for p in GIT_MARKS} == GIT_MARKS
    fork_head = git(pair.repo, "rev-parse", BRANCH)
    # The person stages everything as it is, as the hints say `git add`: markers and all.
    stage_everything(worktree)
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 4 and "conflict markers remain in 6 file(s)" in err
    assert all(path in err for path in GIT_MARKS)
    assert git(worktree, "rev-parse", "HEAD") == fork_head  # nothing committed
    # The markers are edited out of every file but one: still refused, naming that one only.
    for path in GIT_MARKS:
        (worktree / path).write_text(body(f"resolved {path}"))
    (worktree / "rr_up.py").write_text(
        lines("<<<<<<<< HEAD:rr_fork.py", "fork", "========", "up", ">>>>>>>> upstream:rr_up.py")
    )
    stage_everything(worktree)
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 4 and "conflict markers remain in 1 file(s): rr_up.py (work tree and index)" in err
    git(worktree, "rm", "-qf", "rr_up.py")
    code, out, err = run_cli(capsys, "resume", "--repo", str(pair.repo), "--json")
    assert code == 0, err
    commit = cli_data(out)["merge_commit"]
    assert marked_in_commit(pair.repo, commit) == set()


def test_markers_staged_and_then_removed_from_the_work_tree_only_are_refused(tmp_path: Path, capsys) -> None:
    """What the commit takes is the index: a marked blob staged there is found though the file is gone."""
    pair = make_pair(tmp_path, {"rr.py": body("rr")}, [], [])
    git(pair.upstream.path, "mv", "rr.py", "rr_up.py")
    (pair.upstream.path / "rr_up.py").write_text(edit(body("rr"), "UP"))
    git(pair.upstream.path, "commit", "-q", "-am", "upstream renames")
    pair.fork.checkout(BRANCH)
    git(pair.repo, "mv", "rr.py", "rr_fork.py")
    (pair.repo / "rr_fork.py").write_text(edit(body("rr"), "FORK"))
    git(pair.repo, "commit", "-q", "-am", "fork renames")
    pair.fork.checkout("main")
    git(pair.repo, "fetch", "-q", "upstream")
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    worktree = Path(cli_data(out)["worktree"])
    assert code == 4 and marked_in(worktree) == {"rr_fork.py", "rr_up.py"}
    git(worktree, "add", "rr_fork.py", "rr_up.py")
    git(worktree, "rm", "-q", "rr.py")
    (worktree / "rr_up.py").unlink()  # gone from the work tree, still staged with its markers
    (worktree / "rr_fork.py").write_text(body("resolved"))
    git(worktree, "add", "rr_fork.py")
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 4 and "rr_up.py (index)" in err


# -- the sizes git used ------------------------------------------------------------------------


def sized_pair(tmp_path: Path, *, base: int | None, up: int | None, fork: int | None, renamed: bool) -> Pair:
    """A content conflict in f.txt (or a rename/rename of it), with ``conflict-marker-size`` per side."""

    def attrs(size: int | None) -> dict:
        return {".gitattributes": f"*.txt conflict-marker-size={size}\n" if size else None}

    start = {"f.txt": body("f"), **({".gitattributes": f"*.txt conflict-marker-size={base}\n"} if base else {})}
    up_change = {"f.txt": edit(body("f"), "UP"), **(attrs(up) if up != base else {})}
    fork_change = {"f.txt": edit(body("f"), "FORK"), **(attrs(fork) if fork != base else {})}
    pair = make_pair(
        tmp_path,
        start,
        [up_change],
        [fork_change],
        upstream_renames=(("f.txt", "f_up.txt"),) if renamed else (),
        fork_renames=(("f.txt", "f_fork.txt"),) if renamed else (),
    )
    return pair


@pytest.mark.parametrize(
    ("base", "up", "fork", "renamed", "finish"),
    [
        (None, 10, None, False, True),  # upstream adds the attribute: git writes 7, the merged tree says 10
        (None, 32, None, False, False),
        (12, None, 12, False, True),  # upstream drops it: git writes 12, the merged tree says 7
        (9, 16, 9, False, False),  # upstream changes it
        (None, 10, None, True, False),  # rename/rename: git's inner merge writes 8
        (10, 10, 10, True, True),  # ... and 11 under an attribute of 10
    ],
)
def test_markers_at_the_size_git_wrote_are_refused_when_the_merge_changes_the_size(
    tmp_path: Path, capsys, base: int | None, up: int | None, fork: int | None, renamed: bool, finish: bool
) -> None:
    pair = sized_pair(tmp_path, base=base, up=up, fork=fork, renamed=renamed)
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    assert code == 4
    worktree = Path(cli_data(out)["worktree"])
    marked = marked_in(worktree)
    assert marked == ({"f_fork.txt", "f_up.txt"} if renamed else {"f.txt"})
    git(worktree, "add", "-A")
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 4 and "conflict markers remain" in err and all(p in err for p in marked)
    if not finish:  # (the whole run after the resolution is proven in the other cases)
        return
    for path in marked:
        (worktree / path).write_text(body("resolved"))
    git(worktree, "add", "-A")
    code, out, err = run_cli(capsys, "resume", "--repo", str(pair.repo), "--json")
    assert code == 0, err
    assert marked_in_commit(pair.repo, cli_data(out)["merge_commit"]) == set()


# -- a file meant to hold a hunk ----------------------------------------------------------------


def test_a_fixture_holding_a_whole_hunk_is_accepted_only_by_name_and_recorded(tmp_path: Path, capsys) -> None:
    fixture = "tests/fixtures/conflicted.txt"
    pair = make_pair(
        tmp_path,
        {fixture: body("fx"), "other.py": body("o")},
        [{fixture: edit(body("fx"), "UP"), "other.py": edit(body("o"), "UP")}],
        [{fixture: edit(body("fx"), "FORK"), "other.py": edit(body("o"), "FORK")}],
    )
    args = ("--repo", str(pair.repo))
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args, "--branch", BRANCH, "--json")
    worktree = Path(cli_data(out)["worktree"])
    kept = lines("<<<<<<< ours", "left", "=======", "right", ">>>>>>> theirs")
    (worktree / fixture).write_text(kept)  # the fixture's resolution is a hunk, on purpose
    (worktree / "other.py").write_text(body("resolved"))
    code, _, err = run_cli(capsys, "resume", *args)
    assert code == 4 and fixture in err and "--accept-markers" in err
    code, _, err = run_cli(capsys, "resume", *args, "--accept-markers", "other.py")
    assert code == 4 and "--accept-markers names paths without conflict markers of this merge: other.py" in err
    code, out, err = run_cli(capsys, "resume", *args, "--accept-markers", fixture, "--json")
    assert code == 0, err
    data = cli_data(out)
    assert git(pair.repo, "show", f"{data['merge_commit']}:{fixture}") + "\n" == kept
    record = json.loads(Path(data["record"]).read_text())
    conflicts = {c["path"]: c for c in record["results"]["merge"]["conflicts"]}
    assert conflicts[fixture]["markers_accepted"] == [fixture]
    assert conflicts["other.py"]["markers_accepted"] == []
    assert fixture in record["phases"]["resolve"]["message"]
    code, _, err = run_cli(capsys, "resume", *args, "--accept-markers", fixture)
    assert code == 2 and "waits for a person" in err
