"""A small fork with everything a sync proves, for the fault-injection and promote tests.

Upstream changes ``pkg/core.py``; the fork branch carries ``pkg/fork_feature.py``; two
patch-sets (``alpha``: a pinned extra requirement, ``beta``: a logging import) are not on the
fork branch and are reapplied by replay, each in its own commit; ``fork-feature`` is retained.
The ``unit`` tier has a command gate whose child starts a grandchild (``sleep``) and checks
that both patch-sets' changes are in the tree, and a pytest gate over the fork's tests.

Gate children record ``<pid> <grandchild pid>`` into ``$FAULT_PIDS/<pid>``. In an attempt
that is being killed at a gate (``DS4SYNC_FAULT=gate.child-started.*``) they run on for an
hour, as a stuck test or a long ``pip install`` would, so that the next command must stop them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import git
import yaml

from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from tests.procs import IDENTITY
from tests.timing import scaled, scaled_s

BRANCH = "fork"
PATCHSETS = ("fork-feature", "alpha", "beta")
REAPPLIED = {"alpha": {"requirements.txt"}, "beta": {"pkg/attn.py"}}

CHILD_GATE = (
    """\
import os, pathlib, subprocess, sys, time
"""
    + IDENTITY
    + """
grandchild = subprocess.Popen(["sleep", "300"])
ids = f"{identity(os.getpid())} {identity(grandchild.pid)}"
pathlib.Path(os.environ["FAULT_PIDS"], str(os.getpid())).write_text(ids)
if os.environ.get("DS4SYNC_FAULT", "").startswith("gate.child-started"):
    time.sleep(3600)  # the attempt that starts us is killed: we outlive it
text = pathlib.Path("requirements.txt").read_text() + pathlib.Path("pkg/attn.py").read_text()
grandchild.kill()
grandchild.wait()
sys.exit(0 if "extra==2.0" in text and "import logging" in text else 1)
"""
)

FORK_TESTS = (
    """\
import os, pathlib, subprocess, time

from pkg.core import core
"""
    + IDENTITY
    + """


def test_core_is_upstreams():
    assert core() == 2


def test_fork_feature_is_kept():
    from pkg.fork_feature import FEATURE
    assert FEATURE == "sm120"


def test_children_of_a_killed_attempt_run_on():
    pid = os.getpid()
    pathlib.Path(os.environ["FAULT_PIDS"], str(pid)).write_text(identity(pid))
    if os.environ.get("DS4SYNC_FAULT", "").startswith("gate.child-started"):
        time.sleep(3600)
"""
)


@dataclass
class Scenario:
    """The generated repositories and paths; ``repo`` is the fork checkout (on ``main``)."""

    root: Path
    upstream: RepoBuilder
    fork: RepoBuilder
    profile: Path
    config: Path
    pids: Path

    @property
    def repo(self) -> Path:
        return self.fork.path

    @property
    def state(self) -> Path:
        return self.fork.path / ".git" / "ds4sync"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a ds4sync child process on this scenario."""
        root = str(Path(__file__).resolve().parent.parent)
        return {**os.environ, "PYTHONPATH": root, "FAULT_PIDS": str(self.pids), **extra}

    def cli(self, *args: str, fault: str | None = None, check_killed: bool = False) -> subprocess.CompletedProcess[str]:
        """Run ``python -m ds4sync.cli <args>`` on the fork, with ``DS4SYNC_FAULT=fault`` when given."""
        env = self.env(**({"DS4SYNC_FAULT": fault} if fault else {}))
        argv = [sys.executable, "-m", "ds4sync.cli", *args, "--repo", str(self.repo)]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=scaled(300))


