"""Every git output that carries paths is read with -z: non-ASCII, spaces, quotes and tabs come back as the
paths they are, never C-quoted (git quotes them in its line formats, core.quotepath on or off for some).

Real git in tmp_path repositories.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.gates.kinds.static_kind import delta_files
from ds4sync.gates.selection import changed_files
from ds4sync.patchsets.authoring import scaffold_invariants
from ds4sync.patchsets.invariants import evaluate
from ds4sync.patchsets.model import PatchSet
from ds4sync.patchsets.tree import CommitTree

NAMES = ("naïve/café.py", "with space/a b.py", 'quote"d.py', "tab\there.py", "日本/モデル.py")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> tuple[RepoBuilder, str, str]:
    builder = RepoBuilder(tmp_path / "repo")
    base = builder.commit({"plain.py": "x = 1\n", **{n: f"OLD = '{n}'\n" for n in NAMES[:2]}}, "base")
    head = builder.commit({**{n: f"NEW_VALUE_FOR = {n!r}\n" for n in NAMES}, "plain.py": None}, "change every odd name")
    return builder, base, head


def test_changed_paths_and_changed_since_selection(repo) -> None:
    builder, base, head = repo
    wt = GitRepo(builder.path)
    assert set(wt.changed_paths(base, head)) == {*NAMES, "plain.py"}
    (builder.path / NAMES[4]).write_text("uncommitted\n")
    git(builder.path, "commit", "-q", "--allow-empty", "-m", "x")
    (builder.path / NAMES[0]).write_text("edited, not committed\n")
    assert NAMES[0] in changed_files(wt, base) and all(n in changed_files(wt, base) for n in NAMES)


def test_delta_files_of_static_gates(repo) -> None:
    builder, base, _head = repo
    assert set(delta_files(GitRepo(builder.path), base, (".py",))) == set(NAMES)


def test_patches_new_invariants_hold_on_the_commit_they_came_from(repo) -> None:
    builder, base, head = repo
    wt = GitRepo(builder.path)
    invariants = scaffold_invariants(wt, base, head)
    named = {inv.get("path") or inv.get("files") for inv in invariants}
    assert set(NAMES) <= named and "plain.py" in named
    ps = PatchSet.model_validate(
        {"id": "odd-names", "title": "odd names", "kind": "fork-feature", "invariants": invariants}
    )
    results = list(evaluate(CommitTree(wt, head), ps))
    assert results and all(r.status == "holds" for r in results), [r.detail for r in results if r.status != "holds"]


def test_remerge_diff_paths_are_the_paths(tmp_path: Path) -> None:
    builder = RepoBuilder(tmp_path / "repo")
    builder.commit({n: "a\n" for n in NAMES}, "base")
    builder.branch("side")
    builder.commit({n: "side\n" for n in NAMES}, "side")
    builder.checkout("main")
    builder.commit({n: "main\n" for n in NAMES}, "main")
    subprocess.run(["git", "merge", "-q", "side"], cwd=builder.path, capture_output=True)
    for name in NAMES:
        (builder.path / name).write_text("resolved\n")
    git(builder.path, "add", "-A")
    git(builder.path, "commit", "-q", "--no-edit")
    wt = GitRepo(builder.path)
    assert wt.remerge_diff_paths(wt.head()) == sorted(NAMES)
