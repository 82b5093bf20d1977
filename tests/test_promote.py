"""Promote moves the fork branch forward only to the commit the gates proved, and only if the fork did not move."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from ds4sync.cli import main
from ds4sync.core.git import GitRepo
from tests import faultrepo
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair


@pytest.fixture
def merged(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """A sync with no gate tier configured, every phase run (build and gates skipped: none configured)."""
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json"]) == 0
    data = cli_data(capsys.readouterr().out)
    assert main(["resume", "--repo", str(pair.repo)]) == 0
    return pair, data


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> faultrepo.Scenario:
    return faultrepo.build(tmp_path_factory.mktemp("promote-template") / "s")


@pytest.fixture
def gated(template: faultrepo.Scenario, tmp_path: Path) -> faultrepo.Scenario:
    """A sync with the ``unit`` tier configured, merged (stopped after verify, gates not run yet)."""
    s = faultrepo.copy(template, tmp_path / "s")
    assert main(["merge", "upstream/main", "--repo", str(s.repo)]) == 0
    return s


def _record(s: faultrepo.Scenario) -> tuple[Path, dict]:
    (path,) = s.state.glob("runs/*/record.json")
    return path, json.loads(path.read_text())


def test_ungated_promote_is_refused_unless_allowed_and_then_recorded(merged, capsys) -> None:
    pair, data = merged
    old = git.Repo(pair.fork.path).commit(BRANCH).hexsha
    capsys.readouterr()
    assert main(["promote", "--repo", str(pair.repo)]) == 2
    assert "no gate tier is configured for promotion" in capsys.readouterr().err
    assert git.Repo(pair.fork.path).commit(BRANCH).hexsha == old
    assert main(["promote", "--repo", str(pair.repo), "--allow-ungated"]) == 0
    assert "PROMOTED UNGATED" in capsys.readouterr().err
    assert git.Repo(pair.fork.path).commit(BRANCH).hexsha == data["merge_commit"]
    assert git.Repo(pair.fork.path).git.rev_parse(f"refs/ds4sync/rollback/{data['run_id']}") == old
    record = json.loads(Path(data["record"]).read_text())
    assert record["results"]["promote"]["new_head"] == data["merge_commit"]
    assert record["results"]["promote"]["ungated"] is True
    assert any("PROMOTED UNGATED" in note for note in record["notes"])
    report = Path(record["state_dir"]) / "runs" / record["run_id"] / "report.md"
    assert main(["report", "--repo", str(pair.repo), "--out", str(report)]) == 0
    assert "PROMOTED UNGATED" in report.read_text()


def test_promote_refuses_when_the_gates_have_not_run(gated: faultrepo.Scenario, capsys) -> None:
    fork = GitRepo(gated.repo)
    old = fork.branch_head(faultrepo.BRANCH)
    capsys.readouterr()
    assert main(["promote", "--repo", str(gated.repo)]) == 2
    assert "required tier 'unit' has not run" in capsys.readouterr().err
    # --allow-blockers overrides failures, never a missing proof.
    assert main(["promote", "--repo", str(gated.repo), "--allow-blockers"]) == 2
    assert fork.branch_head(faultrepo.BRANCH) == old


@pytest.mark.slow
def test_promote_takes_exactly_the_commit_the_gates_ran_on(gated: faultrepo.Scenario, capsys) -> None:
    repo = str(gated.repo)
    assert main(["resume", "--repo", repo]) == 0
    _, record = _record(gated)
    worktree = GitRepo(record["worktree"])
    gated_head = worktree.head()
    (worktree.path / "late.py").write_text("LATE = 1\n")
    worktree.run("add", "late.py")
    late = worktree.commit("a commit after the gates\n")
    capsys.readouterr()
    assert main(["promote", "--repo", repo]) == 2
    err = capsys.readouterr().err
    assert f"moved after the gates ran on {gated_head[:12]}: 1 new commit(s): {late[:7]}" in err
    assert "a commit after the gates" in err
    assert GitRepo(gated.repo).branch_head(faultrepo.BRANCH) != late
    # resume proves the new head (verify and gates again), then promote takes it.
    assert main(["resume", "--repo", repo]) == 0
    _, record = _record(gated)
    assert {g["commit"] for g in record["results"]["gates"]["unit"]["gates"]} == {late}
    assert main(["promote", "--repo", repo]) == 0
    assert GitRepo(gated.repo).branch_head(faultrepo.BRANCH) == late


def _next(repo: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["status", "--repo", repo]) == 0
    out = " ".join(capsys.readouterr().out.split())
    return out[out.index("next: ") :]


@pytest.mark.slow
def test_resume_refuses_a_fix_no_commit_holds_and_status_says_so(gated: faultrepo.Scenario, capsys) -> None:
    """A person fixes a failed gate in the sync worktree and does not commit: resume refuses in one line (what,
    where, how), gates nothing and says nothing is done; status asks for the commit, never for promote; after
    the commit resume proves it and promote takes it."""
    repo = str(gated.repo)
    _, record = _record(gated)
    worktree = GitRepo(record["worktree"])
    (worktree.path / "pkg" / "core.py").write_text("def core():\n    return 3\n")
    worktree.run("add", "pkg/core.py")
    worktree.commit("break core\n")
    assert main(["resume", "--repo", repo]) == 1  # the pytest gate fails
    (worktree.path / "pkg" / "core.py").write_text("def core():\n    return 2  # fixed, not committed\n")
    (worktree.path / "pkg" / "new.py").write_text("NEW = 1\n")
    capsys.readouterr()
    assert main(["resume", "--repo", repo]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "the sync worktree has changes no commit holds (pkg/core.py, pkg/new.py)" in err
    assert str(worktree.path) in err and "commit" in err
    _, after = _record(gated)
    assert after["status"] == "failed" and after["phases"]["gate"]["status"] == "failed"  # nothing gated
    step = _next(repo, capsys)
    assert "commit what the worktree has that no commit holds (pkg/core.py, pkg/new.py)" in step
    assert "promote" not in step
    assert main(["promote", "--repo", repo]) == 2
    worktree.run("add", "-A")
    fixed = worktree.commit("fix core\n")
    assert main(["resume", "--repo", repo]) == 0
    assert "`ds4sync promote` to fast-forward" in _next(repo, capsys)
    assert main(["promote", "--repo", repo]) == 0
    assert GitRepo(gated.repo).branch_head(faultrepo.BRANCH) == fixed


def test_status_says_promote_only_when_promote_takes_the_run(gated: faultrepo.Scenario, capsys) -> None:
    """A done run whose sync branch moved after the gates (a commit added without resume): status names
    promote's own blocker instead of sending the person to promote, and promote refuses on it."""
    repo = str(gated.repo)
    assert main(["resume", "--repo", repo]) == 0
    _, record = _record(gated)
    worktree = GitRepo(record["worktree"])
    (worktree.path / "pkg" / "later.py").write_text("LATER = 1\n")
    worktree.run("add", "pkg/later.py")
    worktree.commit("a commit after the gates\n")
    step = _next(repo, capsys)
    assert step.startswith("next: `ds4sync promote` would refuse: the sync branch moved after the gates ran on")
    capsys.readouterr()
    assert main(["status", "--repo", repo, "--json"]) == 0
    blockers = cli_data(capsys.readouterr().out)["promote_blockers"]
    assert main(["promote", "--repo", repo]) == 2
    refused = " ".join(capsys.readouterr().err.split())
    assert blockers and all(" ".join(b.split()) in refused for b in blockers)


