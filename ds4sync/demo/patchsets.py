"""Patch-sets for the demo fork: one of each replay outcome across the demo's two syncs.

Works on the fork that :mod:`ds4sync.demo.run` builds (``vllm/models/deepseek_v4/attention.py``
with the fork's ``_forward_sparse_mla_decode_triton``, ``vllm/legacy/eager_scratch.py`` and
``requirements/cuda.txt``). Two carry branches are added to the fork repository; the fork
branch itself is not changed.

=========================  ================  ===================================
patch-set                  sync 1 (u1)       sync 2 (u2)
=========================  ================  ===================================
sm120-sparse-decode        retained          retained
larger-scratch-pool        retained          landed-upstream (file removed)
flashinfer-0-6-18          reapplied         landed-upstream (upstream pins it)
sm120-attention-logging    reapplied         needs-adaptation (upstream import)
=========================  ================  ===================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder

ATTENTION = "vllm/models/deepseek_v4/attention.py"
REQUIREMENTS = "requirements/cuda.txt"
SCRATCH = "vllm/legacy/eager_scratch.py"
SPARSE_SYMBOL = "vllm.models.deepseek_v4.attention:DeepseekV4Attention._forward_sparse_mla_decode_triton"
_DOCSTRING = '"""DeepSeek V4 attention."""\n'
_CONFLICT_RE = re.compile(r"^<{7}[^\n]*\n(.*?)^={7}\n(.*?)^>{7}[^\n]*\n", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class DemoPatchsets:
    """What :func:`write_demo_patchsets` wrote: the folder, ids, and the outcome each sync should show."""

    patches_dir: Path
    ids: tuple[str, ...]
    expected: dict[str, dict[str, str]] = field(default_factory=dict)


def write_demo_patchsets(profile: Path, fork: RepoBuilder, *, base: str) -> DemoPatchsets:
    """Create the demo's four patch-sets under ``<profile>/patches`` and their carry branches in ``fork``.

    Args:
        profile: the demo profile folder (``patches/`` is created in it).
        fork: the demo fork, already built (fork branch checked out); it is left checked out.
        base: the upstream SHA the fork branch started from (``shas["base"]`` of the demo).

    Raises:
        ValueError: the fork does not have the demo's files.
    """
    repo = GitRepo(fork.path)
    branch = repo.current_branch()
    base_attention = repo.blob_bytes(base, ATTENTION)
    if branch is None or base_attention is None or _DOCSTRING not in base_attention.decode():
        raise ValueError(f"{fork.path} is not the demo fork (needs {ATTENTION} and a checked-out branch)")
    sparse = repo.pickaxe_commits("def _forward_sparse_mla_decode_triton", branch)
    scratch = repo.pickaxe_commits("SCRATCH_POOL_MB = 128", branch)
    if not sparse or not scratch:
        raise ValueError(f"{fork.path}: the fork branch lacks the demo's sparse-decode or scratch-pool commits")

    fork.branch("carry/flashinfer-0.6.18", base)
    requirements = repo.blob_bytes(base, REQUIREMENTS) or b""
    flashinfer = fork.commit(
        {REQUIREMENTS: re.sub(r"flashinfer-python==[\d.]+", "flashinfer-python==0.6.18", requirements.decode())},
        "[Deps] FlashInfer 0.6.18 for the SM120 decode path",
    )
    fork.branch("carry/attention-logging", base)
    logging_sha = fork.commit(
        {ATTENTION: base_attention.decode().replace(_DOCSTRING + "\n", _DOCSTRING + "import logging\n", 1)},
        "[SM120] Log the selected attention backend",
    )
    fork.checkout(branch)

    patches = profile / "patches"
    _write(
        patches,
        repo,
        {
            "id": "sm120-sparse-decode",
            "title": "SM120 Triton sparse-MLA decode path",
            "kind": "fork-feature",
            "rationale": "SM120 has no FlashMLA tile scheduler; decode goes through Triton.",
            "invariants": [
                {"kind": "symbol", "symbol": SPARSE_SYMBOL},
                {"kind": "test", "node": "tests/test_attention.py::test_sparse_decode"},
            ],
        },
        sparse[-1],
    )
    _write(
        patches,
        repo,
        {
            "id": "larger-scratch-pool",
            "title": "Larger eager scratch pool on SM120",
            "kind": "fixup",
            "rationale": "SM120 needs a 128 MB eager scratch pool.",
            "drop_when": {"upstream_invariants": [{"kind": "file_absent", "path": SCRATCH}]},
            "invariants": [{"kind": "contains", "files": SCRATCH, "pattern": r"^SCRATCH_POOL_MB = 128\b"}],
        },
        scratch[-1],
    )
    _write(
        patches,
        repo,
        {
            "id": "flashinfer-0-6-18",
            "title": "FlashInfer 0.6.18",
            "kind": "backport",
            "upstream": {"repo": "demo/upstream"},
            "rationale": "The SM120 decode path needs FlashInfer 0.6.18.",
            "drop_when": {"invariants_hold_on_upstream": True},
            "invariants": [{"kind": "contains", "files": REQUIREMENTS, "pattern": r"^flashinfer-python==0\.6\.18$"}],
        },
        flashinfer,
    )
    _write(
        patches,
        repo,
        {
            "id": "sm120-attention-logging",
            "title": "Log the selected attention backend",
            "kind": "fork-feature",
            "depends_on": ["sm120-sparse-decode"],
            "rationale": "Operators need to see which backend runs.",
            "invariants": [{"kind": "contains", "files": ATTENTION, "pattern": r"^import logging$"}],
        },
        logging_sha,
    )
    expected = {
        "u1": {
            "sm120-sparse-decode": "retained",
            "larger-scratch-pool": "retained",
            "flashinfer-0-6-18": "reapplied",
            "sm120-attention-logging": "reapplied",
        },
        "u2": {
            "sm120-sparse-decode": "retained",
            "larger-scratch-pool": "landed-upstream",
            "flashinfer-0-6-18": "landed-upstream",
            "sm120-attention-logging": "needs-adaptation",
        },
    }
    return DemoPatchsets(patches, tuple(expected["u1"]), expected)


def adapt_like_a_person(worktree: Path) -> None:
    """What the maintainer does when ``sm120-attention-logging`` stops in sync 2: keep both imports.

    Each conflict block in the attention module becomes ``ours`` then ``theirs``.
    """
    path = worktree / ATTENTION
    path.write_text(_CONFLICT_RE.sub(lambda m: m.group(1) + m.group(2), path.read_text()))


def _write(patches: Path, repo: GitRepo, data: dict[str, Any], sha: str) -> None:
    folder = patches / data["id"]
    staging = folder / ".staging"
    names = []
    for path in repo.format_patch(f"{sha}^..{sha}", staging):
        path.replace(folder / path.name)
        names.append(path.name)
    staging.rmdir()
    (folder / "patchset.yaml").write_text(yaml.safe_dump({**data, "patches": names}, sort_keys=False))
