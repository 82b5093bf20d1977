"""The merge phase on real repositories: conflict kinds, resolutions, plan vs merge, commit."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest
import yaml

from ds4sync.cli import main
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair

ALL_KINDS_BASE = {
    "content.py": lines("a", "b", "c"),
    "modified_in_fork.py": lines("x"),
    "deleted_in_fork.py": lines("y"),
    "renamed.py": lines("r1", "r2", "r3"),
    "renamed_both.py": lines("s1", "s2", "s3"),
    "blob.bin": b"\x00\x01base",
    "overlap.py": lines("1", "2", "3", "4", "5", "6", "7", "8"),
}


def all_kinds_pair(tmp_path: Path):
    return make_pair(
        tmp_path,
        ALL_KINDS_BASE,
        upstream_changes=[
            {
                "content.py": lines("a", "UPSTREAM", "c"),
                "added_both.py": lines("upstream version"),
                "modified_in_fork.py": None,
                "deleted_in_fork.py": lines("y", "upstream edit"),
                "renamed.py": None,
                "blob.bin": b"\x00\x02upstream",
                "overlap.py": lines("1 upstream", "2", "3", "4", "5", "6", "7", "8"),
            }
        ],
        fork_changes=[
            {
                "content.py": lines("a", "FORK", "c"),
                "added_both.py": lines("fork version"),
                "modified_in_fork.py": lines("x", "fork edit"),
                "deleted_in_fork.py": None,
                "renamed.py": lines("r1", "r2", "r3", "fork edit"),
                "blob.bin": b"\x00\x03fork",
                "overlap.py": lines("1", "2", "3", "4", "5", "6", "7", "8 fork"),
            }
        ],
        upstream_renames=(("renamed_both.py", "renamed_up.py"),),
        fork_renames=(("renamed_both.py", "renamed_fork.py"),),
    )


EXPECTED_KINDS = {
    "content.py": "content",
    "added_both.py": "add/add",
    "modified_in_fork.py": "modify/delete",
    "deleted_in_fork.py": "delete/modify",
    "renamed.py": "modify/delete",
    "blob.bin": "binary",
    "renamed_fork.py": "rename/rename",
    "renamed_up.py": "rename/rename",
}


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_plan_names_every_conflict_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = all_kinds_pair(tmp_path)
    code, out, _ = run_cli(capsys, "plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    assert code == 0
    data = cli_data(out)
    kinds = {c["path"]: c["kind"] for c in data["conflicts"]}
    for path, kind in EXPECTED_KINDS.items():
        assert kinds[path] == kind, path
    assert data["overlaps"] == [{"path": "overlap.py", "upstream_lines": 2, "fork_lines": 2}]
    assert data["upstream_commits"] == 2 and data["fork_commits"] == 2
    assert data["merge_base"] == pair.base


def test_rename_delete_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = make_pair(
        tmp_path,
        {"old.py": lines("1", "2", "3")},
        upstream_changes=[{"old.py": None}],
        fork_changes=[],
        fork_renames=(("old.py", "new.py"),),
    )
    code, out, _ = run_cli(capsys, "plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    assert code == 0
    assert [c["kind"] for c in cli_data(out)["conflicts"]] == ["rename/delete"]


def test_plan_predicts_exactly_what_merge_finds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = all_kinds_pair(tmp_path)
    repo_args = ("--repo", str(pair.repo), "--branch", BRANCH, "--json")
    _, planned, _ = run_cli(capsys, "plan", "upstream/main", *repo_args)
    code, merged, _ = run_cli(capsys, "merge", "upstream/main", *repo_args)
    assert code == 4  # nothing resolves these: a person must act
    plan, merge = cli_data(planned), cli_data(merged)
    for key in ("upstream_sha", "fork_sha", "merge_base", "upstream_commits", "fork_commits", "overlaps"):
        assert plan[key] == merge[key], key
    assert [(c["path"], c["kind"]) for c in plan["conflicts"]] == [(c["path"], c["kind"]) for c in merge["conflicts"]]
    assert all(c["resolution"] == "unresolved" for c in merge["conflicts"])
    worktree = git.Repo(merge["worktree"])
    unmerged = set(worktree.git.diff("--name-only", "--diff-filter=U").split())
    assert unmerged == {c["path"] for c in merge["conflicts"]}


def test_merge_never_touches_fork_branch_or_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    fork_head = git.Repo(pair.fork.path).commit(BRANCH).hexsha
    checkout_head = pair.fork.head()
    (pair.repo / "untracked.txt").write_text("mine\n")
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    assert code == 0
    data = cli_data(out)
    assert git.Repo(pair.fork.path).commit(BRANCH).hexsha == fork_head
    assert pair.fork.head() == checkout_head and git.Repo(pair.fork.path).active_branch.name == "main"
    assert (pair.repo / "untracked.txt").read_text() == "mine\n"
    merge_commit = git.Repo(pair.fork.path).commit(data["merge_commit"])
    assert [p.hexsha for p in merge_commit.parents] == [fork_head, data["upstream_sha"]]
    assert data["upstream_sha"][:12] in merge_commit.message and BRANCH in merge_commit.message
    assert "Upstream commits brought in: 1" in merge_commit.message
    assert git.Repo(pair.fork.path).git.rev_parse(f"refs/ds4sync/backup/{data['run_id']}") == fork_head


def test_rules_ours_theirs_union(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = {
        "keep/a.py": lines("a"),
        "take/b.py": lines("b"),
        "both/c.txt": lines("c"),
        "gone/d.py": lines("d"),
        "picked.py": lines("1", "2", "3", "4", "5", "6", "7", "8"),
        "overlap.py": lines("1", "2", "3", "4", "5", "6", "7", "8"),
    }
    pair = make_pair(
        tmp_path,
        base,
        [
            {
                "keep/a.py": lines("a up"),
                "take/b.py": lines("b up"),
                "both/c.txt": lines("c up"),
                "gone/d.py": None,
                "picked.py": lines("1 fix", "2", "3", "4", "5", "6", "7", "8 later"),
                "overlap.py": lines("1 up", "2", "3", "4", "5", "6", "7", "8"),
            }
        ],
        [
            {
                "keep/a.py": lines("a fork"),
                "take/b.py": lines("b fork"),
                "both/c.txt": lines("c fork"),
                "gone/d.py": lines("d fork"),
                # the fork cherry-picked upstream's first fix; upstream then changed more
                "picked.py": lines("1 fix", "2", "3", "4", "5", "6", "7", "8"),
                "overlap.py": lines("1", "2", "3", "4", "5", "6", "7", "8 fork"),
            }
        ],
    )
    config = {
        "fork": {"branch": BRANCH},
        "merge": {
            "rules": [
                {"glob": "keep/*", "strategy": "ours"},
                {"glob": "take/*", "strategy": "theirs"},
                {"glob": "both/*", "strategy": "union"},
                {"glob": "gone/*", "strategy": "theirs"},
            ]
        },
    }
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump(config))
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--json")
    assert code == 0, out
    data = cli_data(out)
    assert {c["path"]: c["resolution"] for c in data["conflicts"]} == {
        "keep/a.py": "rule",
        "take/b.py": "rule",
        "both/c.txt": "rule",
        "gone/d.py": "rule",
    }
    merged = git.Repo(pair.fork.path).commit(data["merge_commit"])
    assert merged.tree["keep/a.py"].data_stream.read().decode() == lines("a fork")
    assert merged.tree["take/b.py"].data_stream.read().decode() == lines("b up")
    assert merged.tree["both/c.txt"].data_stream.read().decode() == lines("c fork", "c up")
    assert "gone/d.py" not in {b.path for b in merged.tree.traverse()}
    assert set(data["remerge_diff_paths"]) == {"keep/a.py", "take/b.py", "both/c.txt", "gone/d.py"}
    # what each resolution kept, read from the blobs of the merge commit
    kept = {c["path"]: c["kept"] for c in data["conflicts"]}
    assert kept == {"keep/a.py": "ours", "take/b.py": "theirs", "both/c.txt": "both", "gone/d.py": "deleted"}
    folded = {o["path"]: o.get("equals_upstream", False) for o in data["overlaps"]}
    assert folded == {"picked.py": True, "overlap.py": False}


def test_person_resolution_is_recorded_and_replayed_in_a_fresh_clone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = make_pair(
        tmp_path,
        {"envs.py": lines("A = 1")},
        [{"envs.py": lines("A = 1", "UP = 2")}],
        [{"envs.py": lines("A = 1", "FORK = 3")}],
    )
    profile = tmp_path / "profile"
    profile.mkdir()  # a profile names a folder that exists
    config = tmp_path / "ds4sync.yaml"
    config.write_text(yaml.safe_dump({"fork": {"branch": BRANCH}, "profile": str(profile)}))
    args = ("--repo", str(pair.repo), "--config", str(config), "--json")
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args)
    assert code == 4
    worktree = Path(cli_data(out)["worktree"])
    resolved = lines("A = 1", "FORK = 3", "UP = 2")
    (worktree / "envs.py").write_text(resolved)
    code, out, _ = run_cli(capsys, "resume", *args)
    assert code == 0, out
    assert [c["resolution"] for c in cli_data(out)["conflicts"]] == ["person"]
    assert len(list((profile / "patches" / "resolutions").iterdir())) == 1

    # The nightly job's own clone: empty rr-cache, the same conflict, the shared store.
    nightly = git.Repo.clone_from(str(pair.repo), str(tmp_path / "nightly"))
    nightly.git.branch(BRANCH, f"origin/{BRANCH}")
    nightly.git.fetch("-q", str(pair.upstream.path), "main")
    upstream_sha = nightly.git.rev_parse("FETCH_HEAD")
    assert not (Path(nightly.git_dir) / "rr-cache").exists()
    code, out, err = run_cli(
        capsys, "merge", upstream_sha, "--repo", str(tmp_path / "nightly"), "--config", str(config), "--json"
    )
    assert code == 0, err
    data = cli_data(out)
    assert [(c["path"], c["resolution"]) for c in data["conflicts"]] == [("envs.py", "recorded")]
    assert nightly.commit(data["merge_commit"]).tree["envs.py"].data_stream.read().decode() == resolved


def test_resume_refuses_leftover_markers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = make_pair(tmp_path, {"f.py": lines("a")}, [{"f.py": lines("up")}], [{"f.py": lines("fork")}])
    args = ("--repo", str(pair.repo), "--branch", BRANCH)
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args, "--json")
    worktree = Path(cli_data(out)["worktree"])
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 4
    assert "conflict markers remain" in err and "f.py" in err and len(err.strip().splitlines()) == 1
    assert "<<<<<<<" in (worktree / "f.py").read_text()  # nothing was changed
    (worktree / "f.py").write_text(lines("fork", "up"))
    code, _, _ = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 0
    code, out, _ = run_cli(capsys, "status", "--repo", str(pair.repo), "--json")
    assert cli_data(out)["status"] == "done"


def test_abort_restores_everything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = make_pair(tmp_path, {"f.py": lines("a")}, [{"f.py": lines("up")}], [{"f.py": lines("fork")}])
    before_refs = git.Repo(pair.fork.path).git.for_each_ref("refs/heads")
    fork_head = git.Repo(pair.fork.path).commit(BRANCH).hexsha
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json")
    data = cli_data(out)
    assert code == 4 and Path(data["worktree"]).exists()
    code, out, _ = run_cli(capsys, "abort", "--repo", str(pair.repo))
    assert code == 0 and "aborted" in out
    assert not Path(data["worktree"]).exists()
    assert git.Repo(pair.fork.path).git.for_each_ref("refs/heads") == before_refs
    assert git.Repo(pair.fork.path).commit(BRANCH).hexsha == fork_head
    assert git.Repo(pair.fork.path).git.rev_parse(f"refs/ds4sync/backup/{data['run_id']}") == fork_head
    assert git.Repo(pair.fork.path).git.worktree("list").count("\n") == 0
    code, _, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 4  # a new run may start again after the abort; it stops on the same conflict


def test_rule_that_cannot_apply_falls_through_to_the_next(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = make_pair(
        tmp_path,
        {"a.py": lines("a"), "b.py": lines("b")},
        [{"a.py": lines("a up"), "b.py": None}],
        [{"a.py": lines("a fork"), "b.py": lines("b fork")}],
    )
    config = {
        "fork": {"branch": BRANCH},
        "merge": {"rules": [{"glob": "*", "strategy": "union"}, {"glob": "*.py", "strategy": "ours"}]},
    }
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump(config))
    code, out, _ = run_cli(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--json")
    assert code == 0
    conflicts = {c["path"]: c for c in cli_data(out)["conflicts"]}
    assert conflicts["a.py"]["kind"] == "content" and conflicts["b.py"]["kind"] == "modify/delete"
    record = json.loads((Path(cli_data(out)["record"])).read_text())["results"]["merge"]
    rules = {c["path"]: c["rule"] for c in record["conflicts"]}
    assert rules == {"a.py": "* -> union", "b.py": "*.py -> ours"}
    merged = git.Repo(pair.fork.path).commit(cli_data(out)["merge_commit"])
    assert merged.tree["b.py"].data_stream.read().decode() == lines("b fork")


def test_second_run_for_the_same_upstream_names_the_owner_of_the_sync_branch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    args = ("--repo", str(pair.repo), "--branch", BRANCH)
    assert run_cli(capsys, "merge", "upstream/main", *args, "--json")[0] == 0
    code, _, err = run_cli(capsys, "merge", "upstream/main", *args)
    assert code == 4 and "is still paused" in err and "ds4sync resume" in err  # merged; later phases remain
    assert run_cli(capsys, "resume", "--repo", str(pair.repo))[0] == 0
    code, _, err = run_cli(capsys, "merge", "upstream/main", *args)
    assert code == 2 and "already exists: run" in err and "ds4sync abort --run" in err
    code, _, err = run_cli(capsys, "abort", "--repo", str(pair.repo))  # finished, unpromoted: not without --yes
    assert code == 2 and "never promoted" in err and "--yes" in err
    assert run_cli(capsys, "abort", "--repo", str(pair.repo), "--yes")[0] == 0
    assert run_cli(capsys, "merge", "upstream/main", *args)[0] == 0


def test_a_sync_branch_left_by_a_promoted_run_gets_a_way_on_that_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fork branch moved back by hand after a promote: the next merge of the same upstream meets the promoted
    run's sync branch. Abort refuses a promoted run, so the fix names the git commands; the first one given works."""
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    args = ("--repo", str(pair.repo), "--branch", BRANCH)
    before = git.Repo(pair.fork.path).commit(BRANCH).hexsha
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args, "--json")
    assert code == 0
    run_id, branch = cli_data(out)["run_id"], cli_data(out)["sync_branch"]
    assert run_cli(capsys, "resume", "--repo", str(pair.repo))[0] == 0
    code, _, err = run_cli(capsys, "merge", "upstream/main", *args)  # done, not promoted
    assert code == 2 and f"`ds4sync promote --run {run_id}`" in err
    assert run_cli(capsys, "promote", "--repo", str(pair.repo), "--allow-ungated")[0] == 0
    git.Repo(pair.fork.path).git.branch("-f", BRANCH, before)  # a person moves the fork branch back
    code, _, err = run_cli(capsys, "merge", "upstream/main", *args)
    assert code == 2 and f"run {run_id} (promoted)" in err and "ds4sync abort" not in err, err
    keep = f"git branch -m {branch} {branch}-{run_id}"
    assert f"`{keep}`" in err and f"`git branch -D {branch}`" in err
    git.Repo(pair.fork.path).git.branch("-m", branch, f"{branch}-{run_id}")  # the fix, as printed
    assert run_cli(capsys, "merge", "upstream/main", *args)[0] == 0


def test_tables_sent_to_a_pipe_keep_every_character(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Output to a pipe or file has no width: a long path in a table stays whole (rich assumes 80 columns)."""
    monkeypatch.delenv("COLUMNS", raising=False)  # no width asked for (pytest-xdist's workers set 80)
    deep = "vllm/model_executor/layers/fused_moe/deepseek_v4_sm120_sparse_attention_decode_kernels_registry.py"
    pair = make_pair(tmp_path, {deep: lines("a")}, [{deep: lines("upstream")}], [{deep: lines("fork")}])
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump({"fork": {"branch": BRANCH}}))
    code, out, _ = run_cli(capsys, "plan", "upstream/main", "--repo", str(pair.repo))
    assert code == 0 and deep in out, out