def build(root: Path) -> Scenario:
    """Generate upstream, fork, profile (patch-sets and gates) and ds4sync.yaml under ``root``."""
    up = RepoBuilder(root / "upstream")
    base = up.commit(
        {
            ".gitignore": "__pycache__/\n.pytest_cache/\n",
            "pkg/__init__.py": "",
            "pkg/core.py": "def core():\n    return 1\n",
            "pkg/attn.py": '"""Attention."""\n\n\ndef attend(q, k):\n    return q * k\n',
            "requirements.txt": "dep==1.0\n",
            "tests/__init__.py": "",
        },
        "base",
    )
    clone = git.Repo.clone_from(str(up.path), str(root / "fork"), origin="upstream")
    clone.close()
    up.commit({"pkg/core.py": "def core():\n    return 2\n", "pkg/upstream_new.py": "NEW = 1\n"}, "upstream: core 2")
    fork = RepoBuilder(root / "fork")
    fork.branch(BRANCH, base)
    feature = fork.commit(
        {"pkg/fork_feature.py": 'FEATURE = "sm120"\n', "tests/test_fork.py": FORK_TESTS}, "fork: the SM120 feature"
    )
    profile = root / "profile"
    patches = profile / "patches"
    repo = GitRepo(fork.path)
    fork.branch("carry/alpha", base)
    alpha = fork.commit({"requirements.txt": "dep==1.0\nextra==2.0\n"}, "alpha: pin extra")
    fork.branch("carry/beta", base)
    beta = fork.commit(
        {"pkg/attn.py": '"""Attention."""\nimport logging\n\n\ndef attend(q, k):\n    return q * k\n'}, "beta: log"
    )
    fork.checkout(BRANCH)
    _patchset(patches, repo, "fork-feature", feature, [{"kind": "file_exists", "path": "pkg/fork_feature.py"}])
    _patchset(
        patches, repo, "alpha", alpha, [{"kind": "contains", "files": "requirements.txt", "pattern": r"^extra==2\.0$"}]
    )
    _patchset(
        patches, repo, "beta", beta, [{"kind": "contains", "files": "pkg/attn.py", "pattern": r"^import logging$"}]
    )
    for name in ("carry/alpha", "carry/beta"):
        git.Repo(fork.path).git.branch("-D", name)
    fork.checkout("main")
    git.Repo(fork.path).git.fetch("-q", "upstream")
    pids = root / "pids"
    pids.mkdir()
    gate_script = profile / "child_gate.py"
    gate_script.write_text(CHILD_GATE)
    tier = {
        "tier": "unit",
        "gates": [
            {
                "name": "children",
                "kind": "command",
                "run": {"argv": ["{python}", str(gate_script)], "expect_exit": 0},
                "env": {"FAULT_PIDS": str(pids)},
                "timeout": scaled_s(60),
            },
            {
                "name": "unit-tests",
                "kind": "pytest",
                "run": {"paths": ["tests"], "args": ["-q", "-p", "no:cacheprovider"]},
                "env": {"FAULT_PIDS": str(pids)},
                "timeout": scaled_s(60),
            },
        ],
    }
    (profile / "gates").mkdir(parents=True)
    (profile / "gates" / "unit.yaml").write_text(yaml.safe_dump(tier, sort_keys=False))
    config = fork.path / "ds4sync.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "upstream": {"remote": "upstream", "url": str(up.path), "ref": "main"},
                "fork": {"branch": BRANCH},
                "profile": str(profile),
                "gates": {"tiers": ["unit"], "python": sys.executable},
            },
            sort_keys=False,
        )
    )
    return Scenario(root, up, fork, profile, config, pids)


def _patchset(patches: Path, repo: GitRepo, ps_id: str, sha: str, invariants: list[dict]) -> None:
    folder = patches / ps_id
    staging = folder / ".staging"
    names = []
    for path in repo.format_patch(f"{sha}^..{sha}", staging):
        path.replace(folder / path.name)
        names.append(path.name)
    staging.rmdir()
    data = {
        "id": ps_id,
        "title": f"{ps_id} feature",
        "kind": "fork-feature",
        "invariants": invariants,
        "patches": names,
    }
    (folder / "patchset.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def copy(template: Scenario, root: Path) -> Scenario:
    """A fresh copy of a built scenario (repositories, profile and config rewritten to ``root``)."""
    shutil.copytree(template.root, root, symlinks=True)
    old, new = str(template.root), str(root)
    for path in (root / "fork" / "ds4sync.yaml", root / "profile" / "gates" / "unit.yaml"):
        path.write_text(path.read_text().replace(old, new))
    fork_git = root / "fork" / ".git" / "config"
    fork_git.write_text(fork_git.read_text().replace(old, new))
    return Scenario(
        root,
        RepoBuilder(root / "upstream"),
        RepoBuilder(root / "fork"),
        root / "profile",
        root / "fork" / "ds4sync.yaml",
        root / "pids",
    )


def checkout_digest(repo: Path) -> str:
    """A digest of the person's checkout: every work-tree file (bytes and mode), HEAD and the index."""
    digest = hashlib.sha256()
    for path in sorted(p for p in repo.rglob("*") if ".git" not in p.relative_to(repo).parts):
        if path.is_file():
            digest.update(path.relative_to(repo).as_posix().encode() + b"\0")
            digest.update(oct(path.stat().st_mode).encode() + path.read_bytes())
    for name in ("HEAD", "index"):
        digest.update((repo / ".git" / name).read_bytes())
    return digest.hexdigest()
