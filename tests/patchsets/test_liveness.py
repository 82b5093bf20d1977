"""The ``live`` option of invariants: what they find counts only in code imported from the entry module, whose
own imports resolve, checked on generated histories (each commit read from git, and the checkout)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ds4sync.core.errors import ConfigError
from ds4sync.core.git import GitRepo
from ds4sync.core.model import validate
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.models.patchsets_results import InvariantResult
from ds4sync.patchsets.invariants import evaluate
from ds4sync.patchsets.model import PatchSet
from ds4sync.patchsets.tree import CommitTree, FolderTree, Tree

DISPATCH = "vllm.model.dispatch"
OLD = "vllm/layers/old_attention.py"
NEW = "vllm/model/attention.py"
FEATURE = "def _forward_decode_triton(self):\n    return 1\n"

# upstream moved the attention from layers/ to model/; the person kept the old file, which nothing imports
V1 = {
    "vllm/__init__.py": "",
    "vllm/layers/__init__.py": "",
    OLD: "import torch\n\n\nclass Attention:\n    " + FEATURE.replace("\n    ", "\n        "),
    "vllm/model/__init__.py": "",
    "vllm/model/dispatch.py": "from vllm.layers.old_attention import Attention\n",
    "vllm/ops/__init__.py": "",
    "vllm/ops/fallbacks.py": "def mqa_logits():\n    return 0\n",
    "vllm/utils/__init__.py": "",
    "vllm/utils/gemm.py": "def logits():\n    from vllm.ops import fallbacks\n    return fallbacks.mqa_logits()\n",
}
V2 = {
    NEW: "class Attention:\n    pass\n",
    "vllm/model/dispatch.py": "def pick():\n    from .attention import Attention\n    return Attention\n",
}
V3 = {"vllm/ops/fallbacks.py": None, "vllm/ops/__init__.py": None}  # upstream dropped the package


@pytest.fixture
def history(tmp_path: Path) -> tuple[GitRepo, list[str]]:
    builder = RepoBuilder(tmp_path / "fork")
    shas = [builder.commit(V1, "v1"), builder.commit(V2, "v2"), builder.commit(V3, "v3")]
    return GitRepo(builder.path), shas


def _check(tree: Tree, invariant: dict) -> InvariantResult:
    ps = PatchSet.model_validate({"id": "ps", "title": "t", "kind": "fork-feature", "invariants": [invariant]})
    return evaluate(tree, ps)[0]


def _decode(live: dict | None) -> dict:
    inv = {"kind": "contains", "files": [NEW, OLD], "pattern": r"^\s+def _forward_decode_triton\("}
    return {**inv, "live": live} if live else inv


def test_a_feature_reached_from_its_dispatcher_holds_and_names_the_chain(history: tuple[GitRepo, list[str]]) -> None:
    repo, shas = history
    result = _check(CommitTree(repo, shas[0]), _decode({"entry": DISPATCH}))
    assert result.status == "holds"
    assert f"live: {DISPATCH} -> vllm.layers.old_attention" in result.evidence


@pytest.mark.parametrize("where", ["commit", "checkout"])
def test_a_kept_module_nothing_imports_no_longer_holds(history: tuple[GitRepo, list[str]], where: str) -> None:
    repo, shas = history
    tree: Tree = CommitTree(repo, shas[1]) if where == "commit" else FolderTree(repo.path)
    assert _check(tree, _decode(None)).status == "holds"  # the false hold the option is for
    result = _check(tree, _decode({"entry": DISPATCH}))
    assert result.status == "violated"
    assert result.files == (OLD,)
    assert f"{OLD} is not live: no import chain reaches vllm.layers.old_attention from {DISPATCH}" in result.detail


def test_a_dead_copy_is_not_counted_when_a_live_one_holds(history: tuple[GitRepo, list[str]]) -> None:
    repo, _ = history
    builder = RepoBuilder(repo.path)
    sha = builder.commit({NEW: "class Attention:\n    " + FEATURE.replace("\n    ", "\n        ")}, "port it")
    result = _check(CommitTree(repo, sha), _decode({"entry": DISPATCH}))
    assert result.status == "holds"
    assert f"not live, not counted: {OLD}" in result.detail
    assert f"live: {DISPATCH} -> vllm.model.attention" in result.evidence  # through a lazy relative import


@pytest.mark.parametrize(
    ("dispatch", "live"),
    [
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from vllm.layers.old_attention import A\n", False),
        ("import vllm.layers.old_attention\n", True),
        ("import importlib\nmod = importlib.import_module('vllm.layers.old_attention')\n", True),
        (
            "class D:\n    def f(self):\n        try:\n            from vllm.layers import old_attention\n"
            "        except ImportError:\n            pass\n",
            True,
        ),
        ("from vllm import layers\n", False),  # the package runs, not the module
    ],
)
def test_which_imports_make_a_module_live(tmp_path: Path, dispatch: str, live: bool) -> None:
    builder = RepoBuilder(tmp_path / "fork")
    sha = builder.commit({**V1, "vllm/model/dispatch.py": dispatch}, "v1")
    result = _check(CommitTree(GitRepo(builder.path), sha), _decode({"entry": DISPATCH}))
    assert result.status == ("holds" if live else "violated")


def _fallback(live: bool) -> dict:
    inv = {"kind": "contains", "files": "vllm/utils/gemm.py", "pattern": r"from vllm\.ops import fallbacks"}
    return {**inv, "live": {"imports_resolve": True}} if live else inv


def test_code_importing_a_package_that_is_gone_is_violated(history: tuple[GitRepo, list[str]]) -> None:
    repo, shas = history
    assert _check(CommitTree(repo, shas[1]), _fallback(True)).status == "holds"
    assert _check(CommitTree(repo, shas[2]), _fallback(False)).status == "holds"  # the false hold
    result = _check(CommitTree(repo, shas[2]), _fallback(True))
    assert result.status == "violated"
    assert "vllm/utils/gemm.py:2: imports vllm.ops, which is not in the tree" in result.detail


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        ("from vllm.ops import nothing_here\n", "imports nothing_here from vllm.ops, which has no such name"),
        ("import vllm.ops.gone\n", "imports vllm.ops.gone, which is not in the tree"),
        ("from ..ops import gone\n", "imports gone from vllm.ops, which has no such name"),
        ("from .missing import x\n", "imports vllm.utils.missing, which is not in the tree"),
        ("try:\n    from vllm.gone import x\nexcept ImportError:\n    x = None\n", None),
        ("import torch\nfrom numpy import linalg\n", None),  # not the tree's packages
        ("from vllm.ops import fallbacks, mqa\n", None),  # a submodule, and a name its __init__ binds
        ("from vllm.lazy import anything\n", None),  # a module __getattr__ may bind any name
    ],
)
def test_which_imports_must_resolve(tmp_path: Path, code: str, problem: str | None) -> None:
    builder = RepoBuilder(tmp_path / "fork")
    files = {
        **V1,
        "vllm/ops/__init__.py": "from .fallbacks import mqa_logits as mqa\n",
        "vllm/lazy.py": "def __getattr__(name):\n    return name\n",
        "vllm/utils/gemm.py": f"# from vllm.ops import fallbacks\n{code}",
    }
    sha = builder.commit(files, "v1")
    result = _check(CommitTree(GitRepo(builder.path), sha), _fallback(True))
    if problem is None:
        assert result.status == "holds", result.detail
    else:
        assert result.status == "violated"
        assert problem in result.detail


def test_a_symbol_in_a_dead_module_is_violated_and_one_that_moved_to_a_live_module_holds(
    history: tuple[GitRepo, list[str]],
) -> None:
    repo, shas = history
    tree = CommitTree(repo, shas[1])
    symbol = {"kind": "symbol", "symbol": "vllm.layers.old_attention:Attention", "live": {"entry": DISPATCH}}
    dead = _check(tree, symbol)
    assert dead.status == "violated"
    assert "vllm.layers.old_attention from vllm.model.dispatch" in dead.detail
    moved = _check(tree, {**symbol, "also_in": ["vllm.model.attention"]})
    assert moved.status == "holds"
    assert "moved from vllm.layers.old_attention" in moved.detail


def test_an_entry_module_that_is_gone_says_so(history: tuple[GitRepo, list[str]]) -> None:
    repo, shas = history
    result = _check(CommitTree(repo, shas[0]), _decode({"entry": ["vllm.gone.dispatch", "vllm.other"]}))
    assert result.status == "violated"
    assert "none of the entry modules vllm.gone.dispatch, vllm.other is in the tree" in result.detail


@pytest.mark.parametrize(
    ("live", "message"),
    [({}, "set entry"), ({"entry": "not a module"}, "dotted module name"), ({"entry": "a", "bogus": 1}, "bogus")],
)
def test_a_bad_live_option_is_one_line_naming_the_key(tmp_path: Path, live: dict, message: str) -> None:
    data: dict[str, Any] = {"id": "ps", "title": "t", "kind": "fork-feature", "invariants": [_decode(live or {"x": 1})]}
    if not live:
        data["invariants"][0]["live"] = {}
    with pytest.raises(ConfigError, match=message) as caught:
        validate(PatchSet, data, source=tmp_path / "patchset.yaml")
    assert "invariants.0" in str(caught.value)
