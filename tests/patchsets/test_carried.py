"""Which patch-sets a fork tree carries: catalogue branches, carried_when since/tree, dependencies.

Real git repositories throughout; carried-ness in a sync is decided on the fork head, never on the
merged tree, so a merge that drops a carried feature still fails verify.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.core.errors import ConfigError
from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.patchsets.check import check_checkout, drop_evidence
from ds4sync.patchsets.commands import history_lookup
from ds4sync.patchsets.model import PatchSet, load_catalogue
from ds4sync.patchsets.tree import CommitTree, FolderTree
from tests.cli_json import data as cli_data

from .scenario import Scenario, add_patchsets, build_repos


def _write(patches: Path, data: dict) -> None:
    folder = patches / data["id"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "patchset.yaml").write_text(yaml.safe_dump({"title": data["id"], "kind": "fork-feature", **data}))


@pytest.fixture
def fork(tmp_path: Path) -> tuple[RepoBuilder, dict[str, str], Path]:
    """A fork with an old branch (no feature) and a new one (feature added in commit ``feature``)."""
    builder = RepoBuilder(tmp_path / "fork")
    shas = {"base": builder.commit({"vllm/model_executor/__init__.py": "", "vllm/old.py": "X = 1\n"}, "base")}
    builder.branch("old", shas["base"])
    shas["old"] = builder.commit({"vllm/old.py": "X = 2\n"}, "old work")
    builder.branch("new", shas["base"])
    shas["feature"] = builder.commit({"vllm/feature.py": "def fast():\n    return 1\n"}, "feature")
    shas["new"] = builder.commit({"vllm/other.py": "Y = 1\n"}, "later")
    patches = tmp_path / "profile" / "patches"
    (patches).mkdir(parents=True)
    (patches / "catalogue.yaml").write_text(
        yaml.safe_dump({"name": "t", "branches": {"old": {"carries": ["base-feature"], "note": "predates it"}}})
    )
    _write(patches, {"id": "base-feature", "invariants": [{"kind": "file_exists", "path": "vllm/old.py"}]})
    _write(
        patches,
        {"id": "fast", "invariants": [{"kind": "symbol", "symbol": "vllm.feature:fast"}]},
    )
    return builder, shas, patches


def _check(builder: RepoBuilder, rev: str, patches: Path, branch: str | None):
    repo = GitRepo(builder.path)
    head = repo.resolve_commit(rev)
    assert head is not None
    return check_checkout(
        CommitTree(repo, head), patches, branch=branch, head=head, history_has=history_lookup(repo, head)
    )


def test_branch_entry_makes_a_patchset_not_carried_never_failed_nor_held(fork) -> None:
    builder, shas, patches = fork
    report = _check(builder, shas["old"], patches, "old")
    status = {ps.id: ps for ps in report.patchsets}
    assert status["fast"].status == "not-carried" and "branch old does not carry it" in status["fast"].detail
    assert "predates it" in status["fast"].detail
    assert status["base-feature"].status == "holds"
    counts = report.counts()
    assert report.ok and counts["violated"] == 0 and counts["holds"] == 1 and counts["not_counted"] == 1
    # the same tree on a branch the catalogue does not name: carried, so the missing feature fails
    other = _check(builder, shas["old"], patches, "elsewhere")
    assert {ps.id: ps.status for ps in other.patchsets}["fast"] == "violated" and not other.ok
    # glob keys match too
    (patches / "catalogue.yaml").write_text(yaml.safe_dump({"branches": {"ol*": {"carries": ["*"]}}}))
    assert {ps.id: ps.status for ps in _check(builder, shas["old"], patches, "old").patchsets}["fast"] == "violated"


def test_since_decides_by_history_and_unknown_commits_count_as_absent(fork) -> None:
    builder, shas, patches = fork
    (patches / "catalogue.yaml").unlink()
    _write(
        patches,
        {
            "id": "fast",
            "carried_when": {"since": shas["feature"], "note": "added in June"},
            "invariants": [{"kind": "symbol", "symbol": "vllm.feature:fast"}],
        },
    )
    on_new = {ps.id: ps for ps in _check(builder, shas["new"], patches, None).patchsets}
    assert on_new["fast"].status == "holds"
    on_old = {ps.id: ps for ps in _check(builder, shas["old"], patches, None).patchsets}
    assert on_old["fast"].status == "not-carried" and "is not in the fork head's history" in on_old["fast"].detail
    assert "added in June" in on_old["fast"].detail
    # the feature commit itself carries it; its parent does not
    assert {p.id: p.status for p in _check(builder, shas["feature"], patches, None).patchsets}["fast"] == "holds"
    base = {p.id: p.status for p in _check(builder, shas["base"], patches, None).patchsets}
    assert base["fast"] == "not-carried"
    _write(
        patches,
        {"id": "fast", "carried_when": {"since": "0" * 40}, "invariants": [{"kind": "file_exists", "path": "x"}]},
    )
    unknown = {ps.id: ps for ps in _check(builder, shas["new"], patches, None).patchsets}
    assert "unknown to this repository" in unknown["fast"].detail


def test_since_list_carries_a_rebased_copy_of_the_feature_commit(fork) -> None:
    """A branch rebased before the feature was catalogued has the same change under another SHA: listing
    both commits carries it there too; a fork head with none of them (or only unknown ones) does not."""
    builder, shas, patches = fork
    (patches / "catalogue.yaml").unlink()
    builder.branch("rebased", shas["old"])
    copy = builder.commit({"vllm/feature.py": "def fast():\n    return 1\n"}, "feature")
    assert copy != shas["feature"]
    _write(
        patches,
        {
            "id": "fast",
            "carried_when": {"since": [shas["feature"], copy, "0" * 40], "note": "added in June"},
            "invariants": [{"kind": "symbol", "symbol": "vllm.feature:fast"}],
        },
    )
    for head in (shas["new"], copy):
        assert {p.id: p.status for p in _check(builder, head, patches, None).patchsets}["fast"] == "holds"
    old = {ps.id: ps for ps in _check(builder, shas["old"], patches, None).patchsets}["fast"]
    assert old.status == "not-carried"
    assert f"none of {shas['feature']}, {copy}, {'0' * 40} is in the fork head's history" in old.detail
    assert f"({'0' * 40} unknown to this repository)" in old.detail and "added in June" in old.detail
    # a single commit in a list reads as before; an empty list (or null) sets no condition
    _write(
        patches,
        {
            "id": "fast",
            "carried_when": {"since": [copy]},
            "invariants": [{"kind": "file_exists", "path": "vllm/feature.py"}],
        },
    )
    assert (
        "is not in the fork head's history"
        in {p.id: p for p in _check(builder, shas["new"], patches, None).patchsets}["fast"].detail
    )
    empties: tuple[list[str] | None, ...] = ([], None)
    for empty in empties:
        _write(
            patches,
            {
                "id": "fast",
                "carried_when": {"since": empty},
                "invariants": [{"kind": "file_exists", "path": "vllm/feature.py"}],
            },
        )
        assert {p.id: p.status for p in _check(builder, shas["old"], patches, None).patchsets}["fast"] == "violated"


def test_tree_condition_and_dependencies_propagate(fork) -> None:
    builder, shas, patches = fork
    (patches / "catalogue.yaml").unlink()
    _write(
        patches,
        {
            "id": "fast",
            "carried_when": {"tree": [{"kind": "file_exists", "path": "vllm/feature.py"}]},
            "invariants": [{"kind": "contains", "files": "vllm/feature.py", "pattern": "return 2"}],
        },
    )
    _write(patches, {"id": "faster", "depends_on": ["fast"], "invariants": [{"kind": "file_exists", "path": "z"}]})
    old = {ps.id: ps for ps in _check(builder, shas["old"], patches, None).patchsets}
    assert old["fast"].status == "not-carried" and "carried_when.tree" in old["fast"].detail
    assert old["faster"].status == "not-carried" and "depends on fast" in old["faster"].detail
    new = {ps.id: ps.status for ps in _check(builder, shas["new"], patches, None).patchsets}
    assert new == {"base-feature": "holds", "fast": "violated", "faster": "violated"}


def test_not_carried_whose_invariants_hold_says_so(fork) -> None:
    builder, shas, patches = fork
    (patches / "catalogue.yaml").write_text(yaml.safe_dump({"branches": {"new": {"carries": ["base-feature"]}}}))
    fast = {ps.id: ps for ps in _check(builder, shas["new"], patches, "new").patchsets}["fast"]
    assert fast.status == "not-carried" and "yet every invariant holds here" in fast.detail


def test_a_branch_naming_an_unknown_patchset_is_one_clear_error(fork) -> None:
    _builder, _shas, patches = fork
    (patches / "catalogue.yaml").write_text(yaml.safe_dump({"branches": {"old": {"carries": ["nope"]}}}))
    with pytest.raises(ConfigError, match=r"branches\.old\.carries: unknown patch-set\(s\) nope"):
        load_catalogue(patches)


def test_cli_check_rev_and_branch(fork, capsys) -> None:
    builder, shas, patches = fork
    profile = str(patches.parent)
    capsys.readouterr()
    code = main(["patches", "check", "--repo", str(builder.path), "--profile", profile, "--rev", "old", "--json"])
    data = cli_data(capsys.readouterr().out)
    assert code == 0 and data["carry"]["branch"] == "old" and data["counts"]["patchsets_not_carried"] == 1
    code = main(["patches", "check", "--repo", str(builder.path), "--profile", profile, "--rev", shas["old"], "--json"])
    data = cli_data(capsys.readouterr().out)
    assert code == 1 and data["carry"]["branch"] is None  # a bare SHA names no branch: everything carried
    code = main(
        ["patches", "check", "--repo", str(builder.path), "--profile", profile, "--rev", shas["old"], "--branch", "old"]
    )
    assert code == 0 and "not-carried fast: branch old does not carry it" in capsys.readouterr().out


def test_advisory_never_satisfies_drop_when(tmp_path: Path) -> None:
    root = tmp_path / "up"
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "a.py").write_text("PIN = 1\n")
    tree = FolderTree(root)

    def ps(invariants: list[dict]) -> PatchSet:
        return PatchSet.model_validate(
            {
                "id": "p",
                "title": "t",
                "kind": "backport",
                "drop_when": {"invariants_hold_on_upstream": True},
                "invariants": invariants,
            }
        )

    holds = {"kind": "contains", "files": "vllm/a.py", "pattern": "PIN = 1"}
    fails = {"kind": "contains", "files": "vllm/a.py", "pattern": "PIN = 2", "severity": "advisory"}
    only_advisory = {**holds, "severity": "advisory"}
    assert drop_evidence(ps([holds]).drop_when, ps([holds]), upstream=tree, has_commit=None)
    both = ps([holds, fails])
    assert drop_evidence(both.drop_when, both, upstream=tree, has_commit=None) == []
    adv = ps([only_advisory])
    assert drop_evidence(adv.drop_when, adv, upstream=tree, has_commit=None) == []
    listed = PatchSet.model_validate(
        {"id": "p", "title": "t", "kind": "backport", "drop_when": {"upstream_invariants": [only_advisory]}}
    )
    assert drop_evidence(listed.drop_when, listed, upstream=tree, has_commit=None) == []


# -- through the sync pipeline -------------------------------------------------------------------


@pytest.fixture
def sc(tmp_path: Path) -> Scenario:
    scenario = build_repos(tmp_path)
    add_patchsets(scenario)
    shutil.rmtree(scenario.patches / "softcap")  # no stop for adaptation in these runs
    return scenario


def _merge(sc: Scenario, capsys) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["merge", sc.shas["upstream"], "--repo", str(sc.fork.path), "--json"])
    return code, cli_data(capsys.readouterr().out)


def test_sync_reports_not_carried_in_replay_and_verify(sc: Scenario, capsys) -> None:
    (sc.patches / "catalogue.yaml").write_text(
        yaml.safe_dump({"branches": {"fork": {"carries": ["sparse-decode", "bounds-check", "flashinfer-0618"]}}})
    )
    sc.write_patchset(
        {
            "id": "not-yet",
            "title": "A feature the fork branch does not carry",
            "kind": "fork-feature",
            "invariants": [{"kind": "file_exists", "path": "vllm/not_yet.py"}],
        }
    )
    code, data = _merge(sc, capsys)
    assert code == 0, data
    replay = {e["id"]: e for e in data["replay"]["entries"]}
    assert (
        replay["not-yet"]["status"] == "not-carried" and "branch fork does not carry it" in replay["not-yet"]["detail"]
    )
    assert replay["larger-scratch"]["status"] == "not-carried"
    verify = {ps["id"]: ps for ps in data["verify"]["patchsets"]}
    assert verify["not-yet"]["status"] == "not-carried" and verify["not-yet"]["invariants"][0]["status"] == "violated"
    totals = data["verify"]["totals"]
    assert totals["violated"] == 0 and totals["patchsets_not_carried"] == 2
    assert data["verify"]["carry"]["branch"] == "fork" and data["verify"]["carry"]["head"] == sc.shas["scratch"]
    # replay's and verify's statuses agree for every patch-set they both name
    for pid, entry in replay.items():
        if entry["status"] == "not-carried":
            assert verify[pid]["status"] == "not-carried"


def test_a_merge_that_drops_a_carried_feature_stops_replay(sc: Scenario, capsys) -> None:
    """Carried-ness is read from the fork head: upstream deleting the file does not make it not-carried."""
    shutil.rmtree(sc.patches / "larger-scratch")
    sc.write_patchset(
        {
            "id": "scratch-kept",
            "title": "The fork keeps its larger scratch pool",
            "kind": "fork-feature",
            "carried_when": {"tree": [{"kind": "file_exists", "path": "vllm/scratch.py"}]},
            "invariants": [{"kind": "contains", "files": "vllm/scratch.py", "pattern": "POOL_MB = 128"}],
        }
    )
    code, data = _merge(sc, capsys)
    assert code == 4, data  # replay stops for a person: the carried feature is gone from the merged tree
    entry = {e["id"]: e for e in data["replay"]["entries"]}["scratch-kept"]
    assert entry["status"] == "needs-adaptation" and "no file matches vllm/scratch.py" in entry["detail"]


def test_replay_calls_advisory_only_results_unconfirmed(sc: Scenario, capsys) -> None:
    sc.write_patchset(
        {
            "id": "guess",
            "title": "An inferred invariant that does not hold",
            "kind": "fixup",
            "invariants": [
                {"kind": "file_exists", "path": "vllm/moe.py"},
                {"kind": "contains", "files": "vllm/moe.py", "pattern": "never_there", "severity": "advisory"},
            ],
        }
    )
    code, data = _merge(sc, capsys)
    assert code == 0, data
    entry = {e["id"]: e for e in data["replay"]["entries"]}["guess"]
    assert entry["status"] == "unconfirmed" and "1 of 2 invariant(s) hold" in entry["detail"]
    verify = {ps["id"]: ps["status"] for ps in data["verify"]["patchsets"]}
    assert verify["guess"] == "advisory-violations"


def test_shipped_catalogue_holds_nothing_vacuously(tmp_path: Path) -> None:
    """On a vLLM tree without any fork file, only file_absent checks (and absent checks over files that exist)
    may hold: an absent check over missing files, or a moved symbol, must not turn green by default."""
    from ds4sync.models.config import shipped_profile

    root = tmp_path / "bare"
    (root / "vllm" / "model_executor").mkdir(parents=True)
    (root / "vllm" / "model_executor" / "__init__.py").write_text("")
    catalogue, _patchsets = load_catalogue(Path(shipped_profile()) / "patches")
    assert {"ds4-sm120-full"} <= set(catalogue.branches)
    report = check_checkout(root, Path(shipped_profile()) / "patches")
    held = [
        f"{r.patchset}/{r.invariant}"
        for ps in report.patchsets
        for r in ps.invariants
        if r.status == "holds" and r.kind != "file_absent"
    ]
    assert held == []


def test_an_ambiguous_abbreviated_since_counts_when_any_candidate_is_in_history(tmp_path: Path) -> None:
    """Two commits share a 4-digit prefix: the prefix names no single commit, yet the feature is carried."""
    builder = RepoBuilder(tmp_path / "amb")
    head = builder.commit({"a.txt": "a\n"}, "base")
    repo = GitRepo(builder.path)
    tree = repo.out("rev-parse", f"{head}^{{tree}}")
    seen: dict[str, str] = {}
    pair = None
    for i in range(5000):  # commit-tree only: dangling commits, none in head's history
        sha = repo.out("commit-tree", tree, "-p", head, "-m", f"c{i}")
        if sha[:4] in seen:
            pair = (seen[sha[:4]], sha)
            break
        seen[sha[:4]] = sha
    assert pair is not None
    in_history, _other = pair
    repo.run("update-ref", "refs/heads/main", in_history)
    assert repo.resolve_commit(in_history[:4]) is None  # ambiguous: git names no commit
    has = history_lookup(repo, in_history)
    assert has(in_history[:4]) is True
    assert history_lookup(repo, head)(in_history[:4]) is False  # neither candidate is in head's history
    assert has("ffffffffffffffffffffffffffffffffffffffff") is None
