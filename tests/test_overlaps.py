"""Semantic overlaps are git's own: the paths its merge content-merged three-way and cleanly.

One generated pair holds every way a file can be changed on both sides (in place, identically,
moved only, moved and edited on either side or both, names that look like globs). ``plan``'s
overlaps are checked against the known answer and against a real ``git merge`` in a worktree,
whose ``Auto-merging`` lines are a second reading of the same machinery. Real git throughout.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ds4sync.cli import main
from ds4sync.core.git import GitRepo
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, Pair, lines, make_pair

BODY = [f"line {i}" for i in range(40)]


def edited(at: int, text: str, body: list[str] = BODY) -> str:
    """``body`` with line ``at`` replaced by ``text``: one line added and one deleted."""
    return lines(*body[:at], text, *body[at + 1 :])


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | {"LC_ALL": "C"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


def zoo(tmp_path: Path) -> Pair:
    names = [
        "in_place.py",
        "same_edit.py",
        "moved_only.py",
        "moved_edited.py",
        "fork_moved.py",
        "both_moved.py",
        "glob[1].py",
        "star*.txt",
        "conflict.py",
        "upstream_only.py",
    ]
    base = {name: lines(f"# {name}", *BODY) for name in names}
    base["glob1.py"] = lines("a file a glob pathspec 'glob[1].py' would also match", *BODY)

    def body(name: str) -> list[str]:
        return [f"# {name}", *BODY]

    upstream = {
        "in_place.py": edited(5, "upstream", body("in_place.py")),
        "same_edit.py": edited(5, "the same edit", body("same_edit.py")),
        "moved_edited.py": edited(5, "upstream", body("moved_edited.py")),
        "fork_moved.py": edited(5, "upstream", body("fork_moved.py")),
        "both_moved.py": edited(5, "upstream", body("both_moved.py")),
        "glob[1].py": edited(5, "upstream", body("glob[1].py")),
        "glob1.py": lines("rewritten upstream", *(f"new {i}" for i in range(30))),
        "star*.txt": edited(5, "upstream", body("star*.txt")),
        "conflict.py": edited(5, "upstream", body("conflict.py")),
        "upstream_only.py": edited(5, "upstream", body("upstream_only.py")),
    }
    fork = {
        "in_place.py": edited(30, "fork", body("in_place.py")),
        "same_edit.py": edited(5, "the same edit", body("same_edit.py")),
        "moved_only.py": edited(30, "fork", body("moved_only.py")),
        "moved_edited.py": edited(30, "fork", body("moved_edited.py")),
        "fork_moved.py": edited(30, "fork", body("fork_moved.py")),
        "both_moved.py": edited(30, "fork", body("both_moved.py")),
        "glob[1].py": edited(30, "fork", body("glob[1].py")),
        "star*.txt": edited(30, "fork", body("star*.txt")),
        "conflict.py": edited(5, "fork", body("conflict.py")),
    }
    return make_pair(
        tmp_path,
        base,
        [upstream],
        [fork],
        upstream_renames=(
            ("moved_only.py", "pkg/moved_only.py"),
            ("moved_edited.py", "pkg/moved_edited.py"),
            ("both_moved.py", "pkg/both_moved.py"),
        ),
        fork_renames=(("fork_moved.py", "lib/fork_moved.py"), ("both_moved.py", "pkg/both_moved.py")),
    )


#: path -> (upstream lines, fork lines, base path): one line replaced is two lines touched.
EXPECTED = {
    "in_place.py": (2, 2, None),
    "pkg/moved_edited.py": (2, 2, "moved_edited.py"),
    "lib/fork_moved.py": (2, 2, "fork_moved.py"),
    "pkg/both_moved.py": (2, 2, "both_moved.py"),
    "glob[1].py": (2, 2, None),
    "star*.txt": (2, 2, None),
}


def plan_overlaps(pair: Pair, capsys: pytest.CaptureFixture[str]) -> dict[str, tuple[int, int, str | None]]:
    code = main(["plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json"])
    body = cli_data(capsys.readouterr().out)
    assert code == 0
    assert [c["path"] for c in body["conflicts"]] == ["conflict.py"]
    return {o["path"]: (o["upstream_lines"], o["fork_lines"], o.get("base_path")) for o in body["overlaps"]}


def test_overlaps_are_the_clean_three_way_merges_with_each_sides_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert plan_overlaps(zoo(tmp_path), capsys) == EXPECTED


def test_overlaps_are_what_git_merge_itself_says_it_auto_merged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = zoo(tmp_path)
    planned = plan_overlaps(pair, capsys)
    worktree = tmp_path / "merged"
    git(pair.repo, "worktree", "add", "-q", "--detach", str(worktree), BRANCH)
    merge = subprocess.run(
        ["git", "merge", "--no-ff", "--no-commit", "upstream/main"],
        cwd=worktree,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | {"LC_ALL": "C"},
    )
    assert merge.returncode == 1  # conflict.py
    said = {
        line.removeprefix("Auto-merging ") for line in merge.stdout.splitlines() if line.startswith("Auto-merging ")
    }
    unmerged = set(git(worktree, "diff", "--name-only", "--diff-filter=U").split())
    assert unmerged == {"conflict.py"}
    assert set(planned) == said - unmerged
    # and the lines are the merge's own: what each parent changed at that path since the merge-base
    for path, (up_lines, fork_lines, base_path) in planned.items():
        old = base_path or path
        for side, expected in (("upstream/main", up_lines), (BRANCH, fork_lines)):
            names = sorted({f":(literal){old}", f":(literal){path}"})
            numstat = git(pair.repo, "diff", "--numstat", "-M", pair.base, side, "--", *names).splitlines()
            assert len(numstat) == 1, (path, side, numstat)  # a rename is one row, at the new name
            added, deleted, _ = numstat[0].split("\t", 2)
            assert int(added) + int(deleted) == expected, (path, side, numstat)


@pytest.mark.parametrize("method", ["changes", "changes_with_renames", "renamed_names"])
def test_path_limits_are_literal_paths_never_globs(tmp_path: Path, method: str) -> None:
    pair = zoo(tmp_path)
    repo = GitRepo(pair.repo)
    head = repo.resolve_commit("upstream/main")
    assert head is not None
    for asked in (["glob[1].py"], ["star*.txt"], ["glob[1].py", "star*.txt"]):
        found = getattr(repo, method)(pair.base, head, asked)
        assert set(found) == set(asked), (method, asked, found)  # never glob1.py, never another *.txt