@pytest.mark.slow
def test_failed_gate_blocks_then_resume_after_the_fix_goes_on(gated: faultrepo.Scenario, capsys) -> None:
    repo = str(gated.repo)
    _, record = _record(gated)
    worktree = GitRepo(record["worktree"])
    (worktree.path / "pkg" / "core.py").write_text("def core():\n    return 3\n")
    worktree.run("add", "pkg/core.py")
    worktree.commit("break core\n")
    assert main(["resume", "--repo", repo]) == 1  # the pytest gate fails
    capsys.readouterr()
    assert main(["promote", "--repo", repo]) == 2
    assert "required gate unit/unit-tests is failed" in capsys.readouterr().err
    (worktree.path / "pkg" / "core.py").write_text("def core():\n    return 2\n")
    worktree.run("add", "pkg/core.py")
    fixed = worktree.commit("fix core\n")
    assert main(["resume", "--repo", repo]) == 0  # a failed run goes on after the fix
    assert main(["promote", "--repo", repo]) == 0
    assert GitRepo(gated.repo).branch_head(faultrepo.BRANCH) == fixed


@pytest.mark.slow
def test_allow_blockers_promotes_a_failed_gate_on_the_proven_commit(gated: faultrepo.Scenario, capsys) -> None:
    repo = str(gated.repo)
    _, record = _record(gated)
    worktree = GitRepo(record["worktree"])
    (worktree.path / "pkg" / "core.py").write_text("def core():\n    return 3\n")
    worktree.run("add", "pkg/core.py")
    broken = worktree.commit("break core\n")
    assert main(["resume", "--repo", repo]) == 1
    assert main(["promote", "--repo", repo, "--allow-blockers"]) == 0
    _, record = _record(gated)
    assert GitRepo(gated.repo).branch_head(faultrepo.BRANCH) == broken
    assert "promoted despite: " in record["notes"][-1] and "unit/unit-tests is failed" in record["notes"][-1]


def test_promote_refuses_when_fork_moved(merged, capsys: pytest.CaptureFixture[str]) -> None:
    pair, _ = merged
    pair.fork.checkout(BRANCH)
    moved = pair.fork.commit({"c.py": lines("c")}, "someone pushed to the fork")
    pair.fork.checkout("main")
    assert main(["promote", "--repo", str(pair.repo), "--allow-ungated"]) == 2
    assert "moved since the run started" in capsys.readouterr().err
    assert git.Repo(pair.fork.path).commit(BRANCH).hexsha == moved


