"""Every invariant kind, holding and violated, on a folder and on a commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.models.patchsets_results import InvariantResult
from ds4sync.patchsets.invariants import evaluate
from ds4sync.patchsets.model import PatchSet
from ds4sync.patchsets.tree import CommitTree, FolderTree, Tree, match_paths

FILES = {
    "vllm/__init__.py": "",
    "vllm/envs.py": 'env = {\n    "VLLM_A": lambda: 1,\n    "VLLM_B": lambda: 2,\n}\n',
    "vllm/runtime.py": 'USED = ["VLLM_A"]\n',
    "vllm/models/dsv4/attention.py": (
        "import torch\nfrom .rope import build_rope\n\n\nclass Attention:\n    _scratch: dict = {}\n\n"
        "    def reserve(self):\n        return None\n\n    class Inner:\n        def deep(self):\n            pass\n\n"
        "if torch.cuda.is_available():\n    def cuda_only():\n        pass\n"
    ),
    "vllm/models/dsv4/rope.py": "def build_rope(x):\n    return x\n",
    "vllm/models/dsv4/broken.py": "def oops(:\n",
    "csrc/bindings.cpp": 'ops.def("foo(Tensor x) -> ()");\nops.impl("foo", &foo);\nops.impl("bar", &bar);\n',
    "requirements/cuda.txt": "flashinfer-python==0.6.18\nflashinfer-cubin==0.6.18\n",
}


@pytest.fixture(scope="module", params=["folder", "commit"])
def tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Tree:
    """The same files as a folder, and as a commit whose work tree has moved on (built once per module)."""
    root = tmp_path_factory.mktemp(f"tree-{request.param}")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(root))
        env.setenv("GIT_CONFIG_NOSYSTEM", "1")
        builder = RepoBuilder(root / "repo")
        sha = builder.commit(FILES, "tree")
        if request.param == "folder":
            return FolderTree(builder.path)
        builder.commit({"vllm/envs.py": None}, "change the work tree after the commit")
    return CommitTree(GitRepo(builder.path), sha)


def _one(tree: Tree, invariant: dict) -> InvariantResult:
    ps = PatchSet.model_validate({"id": "ps", "title": "t", "kind": "fork-feature", "invariants": [invariant]})
    return evaluate(tree, ps)[0]


CASES: list[tuple[dict[str, Any], str, str]] = [
    # (invariant, expected status, fragment of detail or evidence)
    ({"kind": "contains", "files": "vllm/envs.py", "pattern": r'^\s+"VLLM_B":'}, "holds", "vllm/envs.py:3"),
    ({"kind": "contains", "files": "vllm/envs.py", "pattern": r"VLLM_C"}, "violated", "/VLLM_C/ not found"),
    ({"kind": "contains", "files": "vllm/nope.py", "pattern": "x"}, "violated", "no file matches vllm/nope.py"),
    (
        {"kind": "contains", "files": "requirements/cuda.txt", "pattern": r"==0\.6\.18$", "min_count": 2},
        "holds",
        "found 2 time(s)",
    ),
    (
        {"kind": "contains", "files": "requirements/cuda.txt", "pattern": r"==0\.6\.18$", "min_count": 3},
        "violated",
        "found 2 time(s), need 3",
    ),
    (
        {"kind": "contains", "files": "vllm/models/**/*.py", "pattern": r"^def build_rope", "every_file": True},
        "violated",
        "not found in vllm/models/dsv4/attention.py",
    ),
    (
        {"kind": "contains", "files": "vllm/models/dsv4/{rope,attention}.py", "pattern": r"[\s\S]{0,40}build_rope\("},
        "holds",
        "2 file(s)",
    ),
    ({"kind": "absent", "files": "vllm/**/*.py", "pattern": r"eager_scratch"}, "holds", "absent from"),
    (
        {"kind": "absent", "files": "vllm/**/*.py", "pattern": r"_scratch: dict"},
        "violated",
        "vllm/models/dsv4/attention.py:6",
    ),
    # An absent check whose files are all missing checked nothing: it says so instead of holding.
    ({"kind": "absent", "files": "gone/*.py", "pattern": "x"}, "violated", "nothing was checked"),
    ({"kind": "absent", "files": ["gone/a.py", "gone/b.py"], "pattern": "x"}, "violated", "nothing was checked"),
    ({"kind": "absent", "files": "gone/*.py", "pattern": "x", "missing_ok": True}, "holds", "missing_ok"),
    ({"kind": "absent", "files": ["gone/a.py", "vllm/runtime.py"], "pattern": "nope"}, "holds", "absent from 1"),
    ({"kind": "file_exists", "path": ["vllm/old/rope.py", "vllm/models/dsv4/rope.py"]}, "holds", "candidate 2 of 2"),
    ({"kind": "file_exists", "path": ["vllm/old/rope.py", "vllm/gone.py"]}, "violated", "does not exist"),
    ({"kind": "file_absent", "path": ["vllm/gone.py", "vllm/runtime.py"]}, "violated", "vllm/runtime.py"),
    # A symbol that moved: other modules, then a glob looked up wherever it is defined.
    (
        {"kind": "symbol", "symbol": "vllm.old.attention:Attention.reserve", "also_in": ["vllm.models.dsv4.attention"]},
        "holds",
        "moved from vllm.old.attention",
    ),
    (
        {"kind": "symbol", "symbol": "vllm.old.attention:Attention.reserve", "also_in": "vllm.nope"},
        "violated",
        "nor in vllm.nope",
    ),
    (
        {"kind": "symbol", "symbol": "vllm.old.rope:build_rope", "anywhere": "vllm/**/*.py"},
        "holds",
        "defined in vllm/models/dsv4/rope.py (looked up in vllm/**/*.py",
    ),
    (
        {"kind": "symbol", "symbol": "vllm.old.attention:Attention.Inner.deep", "anywhere": "vllm/**/*.py"},
        "holds",
        "vllm/models/dsv4/attention.py",
    ),
    (
        {"kind": "symbol", "symbol": "vllm.old.attention:Attention.gone", "anywhere": "vllm/**/*.py"},
        "violated",
        "defined in none of vllm.old.attention nor in vllm/**/*.py",
    ),
    ({"kind": "file_exists", "path": "vllm/models/dsv4/rope.py"}, "holds", "exists"),
    ({"kind": "file_exists", "path": "vllm/models/dsv4"}, "holds", "exists"),  # a folder with files
    ({"kind": "file_exists", "path": "vllm/eager_scratch.py"}, "violated", "does not exist"),
    ({"kind": "file_absent", "path": "vllm/eager_scratch.py"}, "holds", "is absent"),
    ({"kind": "file_absent", "path": "vllm/**/rope.py"}, "violated", "vllm/models/dsv4/rope.py"),
    ({"kind": "symbol", "symbol": "vllm.models.dsv4.attention:Attention.reserve"}, "holds", "FunctionDef"),
    ({"kind": "symbol", "symbol": "vllm.models.dsv4.attention:Attention._scratch"}, "holds", "defined in"),
    ({"kind": "symbol", "symbol": "vllm.models.dsv4.attention:Attention.Inner.deep"}, "holds", "defined in"),
    ({"kind": "symbol", "symbol": "vllm.models.dsv4.attention:cuda_only"}, "holds", "defined in"),
    ({"kind": "symbol", "symbol": "vllm.models.dsv4.attention:build_rope"}, "holds", "re-exported"),
    (
        {"kind": "symbol", "symbol": "vllm.models.dsv4.attention:Attention.missing"},
        "violated",
        "Attention.missing is not defined in vllm/models/dsv4/attention.py",
    ),
    ({"kind": "symbol", "symbol": "vllm.models.dsv4.nope:X"}, "violated", "module vllm.models.dsv4.nope not found"),
    ({"kind": "symbol", "symbol": "vllm:env"}, "violated", "env is not defined in vllm/__init__.py"),
    ({"kind": "symbol", "symbol": "vllm.models.dsv4.broken:oops"}, "violated", "does not parse"),
    ({"kind": "symbol", "symbol": "vllm.envs:env.x"}, "violated", "is not a class or function"),
    (
        {
            "kind": "cross_ref",
            "source": {"files": "csrc/*.cpp", "pattern": r'ops\.def\("(\w+)\('},
            "target": {"files": "csrc/*.cpp", "pattern": r'ops\.impl\("{name}"'},
        },
        "holds",
        "foo",
    ),
    (
        {
            "kind": "cross_ref",
            "source": {"files": "csrc/*.cpp", "pattern": r'ops\.impl\("(?P<name>\w+)"'},
            "target": {"files": "csrc/*.cpp", "pattern": r'ops\.def\("{name}\('},
        },
        "violated",
        "bar (from csrc/bindings.cpp)",
    ),
    (
        {
            "kind": "cross_ref",
            "source": {"files": "vllm/envs.py", "pattern": r'^\s+"(VLLM_\w+)":'},
            "target": {"files": "vllm/runtime.py", "pattern": r'"{name}"'},
        },
        "violated",
        "VLLM_B (from vllm/envs.py)",
    ),
    (
        {
            "kind": "cross_ref",
            "source": {"files": "vllm/runtime.py", "pattern": r'"(NOPE_\w+)"'},
            "target": {"files": "vllm/envs.py", "pattern": r'"{name}"'},
        },
        "violated",
        "0 name(s) extracted",
    ),
    ({"kind": "test", "node": "tests/test_a.py::test_b"}, "deferred", "run by the gate phase"),
]


@pytest.mark.parametrize(
    ("invariant", "status", "fragment"), CASES, ids=[f"{c[0]['kind']}-{c[1]}-{i}" for i, c in enumerate(CASES)]
)
def test_invariant(tree: Tree, invariant: dict, status: str, fragment: str) -> None:
    result = _one(tree, invariant)
    assert result.status == status, result.detail
    assert fragment in result.detail + " ".join(result.evidence)
    assert result.patchset == "ps" and result.invariant == f"{invariant['kind']}-1"


def test_result_line_names_patchset_invariant_and_file(tree: Tree) -> None:
    result = _one(tree, {"kind": "contains", "id": "pin", "files": "requirements/cuda.txt", "pattern": "0.6.12"})
    assert result.line() == "ps / pin [contains]: /0.6.12/ not found in requirements/cuda.txt"
    assert result.files == ("requirements/cuda.txt",)


def test_advisory_violation_does_not_block(tree: Tree) -> None:
    result = _one(tree, {"kind": "file_exists", "path": "nope", "severity": "advisory"})
    assert result.status == "violated" and not result.blocking_violation


def test_match_paths_double_star_matches_top_level(tmp_path: Path) -> None:
    (tmp_path / "x" / "y").mkdir(parents=True)
    for rel in ("a.py", "x/b.py", "x/y/c.py", "x/y/d.txt"):
        (tmp_path / rel).write_text("")
    tree = FolderTree(tmp_path)
    assert match_paths(tree, ["**/*.py"]) == ["a.py", "x/b.py", "x/y/c.py"]
    assert match_paths(tree, ["x/*.py"]) == ["x/b.py"]


@pytest.mark.parametrize(
    ("before_text", "after_text", "status", "since"),
    [
        ("HOOK = 1\n", "", "violated", "lost in this merge"),  # held on the fork head, gone after the merge
        ("", "", "violated", "already failing before it"),  # the fork head never had it
        ("HOOK = 1\n", "HOOK = 1\n", "holds", ""),  # no violation: no baseline is taken
    ],
)
def test_verify_baseline_tells_lost_in_this_merge_from_already_failing(
    tmp_path: Path, before_text: str, after_text: str, status: str, since: str
) -> None:
    from ds4sync.patchsets.check import check_tree, with_baseline
    from ds4sync.patchsets.model import load_catalogue

    patches = tmp_path / "patches"
    (patches / "hook").mkdir(parents=True)
    (patches / "catalogue.yaml").write_text("name: t\n")
    (patches / "hook" / "patchset.yaml").write_text(
        "id: hook\ntitle: The fork's hook\nkind: fork-feature\nrationale: r\npatches: []\n"
        "invariants:\n  - {kind: contains, files: pkg/hook.py, pattern: 'HOOK = 1'}\n"
        "  - {kind: file_exists, path: pkg/other.py}\n"
    )
    catalogue, patchsets = load_catalogue(patches)
    trees = {}
    for name, text in (("before", before_text), ("after", after_text)):
        (tmp_path / name / "pkg").mkdir(parents=True)
        (tmp_path / name / "pkg" / "hook.py").write_text(text)
        (tmp_path / name / "pkg" / "other.py").write_text("")
        trees[name] = FolderTree(tmp_path / name)
    report = check_tree(trees["after"], catalogue, patchsets, patches_dir=str(patches))
    report = with_baseline(report, patchsets, trees["before"])
    hook, other = report.patchsets[0].invariants
    assert (hook.status, hook.since) == (status, since)
    assert other.before is None and other.since == ""  # what holds needs no baseline
    counts = report.counts()
    assert counts["lost_in_merge"] == (since == "lost in this merge")
    assert counts["failing_before"] == (since == "already failing before it")
    assert hook.line().endswith(f" ({since})") == bool(since)
