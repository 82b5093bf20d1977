"""Every conflict kind git has, named as git names it; git decides what is resolved; resolutions with provenance.

Real git in tmp_path repositories throughout; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.core.git import GitRepo, has_conflict_hunk
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, Pair, lines, make_pair


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def gitlink(repo: Path, path: str, sha: str) -> None:
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{sha},{path}")


def every_kind_pair(tmp_path: Path) -> Pair:
    """One fork/upstream pair with a conflict of every kind git reports."""
    crlf = b"one\r\ntwo\r\nthree\r\nfour\r\n"
    pair = make_pair(
        tmp_path,
        {
            "content.py": lines("a", "b", "c"),
            "modified_in_fork.py": lines("x"),
            "deleted_in_fork.py": lines("y"),
            "renamed.py": lines("r1", "r2", "r3", "r4"),
            "renamed_both.py": lines("s1", "s2", "s3", "s4"),
            "blob.bin": b"\x00\x01base",
            "olddir/kept.py": lines("k1", "k2", "k3"),
            "fd": lines("file"),
            "tc": lines("text"),
            "crlf.txt": crlf,
        },
        upstream_changes=[
            {
                "content.py": lines("a", "UPSTREAM", "c"),
                "added_both.py": lines("upstream version"),
                "modified_in_fork.py": None,
                "deleted_in_fork.py": lines("y", "upstream edit"),
                "renamed.py": None,
                "blob.bin": b"\x00\x02upstream",
                "crlf.txt": crlf.replace(b"\r\n", b"\n"),
            }
        ],
        fork_changes=[
            {
                "content.py": lines("a", "FORK", "c"),
                "added_both.py": lines("fork version"),
                "modified_in_fork.py": lines("x", "fork edit"),
                "deleted_in_fork.py": None,
                "renamed.py": lines("r1", "r2", "r3", "r4", "fork edit"),
                "blob.bin": b"\x00\x03fork",
                "olddir/added.py": lines("the fork's new file"),
                "fd": lines("file", "fork edit"),
                "tc": lines("text", "fork edit"),
                "crlf.txt": crlf.replace(b"two", b"TWO (fork)"),
            }
        ],
        upstream_renames=(("renamed_both.py", "renamed_up.py"), ("olddir", "newdir")),
        fork_renames=(("renamed_both.py", "renamed_fork.py"),),
    )
    up, fork = pair.upstream.path, pair.repo
    # upstream: fd becomes a directory, tc a symlink, sub a submodule moved on
    git(up, "rm", "-q", "fd", "tc")
    (up / "fd").mkdir()
    (up / "fd" / "inner.py").write_text(lines("inner"))
    (up / "tc").symlink_to("content.py")
    git(up, "add", "-A")
    gitlink(up, "sub", "1" * 40)  # after `add -A`, which would drop a gitlink without its folder
    git(up, "commit", "-q", "-m", "upstream: fd is a directory, tc a symlink, sub added")
    git(fork, "checkout", "-q", BRANCH)
    gitlink(fork, "sub", "2" * 40)
    git(fork, "commit", "-q", "-m", "fork: sub moved")
    git(fork, "checkout", "-q", "main")
    git(fork, "fetch", "-q", "upstream")
    return pair


EXPECTED = {
    "content.py": "content",
    "added_both.py": "add/add",
    "modified_in_fork.py": "modify/delete",
    "deleted_in_fork.py": "delete/modify",
    "renamed.py": "modify/delete",
    "blob.bin": "binary",
    "renamed_both.py": "rename/rename",
    "renamed_fork.py": "rename/rename",
    "renamed_up.py": "rename/rename",
    "newdir/added.py": "file location",
    "fd~HEAD": "file/directory",
    "tc": "distinct types",
    "tc~HEAD": "distinct types",
    "sub": "submodule",
    "crlf.txt": "content",
}


def test_every_kind_named_as_git_names_it_and_plan_predicts_the_paths_merge_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = every_kind_pair(tmp_path)
    repo_args = ("--repo", str(pair.repo), "--branch", BRANCH, "--json")
    code, planned, _ = run_cli(capsys, "plan", "upstream/main", *repo_args)
    assert code == 0
    plan = cli_data(planned)
    assert {c["path"]: c["kind"] for c in plan["conflicts"]} == EXPECTED
    eol = {c["path"] for c in plan["conflicts"] if c.get("eol_only")}
    assert eol == {"crlf.txt"}
    assert "merge.renormalize" in next(c["hint"] for c in plan["conflicts"] if c["path"] == "crlf.txt")
    assert "22222222" in next(c["hint"] for c in plan["conflicts"] if c["path"] == "sub")  # the fork's commit
    code, merged, _ = run_cli(capsys, "merge", "upstream/main", *repo_args)
    assert code == 4
    data = cli_data(merged)
    # git's own list of what is conflicted, in the worktree the merge ran in
    unmerged = set(git(Path(data["worktree"]), "diff", "--name-only", "--diff-filter=U").split())
    assert unmerged == set(EXPECTED) == {c["path"] for c in data["conflicts"]}
    assert all(c["resolution"] == "unresolved" for c in data["conflicts"])


def test_eol_only_hint_is_right_git_merges_it_with_renormalize(tmp_path: Path) -> None:
    """What the hint says works: with a text attribute, merge.renormalize makes the conflict go away."""
    crlf = b"one\r\ntwo\r\nthree\r\n"
    pair = make_pair(
        tmp_path,
        {"crlf.txt": crlf},
        [{"crlf.txt": crlf.replace(b"\r\n", b"\n"), ".gitattributes": "* text=auto\n"}],
        [{"crlf.txt": crlf.replace(b"two", b"TWO")}],
    )
    git(pair.repo, "checkout", "-q", BRANCH)
    plain = subprocess.run(["git", "merge", "--no-commit", "upstream/main"], cwd=pair.repo, capture_output=True)
    assert plain.returncode == 1
    git(pair.repo, "merge", "--abort")
    renorm = subprocess.run(
        ["git", "-c", "merge.renormalize=true", "merge", "--no-commit", "upstream/main"], cwd=pair.repo
    )
    assert renorm.returncode == 0


def test_a_theirs_rule_never_deletes_the_forks_new_file_on_a_directory_rename(tmp_path: Path, capsys) -> None:
    pair = make_pair(
        tmp_path,
        {"olddir/a.py": lines("a1", "a2", "a3")},
        [],
        [{"olddir/new.py": lines("fork's new file")}],
        upstream_renames=(("olddir", "newdir"),),
    )
    (pair.repo / "ds4sync.yaml").write_text(
        yaml.safe_dump({"fork": {"branch": BRANCH}, "merge": {"rules": [{"glob": "**", "strategy": "theirs"}]}})
    )
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--json")
    data = cli_data(out)
    assert [(c["path"], c["kind"]) for c in data["conflicts"]] == [("newdir/new.py", "file location")]
    assert code == 0
    tree = git(pair.repo, "ls-tree", "-r", "--name-only", data["merge_commit"]).split()
    assert "newdir/new.py" in tree and "newdir/a.py" in tree


# -- git decides what is resolved -------------------------------------------------------------


@pytest.mark.parametrize("size", [7, 10, 32])
def test_leftover_markers_of_the_attribute_size_are_refused(tmp_path: Path, size: int, capsys) -> None:
    attrs = {} if size == 7 else {".gitattributes": f"*.txt conflict-marker-size={size}\n"}
    pair = make_pair(tmp_path, {"f.txt": lines("a"), **attrs}, [{"f.txt": lines("up")}], [{"f.txt": lines("fork")}])
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    assert code == 4
    worktree = Path(cli_data(out)["worktree"])
    text = (worktree / "f.txt").read_text()
    assert text.startswith("<" * size + " ") and "<" * (size + 1) not in text  # git wrote markers of that size
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 4 and "conflict markers remain" in err and "f.txt" in err
    # a person removes only the first marker line: the hunk is broken, but the rest is still git's conflict
    (worktree / "f.txt").write_text(text.replace("<" * size + " HEAD\n", "", 1).replace("=" * size, "=" * size, 1))
    assert git(worktree, "ls-files", "-u")  # nothing was staged
    (worktree / "f.txt").write_text(lines("fork", "up"))
    assert run_cli(capsys, "resume", "--repo", str(pair.repo))[0] == 0


def test_marker_grammar_is_rerere_s() -> None:
    for size in (7, 10, 32):
        hunk = f"{'<' * size} ours\nA\n{'=' * size}\nB\n{'>' * size} theirs\n".encode()
        assert has_conflict_hunk(hunk, size)
        assert not has_conflict_hunk(hunk, size + 1) and not has_conflict_hunk(hunk, size - 1)
        assert has_conflict_hunk(hunk.replace(b"\n", b"\r\n"), size)
        diff3 = f"{'<' * size} ours\nA\n{'|' * size} base\nO\n{'=' * size}\nB\n{'>' * size} theirs\n".encode()
        assert has_conflict_hunk(diff3, size)
    rst = b"Title\n=======\n\nText\n"
    assert not has_conflict_hunk(rst) and not has_conflict_hunk(b"<<<<<<<< not a marker\n=======\n>>>>>>> x\n")


def test_a_legitimate_rst_heading_is_accepted(tmp_path: Path, capsys) -> None:
    pair = make_pair(
        tmp_path,
        {"doc.rst": lines("Title", "=====", "", "text")},
        [{"doc.rst": lines("Title", "=====", "", "upstream text")}],
        [{"doc.rst": lines("Title", "=====", "", "fork text")}],
    )
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    worktree = Path(cli_data(out)["worktree"])
    resolved = lines("Heading", "=======", "", "fork text", "", "Another", "=======", "", "upstream text")
    (worktree / "doc.rst").write_text(resolved)
    code, out, err = run_cli(capsys, "resume", "--repo", str(pair.repo), "--json")
    assert code == 0, err
    assert git(pair.repo, "show", f"{cli_data(out)['merge_commit']}:doc.rst") + "\n" == resolved


MARKERLESS = {
    "modify/delete": (
        {"m.py": lines("m")},
        [{"m.py": None}],
        [{"m.py": lines("m", "fork")}],
        ("git", "rm", "-q", "m.py"),
    ),
    "file location": (
        {"olddir/a.py": lines("a1", "a2", "a3")},
        [],
        [{"olddir/new.py": lines("new")}],
        ("git", "add", "newdir/new.py"),
    ),
}


@pytest.mark.parametrize("kind", sorted(MARKERLESS))
def test_a_conflict_without_markers_is_resolved_only_when_the_person_stages_it(tmp_path: Path, kind: str, capsys):
    base, up, fork, stage = MARKERLESS[kind]
    renames = (("olddir", "newdir"),) if kind == "file location" else ()
    pair = make_pair(tmp_path, base, up, fork, upstream_renames=renames)
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    assert code == 4 and [c["kind"] for c in cli_data(out)["conflicts"]] == [kind]
    worktree = Path(cli_data(out)["worktree"])
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 4 and "not resolved until you stage them" in err and kind in err
    assert git(worktree, "ls-files", "-u")  # still git's conflict
    subprocess.run(stage, cwd=worktree, check=True)
    code, out, _ = run_cli(capsys, "resume", "--repo", str(pair.repo), "--json")
    assert code == 0 and [c["resolution"] for c in cli_data(out)["conflicts"]] == ["person"]


@pytest.mark.slow
def test_file_directory_and_type_change_need_staging_of_every_path(tmp_path: Path, capsys) -> None:
    pair = every_kind_pair(tmp_path)
    (pair.repo / "ds4sync.yaml").write_text(
        yaml.safe_dump({"fork": {"branch": BRANCH}, "merge": {"rules": [{"glob": "**", "strategy": "ours"}]}})
    )
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--json")
    assert code == 4
    waiting = {c["path"] for c in cli_data(out)["conflicts"] if c["resolution"] == "unresolved"}
    assert waiting == {"fd~HEAD", "tc", "tc~HEAD"}  # no rule decides what a moved-aside path means
    worktree = Path(cli_data(out)["worktree"])
    git(worktree, "rm", "-q", "tc~HEAD")
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 4 and "fd~HEAD" in err and "tc (distinct types)" in err
    git(worktree, "add", "tc")
    git(worktree, "rm", "-q", "fd~HEAD")
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 0, err


def test_unstaged_edits_at_resume_are_refused_with_the_files_named(tmp_path: Path, capsys) -> None:
    pair = make_pair(
        tmp_path,
        {"f.py": lines("a"), "other.py": lines("o")},
        [{"f.py": lines("up")}],
        [{"f.py": lines("fork")}],
    )
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    worktree = Path(cli_data(out)["worktree"])
    (worktree / "f.py").write_text(lines("fork", "up"))
    (worktree / "other.py").write_text(lines("o", "a fix the person made"))
    (worktree / "notes.txt").write_text("new\n")
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 4 and "unstaged edits" in err and "other.py" in err and "notes.txt" in err
    assert git(worktree, "ls-files", "-u")  # nothing staged by the refusal
    git(worktree, "add", "other.py")
    os.unlink(worktree / "notes.txt")
    code, out, _ = run_cli(capsys, "resume", "--repo", str(pair.repo), "--json")
    assert code == 0
    assert "a fix the person made" in git(pair.repo, "show", f"{cli_data(out)['merge_commit']}:other.py")


# -- resolution memory with provenance --------------------------------------------------------


def store_config(tmp_path: Path) -> tuple[Path, Path]:
    profile = tmp_path / "profile"
    profile.mkdir()  # a profile names a folder that exists
    config = tmp_path / "ds4sync.yaml"
    config.write_text(yaml.safe_dump({"fork": {"branch": BRANCH}, "profile": str(profile)}))
    return config, profile / "patches" / "resolutions"


def nightly_clone(tmp_path: Path, pair: Pair, name: str) -> tuple[Path, str]:
    """A fresh clone of the fork (its own, empty rr-cache) with the upstream commit fetched."""
    clone = tmp_path / name
    git(tmp_path, "clone", "-q", str(pair.repo), str(clone))
    git(clone, "branch", BRANCH, f"origin/{BRANCH}")
    git(clone, "fetch", "-q", str(pair.upstream.path), "main")
    return clone, git(clone, "rev-parse", "FETCH_HEAD")


def two_variant_pair(tmp_path: Path) -> Pair:
    """Two files whose conflicts have the same rerere hash (same hunks) but different files: variants 0 and 1."""
    return make_pair(
        tmp_path,
        {"a.py": lines("A head", "x"), "b.py": lines("B head", "x")},
        [{"a.py": lines("A head", "up"), "b.py": lines("B head", "up")}],
        [{"a.py": lines("A head", "fork"), "b.py": lines("B head", "fork")}],
    )


@pytest.mark.slow
def test_numbered_variants_and_merge_abort_merge_reach_the_store_and_replay(tmp_path: Path, capsys) -> None:
    pair = two_variant_pair(tmp_path)
    config, store = store_config(tmp_path)
    args = ("--repo", str(pair.repo), "--config", str(config))
    assert run_cli(capsys, "merge", "upstream/main", *args)[0] == 4
    assert run_cli(capsys, "abort", *args)[0] == 0  # merge -> abort -> merge
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args, "--json")
    data = cli_data(out)
    ids = {
        c["path"]: c.get("conflict_id")
        for c in json.loads(Path(data["record"]).read_text())["results"]["merge"]["conflicts"]
    }
    assert ids["a.py"].split(".")[0] == ids["b.py"].split(".")[0] and ids["a.py"] != ids["b.py"]  # hash.N
    worktree = Path(data["worktree"])
    (worktree / "a.py").write_text(lines("A head", "fork", "up"))
    (worktree / "b.py").write_text(lines("B head", "up", "fork"))
    code, out, _ = run_cli(capsys, "resume", *args, "--json")
    assert code == 0
    record = json.loads(Path(cli_data(out)["record"]).read_text())
    stored = [c["stored_as"] for c in record["results"]["merge"]["conflicts"]]
    assert len(set(stored)) == 2 and all(Path(s).is_dir() for s in stored)
    assert sorted(p.name for p in store.iterdir()) == sorted(Path(s).name for s in stored)
    assert "2 resolutions recorded to the shared store" in record["phases"]["commit"]["message"]

    clone, upstream_sha = nightly_clone(tmp_path, pair, "nightly")
    code, out, err = run_cli(capsys, "merge", upstream_sha, "--repo", str(clone), "--config", str(config), "--json")
    assert code == 0, err
    data = cli_data(out)
    assert {(c["path"], c["resolution"]) for c in data["conflicts"]} == {("a.py", "recorded"), ("b.py", "recorded")}
    assert {Path(c["store_entry"]).name for c in data["conflicts"]} == {Path(s).name for s in stored}
    assert git(clone, "show", f"{data['merge_commit']}:a.py") + "\n" == lines("A head", "fork", "up")
    assert git(clone, "show", f"{data['merge_commit']}:b.py") + "\n" == lines("B head", "up", "fork")
    assert len(list(store.iterdir())) == 2  # replays add no entry


def test_a_stale_resolution_in_the_users_own_rr_cache_is_never_replayed(tmp_path: Path, capsys) -> None:
    pair = make_pair(tmp_path, {"f.py": lines("a")}, [{"f.py": lines("up")}], [{"f.py": lines("fork")}])
    # The user once resolved the same conflict, badly, with rerere on in their checkout.
    git(pair.repo, "config", "rerere.enabled", "true")
    git(pair.repo, "checkout", "-q", "-b", "scratch", BRANCH)
    subprocess.run(["git", "merge", "-q", "upstream/main"], cwd=pair.repo, capture_output=True)
    (pair.repo / "f.py").write_text(lines("STALE"))
    git(pair.repo, "add", "f.py")
    git(pair.repo, "commit", "-q", "--no-edit")
    git(pair.repo, "checkout", "-q", "main")
    rr_cache = pair.repo / ".git" / "rr-cache"
    before = sorted(str(p.relative_to(rr_cache)) for p in rr_cache.rglob("*"))
    assert any(p.endswith("postimage") for p in before)
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    data = cli_data(out)
    assert code == 4 and [c["resolution"] for c in data["conflicts"]] == ["unresolved"]
    assert "<<<<<<<" in (Path(data["worktree"]) / "f.py").read_text()
    assert sorted(str(p.relative_to(rr_cache)) for p in rr_cache.rglob("*")) == before  # the user's cache untouched


def test_a_recorded_postimage_with_markers_is_rejected_naming_its_store_path(tmp_path: Path, capsys) -> None:
    pair = make_pair(tmp_path, {"f.py": lines("a")}, [{"f.py": lines("up")}], [{"f.py": lines("fork")}])
    config, store = store_config(tmp_path)
    args = ("--repo", str(pair.repo), "--config", str(config))
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args, "--json")
    (Path(cli_data(out)["worktree"]) / "f.py").write_text(lines("fork", "up"))
    assert run_cli(capsys, "resume", *args)[0] == 0
    (entry,) = store.iterdir()
    (entry / "postimage").write_text(lines("<<<<<<< HEAD", "fork", "=======", "up", ">>>>>>> theirs"))
    clone, upstream_sha = nightly_clone(tmp_path, pair, "nightly")
    code, out, _ = run_cli(capsys, "merge", upstream_sha, "--repo", str(clone), "--config", str(config), "--json")
    data = cli_data(out)
    assert code == 4 and [c["resolution"] for c in data["conflicts"]] == ["unresolved"]
    record = json.loads(Path(data["record"]).read_text())
    assert str(entry / "postimage") in record["phases"]["merge"]["message"]


def test_rule_resolutions_are_never_stored_as_recorded(tmp_path: Path, capsys) -> None:
    pair = make_pair(tmp_path, {"f.txt": lines("a")}, [{"f.txt": lines("up")}], [{"f.txt": lines("fork")}])
    profile = tmp_path / "profile"
    profile.mkdir()  # a profile names a folder that exists
    config = tmp_path / "ds4sync.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "fork": {"branch": BRANCH},
                "profile": str(profile),
                "merge": {"rules": [{"glob": "*.txt", "strategy": "union"}]},
            }
        )
    )
    code, out, _ = run_cli(
        capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--config", str(config), "--json"
    )
    assert code == 0 and [c["resolution"] for c in cli_data(out)["conflicts"]] == ["rule"]
    store = profile / "patches" / "resolutions"
    assert not store.exists() or not list(store.iterdir())
    config.write_text(yaml.safe_dump({"fork": {"branch": BRANCH}, "profile": str(profile)}))  # the rule is gone
    clone, upstream_sha = nightly_clone(tmp_path, pair, "nightly")
    code, out, _ = run_cli(capsys, "merge", upstream_sha, "--repo", str(clone), "--config", str(config), "--json")
    assert code == 4 and [c["resolution"] for c in cli_data(out)["conflicts"]] == ["unresolved"]


# -- overlaps follow renames -------------------------------------------------------------------


def test_an_upstream_rename_plus_a_fork_edit_is_one_overlap_at_the_new_path(tmp_path: Path, capsys) -> None:
    body = [f"line {i}" for i in range(40)]
    pair = make_pair(
        tmp_path,
        {"pkg/old_name.py": lines(*body)},
        [],
        [{"pkg/old_name.py": lines(*body[:-1], "fork edit")}],
        upstream_renames=(("pkg/old_name.py", "pkg/new_name.py"),),
    )
    up = pair.upstream
    up.commit({"pkg/new_name.py": lines("upstream edit", *body[1:])}, "upstream edits the renamed file")
    git(pair.repo, "fetch", "-q", "upstream")
    code, out, _ = run_cli(capsys, "plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    assert code == 0
    assert cli_data(out)["overlaps"] == [
        {"path": "pkg/new_name.py", "upstream_lines": 2, "fork_lines": 2, "base_path": "pkg/old_name.py"}
    ]


def test_a_fork_rename_plus_an_upstream_edit_is_one_overlap_at_the_forks_path(tmp_path: Path, capsys) -> None:
    body = [f"line {i}" for i in range(40)]
    pair = make_pair(
        tmp_path,
        {"old.py": lines(*body)},
        [{"old.py": lines("upstream edit", *body[1:])}],
        [{"old.py": lines(*body[:-1], "fork edit")}],
        fork_renames=(("old.py", "new.py"),),
    )
    code, out, _ = run_cli(capsys, "plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    assert code == 0
    assert cli_data(out)["overlaps"] == [
        {"path": "new.py", "upstream_lines": 2, "fork_lines": 2, "base_path": "old.py"}
    ]


def test_gitrepo_blob_reading_ignores_a_leaked_git_dir(tmp_path: Path, monkeypatch) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("mine")}, [], [])
    other = make_pair(tmp_path / "other", {"a.py": lines("someone else's")}, [], [])
    head = git(pair.repo, "rev-parse", "HEAD")
    monkeypatch.setenv("GIT_DIR", str(other.repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other.repo))
    repo = GitRepo(pair.repo)
    assert repo.blob_bytes("HEAD", "a.py") == lines("mine").encode()
    assert repo.path == pair.repo.resolve() and repo.head() == head
    assert repo.git_dir == (pair.repo / ".git").resolve()


def test_the_report_says_recorded_exactly_for_the_new_store_entries(tmp_path: Path, capsys) -> None:
    pair = make_pair(
        tmp_path,
        {"f.py": lines("a"), "m.py": lines("m")},
        [{"f.py": lines("up"), "m.py": None}],
        [{"f.py": lines("fork"), "m.py": lines("m", "fork")}],
    )
    config, store = store_config(tmp_path)
    args = ("--repo", str(pair.repo), "--config", str(config))
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args, "--json")
    worktree = Path(cli_data(out)["worktree"])
    (worktree / "f.py").write_text(lines("fork", "up"))
    git(worktree, "rm", "-q", "m.py")  # a modify/delete: rerere has nothing to record
    code, out, err = run_cli(capsys, "resume", *args, "--json")
    assert code == 0, err
    record = json.loads(Path(cli_data(out)["record"]).read_text())
    report = Path(record["results"]["report"]["path"]).read_text()
    assert "Resolved by a person and recorded for the next sync (1): `f.py`" in report
    assert "not recordable by rerere" in report and "`m.py`" in report
    assert len(list(store.iterdir())) == 1
    assert "1 resolution" in record["phases"]["commit"]["message"]


def test_a_conflict_git_reports_only_in_its_messages_stops_for_a_person(tmp_path: Path, capsys) -> None:
    """A directory rename split: `git merge` fails, `git ls-files -u` is empty; it must not be committed unseen."""
    pair = make_pair(
        tmp_path,
        {"d/x.py": lines("x"), "d/y.py": lines("y")},
        [],
        [{"d/new.py": lines("the fork's new file")}],
    )
    up = pair.upstream.path
    (up / "e").mkdir()
    (up / "f").mkdir()
    git(up, "mv", "d/x.py", "e/x.py")
    git(up, "mv", "d/y.py", "f/y.py")
    git(up, "commit", "-q", "-m", "upstream splits d")
    git(pair.repo, "fetch", "-q", "upstream")
    args = ("--repo", str(pair.repo), "--branch", BRANCH, "--json")
    code, out, _ = run_cli(capsys, "plan", "upstream/main", *args)
    assert [(c["path"], c["kind"]) for c in cli_data(out)["conflicts"]] == [("d", "directory rename split")]
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args)
    data = cli_data(out)
    assert code == 4 and [(c["path"], c["resolution"]) for c in data["conflicts"]] == [("d", "unresolved")]
    assert git(Path(data["worktree"]), "ls-files", "-u") == ""  # git keeps no index record of it
    code, out, _ = run_cli(capsys, "resume", "--repo", str(pair.repo), "--json")
    assert code == 0 and [c["resolution"] for c in cli_data(out)["conflicts"]] == ["person"]


def test_a_submodule_conflict_is_named_and_resolved_by_staging_a_commit(tmp_path: Path, capsys) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [], [])
    up_sha, fork_sha = "3" * 40, "2" * 40
    gitlink(pair.upstream.path, "sub", up_sha)
    git(pair.upstream.path, "commit", "-q", "-m", "upstream moves sub")
    git(pair.repo, "checkout", "-q", BRANCH)
    gitlink(pair.repo, "sub", fork_sha)
    git(pair.repo, "commit", "-q", "-m", "fork moves sub")
    git(pair.repo, "checkout", "-q", "main")
    git(pair.repo, "fetch", "-q", "upstream")
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    data = cli_data(out)
    assert code == 4 and [(c["path"], c["kind"]) for c in data["conflicts"]] == [("sub", "submodule")]
    assert fork_sha[:12] in data["conflicts"][0]["hint"] and up_sha[:12] in data["conflicts"][0]["hint"]
    worktree = Path(data["worktree"])
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 4 and "sub (submodule)" in err
    git(worktree, "update-index", "--cacheinfo", f"160000,{fork_sha},sub")  # what the hint says
    code, out, _ = run_cli(capsys, "resume", "--repo", str(pair.repo), "--json")
    assert code == 0
    assert git(pair.repo, "ls-tree", cli_data(out)["merge_commit"], "sub").split()[2] == fork_sha
