"""patches new / check / list, backport, and a patch whose preimage is unknown (rejected hunks)."""

from __future__ import annotations

from pathlib import Path

import git
import pytest
import yaml

from ds4sync.cli import main
from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.patchsets.model import load_patchset
from tests.cli_json import data as cli_data

from .scenario import MOE, MOE_BOUNDS, REFACTORED, Scenario, add_patchsets, attention, build_repos


@pytest.fixture
def sc(tmp_path: Path) -> Scenario:
    return build_repos(tmp_path)


def test_patches_new_captures_commits_with_scaffolded_invariants(sc: Scenario, capsys) -> None:
    rev_range = f"{sc.shas['base']}..carry-bounds"
    code = main(["patches", "new", "bounds-check", "--from", rev_range, "--repo", str(sc.fork.path), "--json"])
    created = cli_data(capsys.readouterr().out)
    assert code == 0 and created["id"] == "bounds-check" and Path(created["folder"]) == sc.patches / "bounds-check"
    assert [Path(p).name for p in created["patches"]] == ["0001-SM120-Token-ID-bounds-in-route.patch"]
    ps = load_patchset(sc.patches / "bounds-check")
    assert ps.title == "[SM120] Token-ID bounds in route()" and ps.kind == "fork-feature"
    assert ps.patches == ("0001-SM120-Token-ID-bounds-in-route.patch",)
    assert ps.owner == "ds4sync demo <demo@ds4sync.invalid>"
    [inv] = ps.invariants
    assert inv.kind == "contains" and inv.files == ("vllm/moe.py",)
    assert inv.pattern == r"if\ token_id\ <\ 0\ or\ token_id\ >=\ rows:"
    # the scaffolded invariant fails before the carry and holds after it
    capsys.readouterr()
    assert main(["patches", "check", "--repo", str(sc.fork.path), "--json"]) == 1
    data = cli_data(capsys.readouterr().out)
    assert data["patchsets"][0]["status"] == "violated" and data["counts"]["violated"] == 1
    sc.fork.checkout("carry-bounds")
    assert main(["patches", "check", "--repo", str(sc.fork.path), "--json"]) == 0
    assert cli_data(capsys.readouterr().out)["patchsets"][0]["status"] == "holds"
    # the same id again is refused, naming the folder
    assert main(["patches", "new", "bounds-check", "--from", rev_range, "--repo", str(sc.fork.path)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_patches_new_rejects_a_single_rev(sc: Scenario, capsys) -> None:
    assert main(["patches", "new", "x", "--from", "HEAD", "--repo", str(sc.fork.path)]) == 2
    assert "is not a range" in capsys.readouterr().err
    assert not (sc.patches / "x").exists()


def test_patches_list_and_check_with_upstream_report_landed(sc: Scenario, capsys) -> None:
    add_patchsets(sc)
    assert main(["patches", "list", "--repo", str(sc.fork.path), "--json"]) == 0
    listed = [ps["id"] for ps in cli_data(capsys.readouterr().out)["patchsets"]]
    assert listed.index("sparse-decode") < listed.index("softcap")
    code = main(["patches", "check", "--repo", str(sc.fork.path), "--upstream", sc.shas["upstream"], "--json"])
    data = cli_data(capsys.readouterr().out)
    status = {ps["id"]: ps["status"] for ps in data["patchsets"]}
    assert status["flashinfer-0618"] == "landed-upstream" and status["larger-scratch"] == "landed-upstream"
    assert status["sparse-decode"] == "holds" and status["bounds-check"] == "violated"
    assert code == 1


def test_check_runs_on_a_plain_folder(tmp_path: Path, sc: Scenario, capsys) -> None:
    add_patchsets(sc)
    folder = tmp_path / "tarball"
    (folder / "vllm").mkdir(parents=True)
    (folder / "vllm" / "moe.py").write_text(MOE_BOUNDS)
    (folder / "vllm" / "__init__.py").write_text("")
    code = main(["patches", "check", "--repo", str(folder), "--profile", str(sc.profile), "--json"])
    data = cli_data(capsys.readouterr().out)
    assert {ps["id"]: ps["status"] for ps in data["patchsets"]}["bounds-check"] == "holds"
    assert code == 1  # the other features are missing from this folder


def test_backport_cherry_picks_into_the_sync_worktree(sc: Scenario, capsys) -> None:
    assert main(["merge", sc.shas["upstream"], "--repo", str(sc.fork.path)]) == 0
    ws_record = cli_data(_status(sc, capsys))
    fix = sc.upstream.commit({"vllm/moe.py": MOE.replace("% 7", "% 11")}, "[Bugfix] route modulo (#53000)")
    git.Repo(sc.fork.path).git.fetch("-q", "upstream")
    capsys.readouterr()
    assert main(["backport", fix, "--id", "route-modulo", "--repo", str(sc.fork.path)]) == 0, capsys.readouterr().err
    wt = GitRepo(ws_record["worktree"])
    assert "(cherry picked from commit " + fix in wt.message("HEAD")
    assert "Patch-set: route-modulo" in wt.message("HEAD")
    data = yaml.safe_load((sc.patches / "route-modulo" / "patchset.yaml").read_text())
    assert data["kind"] == "backport"
    assert data["upstream"] == {"repo": "demo/upstream", "pr": 53000, "commit": fix}
    assert data["drop_when"] == {"upstream_has_commit": fix}
    assert len(data["patches"]) == 1 and (sc.patches / "route-modulo" / data["patches"][0]).is_file()


def test_backport_conflict_changes_nothing(sc: Scenario, capsys) -> None:
    assert main(["merge", sc.shas["upstream"], "--repo", str(sc.fork.path)]) == 0
    record = cli_data(_status(sc, capsys))
    other = "\n    def _forward_paged(self, q, kv):\n        return self._attend(q, kv)\n"
    clash = sc.upstream.commit({"vllm/attention.py": attention(REFACTORED, extra=other)}, "[Model] paged forward")
    git.Repo(sc.fork.path).git.fetch("-q", "upstream")
    wt = GitRepo(record["worktree"])
    head = wt.head()
    # the sync worktree appended the fork's sparse method where upstream appends its own
    assert main(["backport", clash, "--id", "scratch-back", "--repo", str(sc.fork.path)]) == 4
    assert "conflicts" in capsys.readouterr().err
    assert wt.head() == head and not wt.status_porcelain() and not (sc.patches / "scratch-back").exists()


def test_patch_without_known_preimage_leaves_rejected_hunks(tmp_path: Path, sc: Scenario, capsys) -> None:
    # a patch written in another repository: git has none of its blobs, so no three-way merge
    other = RepoBuilder(tmp_path / "other")
    other.commit({"vllm/moe.py": "def route(token_id):\n    return token_id\n"}, "other base")
    sha = other.commit({"vllm/moe.py": "def route(token_id):\n    return token_id % 3\n"}, "other change")
    folder = sc.patches / "foreign"
    [patch] = GitRepo(other.path).format_patch(f"{sha}^..{sha}", folder)
    (folder / "patchset.yaml").write_text(
        yaml.safe_dump(
            {
                "id": "foreign",
                "title": "Foreign change",
                "kind": "fixup",
                "patches": [patch.name],
                "invariants": [{"kind": "contains", "files": "vllm/moe.py", "pattern": "% 3"}],
            }
        )
    )
    capsys.readouterr()
    assert main(["merge", sc.shas["upstream"], "--repo", str(sc.fork.path), "--json"]) == 4
    data = cli_data(capsys.readouterr().out)
    [entry] = data["replay"]["entries"]
    assert entry["status"] == "needs-adaptation" and entry["rejects"] == ["vllm/moe.py.rej"]
    worktree = Path(data["worktree"])
    assert (worktree / "vllm/moe.py.rej").is_file()
    (worktree / "vllm/moe.py").write_text(MOE.replace("% 7", "% 3"))  # the person adapts
    assert main(["resume", "--repo", str(sc.fork.path)]) == 0
    assert not (worktree / "vllm/moe.py.rej").exists()
    assert "Patch-set: foreign" in GitRepo(worktree).message("HEAD")


def _status(sc: Scenario, capsys) -> str:
    capsys.readouterr()
    assert main(["status", "--repo", str(sc.fork.path), "--json"]) == 0
    return capsys.readouterr().out


YAML_WITH_COMMENTS = """\
# The fork's scratch pool: keep it.
id: keep-me
title: "Quoted title: with a colon"
kind: fork-feature   # trailing comment
rationale: >-
  A folded paragraph that is long enough that a dumper with a narrow width would wrap it somewhere in the middle of
  this line.
depends_on: [a, b]
invariants:
  # why this invariant
  - {id: x, kind: file_exists, path: vllm/x.py}
  - id: y
    kind: contains
    files: vllm/y.py
    pattern: 'token_id < 0 \\|\\| token_id >= rows'
patches: []
tests:
  - tests/test_x.py
"""


@pytest.mark.parametrize(
    ("before", "value"),
    [("patches: []", ["0001-a.patch"]), ("patches: []", ["0001-a.patch", "0002-b.patch"]), ("patches: []", [])],
)
def test_set_yaml_field_changes_only_that_field(tmp_path: Path, before: str, value: list[str]) -> None:
    import difflib

    from ds4sync.patchsets.authoring import set_yaml_field

    path = tmp_path / "patchset.yaml"
    path.write_text(YAML_WITH_COMMENTS)
    set_yaml_field(path, "patches", value)
    after = path.read_text()
    changed = [
        line
        for line in difflib.unified_diff(YAML_WITH_COMMENTS.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    removed = [line[1:] for line in changed if line.startswith("-")]
    added = [line[1:] for line in changed if line.startswith("+")]
    if value:
        assert removed == [before]
        assert added == ["patches:", *(f"  - {v}" for v in value)]
    else:
        assert changed == []  # nothing to change: the file is byte for byte the same
    assert "# The fork's scratch pool: keep it." in after and "# why this invariant" in after
    assert "# trailing comment" in after
    assert yaml.safe_load(after)["patches"] == value
    # a second change of a block list is again confined to that field
    set_yaml_field(path, "patches", ["0009-z.patch", "0010-y.patch"])
    again = yaml.safe_load(path.read_text())
    assert again["patches"] == ["0009-z.patch", "0010-y.patch"] and again["title"] == "Quoted title: with a colon"
