"""The semantic check on a resolved merge (verify): lost fork wiring, and a break the conflict resolution wrote.

Upstream rewrote ``dispatch.py`` (where the fork called its own kernel) and ``router.py``; both
conflict, and the person took upstream's ``dispatch.py`` and wrote a line of their own in
``router.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import git
import pytest

from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.semantic import check_merge

BASE = {
    "pkg/__init__.py": "",
    "pkg/helpers.py": "def keep():\n    return 1\n\n\ndef gone():\n    return 2\n",
    "pkg/dispatch.py": "def dispatch(x):\n    return x\n",
    "pkg/router.py": "from pkg.helpers import keep\n\nROUTE = keep()\n",
}
UPSTREAM_DISPATCH = "def dispatch(x, *, fast=False):\n    return x if not fast else -x\n"
UPSTREAM_ROUTER = "from pkg.helpers import keep\n\nROUTE = keep() + 1\n"
FORK = {
    "pkg/fork_kernels.py": "def fork_fast_kernel(x):\n    return x * 2\n\n\ndef fork_unused_helper():\n    return 0\n",
    "pkg/dispatch.py": (
        "from pkg.fork_kernels import fork_fast_kernel\n\n\ndef dispatch(x):\n    return fork_fast_kernel(x)\n"
    ),
    "pkg/router.py": "from pkg.helpers import keep\n\nROUTE = keep() + 2\n",
}
RESOLVED = {
    "pkg/dispatch.py": UPSTREAM_DISPATCH,
    "pkg/router.py": "from pkg.helpers import keep, gone\n\nROUTE = keep() + gone()\n",
}


@dataclass(frozen=True)
class Resolved:
    repo: GitRepo
    fork: str
    upstream: str
    merged: str


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> Resolved:
    b = RepoBuilder(tmp_path_factory.mktemp("semantic-resolved") / "repo")
    base = b.commit(BASE, "base")
    b.commit({"pkg/dispatch.py": UPSTREAM_DISPATCH}, "dispatch: a fast path (#201)")
    b.commit({"pkg/router.py": UPSTREAM_ROUTER}, "router: one more (#202)")
    b.commit({"pkg/helpers.py": "def keep():\n    return 1\n"}, "helpers: drop gone (#203)")
    upstream = b.head()
    b.branch("fork", base)
    fork = b.commit(FORK, "fork: kernels")
    b.branch("sync", fork)
    git.Repo(b.path).git.merge("-q", "--no-commit", upstream, with_exceptions=False)
    b.write(RESOLVED)
    merged = b.commit({}, "Merge upstream")
    return Resolved(GitRepo(b.path), fork, upstream, merged)


def test_lost_wiring_and_a_resolution_break(resolved: Resolved) -> None:
    result = check_merge(resolved.repo, fork=resolved.fork, upstream=resolved.upstream, merged=resolved.merged)
    found = {(f.path, f.kind, f.symbol, f.severity, f.origin) for f in result.findings}
    assert found == {
        ("pkg/fork_kernels.py", "lost-wiring", "pkg.fork_kernels.fork_fast_kernel", "warning", "upstream"),
        ("pkg/router.py", "unresolved-import", "pkg.helpers.gone", "blocker", "conflict resolution"),
    }
    (gone,) = [f for f in result.findings if f.kind == "unresolved-import"]
    assert gone.culprit is not None and gone.culprit.pr == 203
    (lost,) = [f for f in result.findings if f.kind == "lost-wiring"]
    assert lost.culprit is not None and lost.culprit.pr == 201  # the rewrite of the file that called it
    assert [f.kind for f in result.blockers()] == ["unresolved-import"]


def test_the_fork_heads_own_state_is_no_finding(resolved: Resolved) -> None:
    # fork_unused_helper was never referenced on the fork head: nothing was lost.
    result = check_merge(resolved.repo, fork=resolved.fork, upstream=resolved.upstream, merged=resolved.merged)
    assert "pkg.fork_kernels.fork_unused_helper" not in {f.symbol for f in result.findings}


def test_the_summary_line_names_each_break_with_its_pr(resolved: Resolved) -> None:
    result = check_merge(resolved.repo, fork=resolved.fork, upstream=resolved.upstream, merged=resolved.merged)
    line = result.summary_line()
    assert line.startswith("1 break(s): pkg/router.py:1 pkg.helpers.gone (#203 helpers: drop gone (#203)")
    assert line.endswith("0 acknowledged, 1 warning(s) in 3 fork-touched files")
