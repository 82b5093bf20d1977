"""A small upstream and fork with patch-sets that exercise every replay outcome.

Upstream refactors ``_attend`` (so the ``softcap`` carry no longer applies), bumps
FlashInfer (so the ``flashinfer-0618`` backport landed) and deletes ``vllm/scratch.py``
(so ``larger-scratch`` is unnecessary). ``sparse-decode`` is on the fork branch and
survives the merge; ``bounds-check`` is carried only as a patch and gets reapplied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git
import yaml

from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder

FORK = "fork"


def attention(attend: str = "        scores = q @ kv\n        return scores\n", extra: str = "") -> str:
    """``vllm/attention.py`` with the given ``_attend`` body and extra methods at the end."""
    return (
        '"""Attention."""\n\n\nclass Attention:\n'
        "    def __init__(self, n_heads):\n        self.n_heads = n_heads\n\n"
        "    def forward(self, q, kv):\n        return self._attend(q, kv)\n\n"
        "    def _attend(self, q, kv):\n" + attend + "\n    def heads(self):\n        return self.n_heads\n\n"
        "    def describe(self):\n        return 'attention'\n" + extra
    )


SPARSE = (
    "\n    def _forward_sparse_decode(self, q, kv):\n"
    "        # SM120: Triton sparse decode path.\n        return self._attend(q, kv)\n"
)
SOFTCAP_V1 = (
    "        scores = q @ kv\n        scores = 30.0 * (scores / 30.0).tanh()  # softcap\n        return scores\n"
)
REFACTORED = "        logits = self._matmul(q, kv)\n        return logits\n"
SOFTCAP_V2 = (
    "        logits = self._matmul(q, kv)\n        logits = 30.0 * (logits / 30.0).tanh()  # softcap\n"
    "        return logits\n"
)
MOE = "def route(token_id, rows):\n    return token_id % 7\n"
MOE_BOUNDS = (
    "def route(token_id, rows):\n    if token_id < 0 or token_id >= rows:\n        return -1\n    return token_id % 7\n"
)


@dataclass
class Scenario:
    """The repositories, profile and SHAs of the scenario."""

    root: Path
    upstream: RepoBuilder
    fork: RepoBuilder
    profile: Path
    config: Path
    shas: dict[str, str] = field(default_factory=dict)

    @property
    def patches(self) -> Path:
        """``<profile>/patches``."""
        return self.profile / "patches"

    def write_patchset(self, data: dict[str, Any], *, commits: tuple[str, ...] = ()) -> Path:
        """A patch-set folder with ``data`` as yaml and ``commits`` as format-patch files."""
        folder = self.patches / data["id"]
        folder.mkdir(parents=True, exist_ok=True)
        names: list[str] = []
        repo = GitRepo(self.fork.path)
        for sha in commits:
            for path in repo.format_patch(f"{sha}^..{sha}", folder / ".tmp"):
                target = folder / f"{len(names) + 1:04d}-{path.name[5:]}"
                path.rename(target)
                names.append(target.name)
        (folder / ".tmp").exists() and (folder / ".tmp").rmdir()
        (folder / "patchset.yaml").write_text(yaml.safe_dump({**data, "patches": names}, sort_keys=False))
        return folder


def build_repos(root: Path) -> Scenario:
    """Upstream, fork (a clone) and an empty profile; no patch-sets yet."""
    up = RepoBuilder(root / "upstream")
    up.commit(
        {
            "vllm/__init__.py": "",
            "vllm/attention.py": attention(),
            "vllm/moe.py": MOE,
            "requirements.txt": "torch==2.13.0\nflashinfer==0.6.12\n",
            "vllm/scratch.py": "POOL_MB = 64\n",
        },
        "base",
        date="2026-08-01T10:00:00",
    )
    shas = {"base": up.head()}
    git.Repo.clone_from(str(up.path), str(root / "fork"), origin="upstream")
    fork = RepoBuilder(root / "fork")
    fork.branch(FORK, shas["base"])
    shas["sparse"] = fork.commit({"vllm/attention.py": attention(extra=SPARSE)}, "[SM120] Sparse decode path")
    shas["scratch"] = fork.commit({"vllm/scratch.py": "POOL_MB = 128\n"}, "[SM120] Larger scratch pool")
    fork.branch("carry-bounds", shas["base"])
    shas["bounds"] = fork.commit({"vllm/moe.py": MOE_BOUNDS}, "[SM120] Token-ID bounds in route()")
    fork.branch("carry-softcap", shas["base"])
    shas["softcap"] = fork.commit({"vllm/attention.py": attention(SOFTCAP_V1)}, "[SM120] Logit softcap")
    fork.checkout(FORK)
    up.commit({"vllm/attention.py": attention(REFACTORED)}, "[Refactor] _attend through _matmul")
    shas["flashinfer"] = up.commit(
        {"requirements.txt": "torch==2.13.0\nflashinfer==0.6.18\n"}, "[Deps] FlashInfer 0.6.18 (#52001)"
    )
    shas["upstream"] = up.commit({"vllm/scratch.py": None}, "[Cleanup] Remove the scratch pool")
    git.Repo(fork.path).git.fetch("-q", "upstream")
    profile = root / "profile"
    (profile / "patches" / "resolutions").mkdir(parents=True)
    config = root / "fork" / "ds4sync.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "upstream": {"remote": "upstream", "url": str(up.path), "name": "demo/upstream"},
                "fork": {"branch": FORK},
                "profile": str(profile),
                "merge": {"rules": [{"glob": "vllm/scratch.py", "strategy": "theirs"}]},
            }
        )
    )
    return Scenario(root, up, fork, profile, config, shas)


def add_patchsets(sc: Scenario) -> None:
    """The five patch-sets: retained, reapplied, needs-adaptation and two landed-upstream."""
    sc.write_patchset(
        {
            "id": "sparse-decode",
            "title": "SM120 sparse decode path",
            "kind": "fork-feature",
            "invariants": [
                {"kind": "symbol", "symbol": "vllm.attention:Attention._forward_sparse_decode"},
                {"kind": "contains", "files": "vllm/*.py", "pattern": r"# SM120: Triton sparse"},
                {"kind": "test", "node": "tests/test_attention.py::test_sparse_decode"},
            ],
            "tests": ["tests/test_attention.py::test_sparse_decode"],
        },
        commits=(sc.shas["sparse"],),
    )
    sc.write_patchset(
        {
            "id": "bounds-check",
            "title": "Token-ID bounds in route()",
            "kind": "fork-feature",
            "invariants": [
                {"kind": "contains", "files": "vllm/moe.py", "pattern": r"token_id < 0 or token_id >= rows"}
            ],
        },
        commits=(sc.shas["bounds"],),
    )
    sc.write_patchset(
        {
            "id": "softcap",
            "title": "Logit softcap",
            "kind": "fork-feature",
            "depends_on": ["sparse-decode"],
            "invariants": [{"kind": "contains", "files": "vllm/attention.py", "pattern": r"\.tanh\(\)"}],
        },
        commits=(sc.shas["softcap"],),
    )
    sc.write_patchset(
        {
            "id": "flashinfer-0618",
            "title": "FlashInfer 0.6.18",
            "kind": "backport",
            "upstream": {"repo": "demo/upstream", "pr": 52001, "commit": sc.shas["flashinfer"]},
            "drop_when": {"upstream_has_commit": sc.shas["flashinfer"]},
            "note": "metadata and invariants only",
            "invariants": [{"kind": "contains", "files": "requirements.txt", "pattern": r"^flashinfer==0\.6\.18$"}],
        }
    )
    sc.write_patchset(
        {
            "id": "larger-scratch",
            "title": "Larger scratch pool",
            "kind": "fixup",
            "drop_when": {"upstream_invariants": [{"kind": "file_absent", "path": "vllm/scratch.py"}]},
            "invariants": [{"kind": "contains", "files": "vllm/scratch.py", "pattern": "POOL_MB = 128"}],
        },
        commits=(sc.shas["scratch"],),
    )
