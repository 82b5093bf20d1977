"""The one path-glob dialect, as merge rules and invariants both use it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4sync.core.paths import filter_paths, is_glob, path_matches
from ds4sync.models.config import MergeConfig, ResolutionRule
from ds4sync.patchsets.tree import FolderTree, match_paths

CASES = [
    # pattern, path, matches
    ("docs/*", "docs/a.md", True),
    ("docs/*", "docs/sub/a.md", False),  # one folder only
    ("docs/**", "docs/sub/deep/a.md", True),
    ("**/*.py", "a.py", True),  # ** also matches no folder
    ("**/*.py", "x/y/c.py", True),
    ("x/*.py", "x/y/c.py", False),
    ("a/{b,c}/{d,e}.py", "a/c/e.py", True),
    ("a/{b,c}/{d,e}.py", "a/f/e.py", False),
    ("requirements/{cuda,common}.txt", "requirements/cuda.txt", True),
    ("vllm/**/sm12x_*.py", "vllm/models/deepseek_v4/nvidia/ops/sm12x_mqa.py", True),
    ("csrc/[ab]*.cu", "csrc/attn.cu", True),
    ("csrc/[ab]*.cu", "csrc/moe.cu", False),
    ("*", ".github", True),  # dotfiles are ordinary paths
    ("?.py", "ab.py", False),
]


@pytest.mark.parametrize(("pattern", "path", "expected"), CASES)
def test_path_dialect(pattern: str, path: str, expected: bool) -> None:
    assert path_matches(pattern, path) is expected


@pytest.mark.parametrize(("pattern", "path", "expected"), CASES)
def test_merge_rules_and_invariants_read_a_glob_the_same_way(
    tmp_path: Path, pattern: str, path: str, expected: bool
) -> None:
    rule = ResolutionRule(glob=pattern, strategy="ours")
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text("x\n")
    assert rule.matches(path) is expected
    assert (match_paths(FolderTree(tmp_path), [pattern]) == [path]) is expected


def test_rules_in_file_order() -> None:
    config = MergeConfig(
        rules=(
            ResolutionRule(glob="docs/**", strategy="theirs"),
            ResolutionRule(glob="**/*.md", strategy="union"),
        )
    )
    assert [r.strategy for r in config.rules_for("docs/a/b.md")] == ["theirs", "union"]
    assert [r.strategy for r in config.rules_for("README.md")] == ["union"]


def test_filter_and_is_glob() -> None:
    assert filter_paths(["a.py", "b/c.py", "d.txt"], "**/*.py") == ["a.py", "b/c.py"]
    assert not is_glob("vllm/envs.py")
    assert all(is_glob(p) for p in ("a/*", "a?", "a/[bc]", "a/{b,c}"))