def test_promote_refuses_a_dirty_checkout_of_the_branch_naming_its_files(
    merged, capsys: pytest.CaptureFixture[str]
) -> None:
    pair, _ = merged
    pair.fork.checkout(BRANCH)
    head = git.Repo(pair.fork.path).head.commit.hexsha
    (pair.repo / "b.py").write_text("edited by hand\n")
    assert main(["promote", "--repo", str(pair.repo), "--allow-ungated"]) == 2
    err = capsys.readouterr().err
    assert "uncommitted changes: b.py" in err and "is checked out in" in err
    assert git.Repo(pair.fork.path).commit(BRANCH).hexsha == head  # the branch did not move
    assert (pair.repo / "b.py").read_text() == "edited by hand\n"  # nothing of the person's is lost


@pytest.mark.slow
def test_promote_again_says_already_promoted(gated: faultrepo.Scenario, capsys) -> None:
    repo = str(gated.repo)
    assert main(["resume", "--repo", repo]) == 0
    assert main(["promote", "--repo", repo]) == 0
    capsys.readouterr()
    assert main(["promote", "--repo", repo]) == 0
    assert "already promoted at" in capsys.readouterr().out


NEEDS_DATA = """from pathlib import Path


def test_needs_the_data_file():
    assert (Path(__file__).parent.parent / {name!r}).read_text() == "ok"
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", ["data/needed.txt", "data/sub dir/-needed*[1].txt"])
@pytest.mark.parametrize("then", ["commit", "delete"])
def test_a_green_that_needed_an_untracked_file_proves_no_commit(
    gated: faultrepo.Scenario, capsys: pytest.CaptureFixture[str], name: str, then: str
) -> None:
    """A committed test reads a file nobody committed (a forgotten `git add`): resume refuses to gate a tree no
    commit has, naming the file, and promote leaves the fork alone; once the file is committed resume proves the
    new head, and once it is deleted resume gates again and the test fails. Ignored files (the .gitignore'd
    __pycache__ the gates write) are no part of either tree."""
    repo = str(gated.repo)
    _, record = _record(gated)
    worktree = GitRepo(record["worktree"])
    (worktree.path / "tests" / "test_data.py").write_text(NEEDS_DATA.format(name=name))
    worktree.run("add", "tests/test_data.py")
    worktree.commit("a test that reads a data file\n")
    data = worktree.path / name
    data.parent.mkdir(parents=True)
    data.write_text("ok")
    fork_before = GitRepo(gated.repo).branch_head(faultrepo.BRANCH)
    capsys.readouterr()
    assert main(["resume", "--repo", repo]) == 2  # the gates would see a file no commit has: refused
    assert f"changes no commit holds ({name})" in " ".join(capsys.readouterr().err.split())
    assert main(["promote", "--repo", repo]) == 2
    assert GitRepo(gated.repo).branch_head(faultrepo.BRANCH) == fork_before
    if then == "commit":
        worktree.run("add", "--", name)
        added = worktree.commit("add the data file\n")
        assert main(["resume", "--repo", repo]) == 0
        assert main(["promote", "--repo", repo]) == 0
        assert GitRepo(gated.repo).branch_head(faultrepo.BRANCH) == added
        assert GitRepo(gated.repo).out("show", f"{added}:{name}") == "ok"
    else:
        data.unlink()
        assert main(["resume", "--repo", repo]) == 1  # gated again on the head's own tree: the test fails
        capsys.readouterr()
        assert main(["promote", "--repo", repo]) == 2
        assert "required gate unit/unit-tests is failed" in capsys.readouterr().err
        assert GitRepo(gated.repo).branch_head(faultrepo.BRANCH) == fork_before


def test_what_promote_leaves_in_the_sync_worktree_is_named(gated: faultrepo.Scenario, capsys) -> None:
    """Changes made after the gates, not committed, are in no commit: promote takes the proven commit, and says
    which paths it left behind (an edit of a tracked file and a new untracked one; ignored caches are not named)."""
    repo = str(gated.repo)
    assert main(["resume", "--repo", repo]) == 0
    _, record = _record(gated)
    worktree = GitRepo(record["worktree"])
    proven = worktree.head()
    (worktree.path / "pkg" / "core.py").write_text("def core():\n    return 99  # after the gates\n")
    (worktree.path / "notes.txt").write_text("a new file\n")
    capsys.readouterr()
    assert main(["promote", "--repo", repo]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "2 changed or untracked path(s) in the sync worktree were not promoted" in err
    assert "notes.txt, pkg/core.py" in err and "__pycache__" not in err
    _, record = _record(gated)
    assert record["results"]["promote"]["left_behind"] == ["notes.txt", "pkg/core.py"]
    assert GitRepo(gated.repo).branch_head(faultrepo.BRANCH) == proven
    assert "not promoted, left in the sync worktree: notes.txt, pkg/core.py" in record["notes"]
