"""The verbs the git package gained when the git lines of the other modules moved into it: real git in tmp_path.

Each verb is checked against git's own answer (read back through another verb or the files), and the user refs
they take are checked to stay refs: an option-looking name is an error, never an option, and a leaked
``GIT_DIR`` does not redirect them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4sync.core.errors import GitError
from ds4sync.core.git import GitRepo, clone_repository, init_repository
from ds4sync.demo.repobuild import RepoBuilder


def _history(tmp_path: Path) -> tuple[RepoBuilder, dict[str, str]]:
    b = RepoBuilder(tmp_path / "repo")
    shas = {"base": b.commit({"a.py": "A = 1\n", "[x].py": "glob\n"}, "base", date="2026-08-01T10:00:00+00:00")}
    shas["two"] = b.commit({"a.py": "A = 1\nB = 2\n"}, "two: add B\n\nPatch-set: ps-one", date="2026-08-02T10:00:00")
    b.branch("side", shas["base"])
    shas["side"] = b.commit({"s.py": "S = 1\n"}, "side: add s")
    b.checkout("main")
    b.repo.merge_no_commit(shas["side"])
    shas["merge"] = b.commit({}, "merge side")
    shas["three"] = b.commit({"a.py": "A = 1\nB = 3\n"}, "three: B is 3\n\nPatch-set: ps-two, ps-three")
    return b, shas


def test_history_verbs_read_git_log(tmp_path: Path) -> None:
    b, shas = _history(tmp_path)
    repo = b.repo
    assert repo.subject(shas["two"]) == "two: add B"
    assert repo.committer_date(shas["two"]) == "2026-08-02T10:00:00+00:00"
    assert repo.parents(shas["merge"]) == [shas["two"], shas["side"]] and repo.parents(shas["base"]) == []
    assert repo.first_parent_commits(shas["base"], "HEAD") == [shas["two"], shas["merge"], shas["three"]]
    assert repo.oneline_log(shas["merge"], "HEAD") == [f"{shas['three'][:7]} three: B is 3"]
    assert repo.pickaxe_commits("B = ", "HEAD") == [shas["two"]]  # three changes B's value, not how often "B = " occurs
    assert repo.newest_commit_touching(f"{shas['base']}..HEAD", "a.py") == (shas["three"], "three: B is 3")
    assert repo.newest_commit_touching(f"{shas['base']}..HEAD", "a.py", pickaxe="B = ") == (shas["two"], "two: add B")
    assert repo.newest_commit_touching(f"{shas['base']}..HEAD", "a.py", pickaxe="A = 1") is None
    # on the first-parent line, side's file came with the merge (the PR), not with side's own commit
    assert repo.newest_commit_touching(f"{shas['base']}..HEAD", "s.py") == (shas["merge"], "merge side")
    assert repo.newest_commit_touching("nosuchref..HEAD", "a.py") is None
    assert repo.first_parent_trailers(f"{shas['base']}..HEAD", "Patch-set") == [
        (shas["two"], "ps-one"),
        (shas["merge"], ""),
        (shas["three"], "ps-two, ps-three"),
    ]
    diff = repo.file_diff(shas["two"], shas["three"], "a.py", context=0)
    assert diff.endswith("@@ -2 +2 @@ A = 1\n-B = 2\n+B = 3")  # no context lines


def test_refs_and_trees(tmp_path: Path) -> None:
    b, shas = _history(tmp_path)
    repo = b.repo
    entries = repo.tree_entries(shas["three"])
    assert set(entries) == {"a.py", "[x].py", "s.py"}
    assert entries["a.py"] == ("100644", "blob", repo.blob_ids(shas["three"], ["a.py"])["a.py"])
    assert repo.tree_id(shas["three"]) == repo.out("rev-parse", f"{shas['three']}^{{tree}}")
    assert repo.full_ref_name("main") == "refs/heads/main" and repo.full_ref_name(shas["two"]) is None
    repo.update_ref("refs/heads/moved", shas["two"], expect=None)
    repo.update_ref("refs/heads/moved", shas["three"], message="cas", expect=shas["two"])
    assert repo.resolve_commit("refs/heads/moved") == shas["three"]
    with pytest.raises(GitError):  # the branch is not where the caller thinks: nothing moves
        repo.update_ref("refs/heads/moved", shas["base"], expect=shas["two"])
    assert repo.resolve_commit("refs/heads/moved") == shas["three"]


@pytest.mark.parametrize("ref", ["--all", "-p", "--output=stolen.txt"])
def test_an_option_looking_ref_is_a_ref(tmp_path: Path, ref: str) -> None:
    b, _ = _history(tmp_path)
    for verb in (b.repo.subject, b.repo.committer_date, b.repo.tree_id, b.repo.parents):
        with pytest.raises(GitError):
            verb(ref)
    with pytest.raises(GitError):
        b.repo.first_parent_commits(ref, "HEAD")
    with pytest.raises(GitError):
        b.repo.pickaxe_commits("A", ref)
    assert not (b.path / "stolen.txt").exists()


def test_a_leaked_git_dir_does_not_redirect_the_verbs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b, shas = _history(tmp_path)
    other = RepoBuilder(tmp_path / "other")
    other.commit({"o.py": "O\n"}, "other")
    monkeypatch.setenv("GIT_DIR", str(other.path / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other.path / ".git" / "index"))
    assert b.repo.subject("HEAD") == "three: B is 3"
    b.commit({"n.py": "N\n"}, "new here")
    assert b.repo.subject("HEAD") == "new here" and other.repo.subject("HEAD") == "other"
    assert b.repo.first_parent_commits(shas["three"], "HEAD") == [b.head()]


def test_work_tree_verbs(tmp_path: Path) -> None:
    b, _ = _history(tmp_path)
    repo = b.repo
    assert not repo.has_uncommitted()
    (b.path / "a.py").write_text("changed\n")
    (b.path / "new.py").write_text("new\n")
    assert repo.has_uncommitted(["a.py"]) and repo.has_uncommitted(["new.py"]) and not repo.has_uncommitted(["s.py"])
    repo.move_path("s.py", "t.py")
    assert repo.worktree_changed_names("HEAD", diff_filter="ACMDR") == ["a.py", "t.py"]
    assert repo.worktree_changed_names("HEAD", diff_filter="ACMR", renames=False) == ["a.py", "t.py"]
    assert repo.worktree_changed_names("HEAD", diff_filter="D", renames=False) == ["s.py"]
    check = repo.diff_check("HEAD")
    assert check.status == 0 and check.command == ("git", "diff", "--check", "HEAD")
    (b.path / "a.py").write_text("trailing \n")
    check = repo.diff_check("HEAD")
    assert check.status != 0 and "a.py:1: trailing whitespace." in check.out
    (b.path / ".gitignore").write_text("*.log\n")
    (b.path / "build.log").write_text("x\n")
    repo.reset_hard("HEAD")
    assert (b.path / "a.py").read_text() == "A = 1\nB = 3\n" and (b.path / "s.py").is_file()
    repo.clean_untracked()
    assert not (b.path / "new.py").exists() and (b.path / "build.log").exists()
    repo.clean_untracked(ignored=True)
    assert not (b.path / "build.log").exists() and not repo.has_uncommitted()
    repo.remove_paths(["[x].py"])
    assert repo.index_entries(["[x].py", "a.py"]).keys() == {"a.py"}  # literal: "[x].py" is no glob for "x.py"
    assert "[x].py" not in repo.index_paths() and "a.py" in repo.index_paths()


def test_branch_checkout_and_tree_verbs(tmp_path: Path) -> None:
    b, shas = _history(tmp_path)
    repo = b.repo
    repo.checkout_new_branch("topic", shas["two"])
    assert repo.current_branch() == "topic" and repo.head() == shas["two"]
    repo.checkout_branch("main")
    assert repo.current_branch() == "main"
    with pytest.raises(GitError):
        repo.checkout_branch("-b")
    repo.check_out_tree_unstaged(repo.tree_id(shas["two"]))
    assert repo.head() == shas["three"] and (b.path / "a.py").read_text() == "A = 1\nB = 2\n"
    assert not (b.path / "s.py").exists()
    assert repo.unstaged_paths() == ["a.py", "s.py"] and not repo.run("diff", "--cached", "--quiet", ok_codes=(0, 1))[0]


def test_merge_verbs(tmp_path: Path) -> None:
    b = RepoBuilder(tmp_path / "repo")
    base = b.commit({"f.py": "x = 0\n", ".gitattributes": "f.py conflict-marker-size=9\n"}, "base")
    b.branch("up", base)
    up = b.commit({"f.py": "x = 1\n"}, "up")
    b.checkout("main")
    b.commit({"f.py": "x = 2\n"}, "fork")
    repo = b.repo
    assert not repo.merge_no_commit(up)[0]
    assert repo.index_paths().count("f.py") == 3  # one entry per stage
    assert repo.index_entries(["f.py"]) == {}  # no stage 0 while conflicted
    assert repo.marker_sizes_at(base, ["f.py", "g.py"]) == {"f.py": 9, "g.py": 7}
    (b.path / "f.py").write_text("x = 3\n")
    repo.add_paths(["f.py"])
    assert repo.unmerged_paths() == []
    repo.restore_conflict("f.py")
    assert repo.unmerged_paths() == ["f.py"] and repo.paths_with_markers(["f.py"]) == ["f.py"]
    repo.merge_abort()
    assert repo.merge_head() is None and (b.path / "f.py").read_text() == "x = 2\n"
    repo.merge_no_commit(up)
    repo.merge_quit()
    assert repo.merge_head() is None and repo.unmerged_paths() == ["f.py"]  # the index is left as it was


def test_repository_verbs(tmp_path: Path) -> None:
    b, shas = _history(tmp_path)
    bare = tmp_path / "remote.git"
    init_repository(bare, bare=True)
    assert (bare / "HEAD").is_file() and not (bare / ".git").exists()
    b.repo.add_remote("origin", str(bare))
    assert b.repo.remote_url("origin") == str(bare)
    b.repo.set_config("ds4sync.probe", "yes")
    assert b.repo.out("config", "--local", "ds4sync.probe") == "yes"
    clone = tmp_path / "clone"
    clone_repository(b.path, clone, checkout=False)
    cloned = GitRepo(clone)
    assert cloned.resolve_commit("origin/main") == shas["three"] and not (clone / "a.py").exists()
    assert cloned.remote_url("origin") == str(b.path)
    who = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "C", "GIT_COMMITTER_EMAIL": "c@x"}
    sha = cloned.commit_as("empty", identity=who, date="2026-08-03T12:00:00+00:00")
    assert cloned.committer_date(sha) == "2026-08-03T12:00:00+00:00"
    assert cloned.out("log", "-1", "--format=%an <%ae> / %cn <%ce>", sha) == "A <a@x> / C <c@x>"
