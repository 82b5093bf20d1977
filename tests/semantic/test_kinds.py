"""The semantic check on one generated history with every planted break kind and every negative.

One upstream line of small commits (each a squash-merge subject with its PR number) and one fork
line; each planted break sits in its own fork file, so the findings per file must be exactly what
was planted there, and the negatives' files must have none.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.semantic import SemanticResult, check_merge
from ds4sync.semantic.resolve import FactsCache

BASE = {
    "pkg/__init__.py": "",
    "pkg/platforms.py": "current_platform = object()\n",
    "pkg/helpers.py": (
        "def keep():\n    return 1\n\n\ndef gone():\n    return 2\n\n\ndef unused_gone():\n    return 3\n\n\n"
        "def moved_fn():\n    return 4\n"
    ),
    "pkg/oldmod.py": "def util():\n    return 1\n",
    "pkg/moe.py": "class MoE:\n    def __init__(self, dim):\n        self.dim = dim\n",
    "pkg/layer.py": "def build(x, scale=1.0, eps=1e-6):\n    return x * scale + eps\n",
    "pkg/block.py": (
        "class Module:\n    pass\n\n\nclass Block(Module):\n    def forward(self, positions, x):\n        return x\n\n"
        "    @classmethod\n    def make(cls, n):\n        return cls()\n\n"
        "    @staticmethod\n    def check(n):\n        return n\n"
    ),
    "pkg/attn.py": "def split(x):\n    return x, x\n",
    # upstream's own caller, which upstream forgets to update in #106 and the fork touches
    "pkg/up_caller.py": "from pkg.attn import split\n\n\ndef g():\n    a, b = split(2)\n    return a\n",
    "pkg/cfg.py": "class Config:\n    def __init__(self, a):\n        self.a = a\n",
    "pkg/mhc.py": (
        "from pkg.platforms import current_platform\n\n\ndef upstream_fn():\n    return current_platform\n\n\n"
        "def other():\n    return 0\n"
    ),
}

#: Upstream's changes, one commit (one PR) each.
UPSTREAM: list[tuple[str, dict[str, str | None]]] = [
    (
        "Drop the unused helpers (#101)",
        {
            "pkg/helpers.py": BASE["pkg/helpers.py"].split("def gone")[0].rstrip() + "\n"
            "\n\nfrom pkg.newhome import moved_fn  # noqa: E402\n\n__all__ = ['keep', 'moved_fn']\n",
            "pkg/newhome.py": "def moved_fn():\n    return 4\n",
        },
    ),
    (
        "Move oldmod into the utils package (#102)",
        {"pkg/oldmod.py": None, "pkg/utils/__init__.py": "", "pkg/utils/newmod.py": "def util():\n    return 1\n"},
    ),
    (
        "MoE: hash layers (#103)",
        {
            "pkg/moe.py": "class MoE:\n    def __init__(self, dim, num_hash_layers):\n"
            "        self.dim = dim\n        self.n = num_hash_layers\n"
        },
    ),
    ("layer: eps is fixed (#104)", {"pkg/layer.py": "def build(x, scale=1.0):\n    return x * scale\n"}),
    (
        "Block: post_mix and res_mix (#105)",
        {
            "pkg/block.py": BASE["pkg/block.py"].replace(
                "def forward(self, positions, x):\n        return x",
                "def forward(self, positions, x, post_mix):\n        return x + post_mix",
            )
        },
    ),
    ("attn: split returns the gate too (#106)", {"pkg/attn.py": "def split(x):\n    return x, x, x\n"}),
    (
        "Config gains b (#107)",
        {"pkg/cfg.py": "class Config:\n    def __init__(self, a, b):\n        self.a = a\n        self.b = b\n"},
    ),
    (
        "mhc: platform-free (#108)",
        {"pkg/mhc.py": "def upstream_fn():\n    return None\n\n\ndef other():\n    return 0\n"},
    ),
]

#: The fork's files: planted breaks (each file one) and negatives (files that must stay quiet).
FORK = {
    "pkg/fork_removed.py": "from pkg.helpers import gone\n\n\ndef f():\n    return gone()\n",
    "pkg/fork_moved.py": "from pkg.oldmod import util\n\n\ndef f():\n    return util()\n",
    "pkg/fork_ctor.py": "from pkg.moe import MoE\n\n\ndef make():\n    return MoE(4)\n",
    "pkg/fork_kw.py": "from pkg.layer import build\n\n\ndef f():\n    return build(1, eps=1e-5)\n",
    "pkg/fork_mtp.py": (
        "from pkg.block import Block, Module\n\n\nclass MTP(Module):\n    def __init__(self):\n"
        "        self.mtp_block = Block()\n\n    def forward(self, p, x):\n"
        "        return self.mtp_block(positions=p, x=x)\n"
    ),
    "pkg/fork_arity.py": "from pkg import attn\n\n\ndef f():\n    a, b = attn.split(1)\n    return a + b\n",
    # negatives
    "pkg/fork_adapted.py": "from pkg.cfg import Config\n\n\ndef f():\n    return Config(1, 2)\n",
    "pkg/cfg.py": UPSTREAM[6][1]["pkg/cfg.py"],  # the fork backported #107 before the sync
    "pkg/fork_strings.py": (
        "from pkg import helpers\n\nNAME = 'pkg.helpers.gone'\n\n\ndef f():\n"
        "    return getattr(helpers, 'gone', None), helpers.keep()\n"
    ),
    "pkg/fork_reexport.py": "from pkg.helpers import moved_fn\n\n\ndef f():\n    return moved_fn()\n",
    "pkg/mhc.py": BASE["pkg/mhc.py"] + "\n\ndef fork_fn():\n    return current_platform\n",
    "pkg/up_caller.py": BASE["pkg/up_caller.py"] + "\n\ndef fork_g():\n    return 1\n",
    # an unbound call passes self itself; object's own dunders are no removed definitions
    "pkg/fork_unbound.py": (
        "from pkg.block import Block\n\n\ndef f(b):\n"
        "    return Block.forward(b, 1, 2), Block.__new__(Block), Block.make(1), Block.check(2)\n"
    ),
}

PLANTED = {
    "pkg/fork_removed.py": {("unresolved-import", "pkg.helpers.gone", "blocker", 101)},
    "pkg/fork_moved.py": {("unresolved-import", "pkg.oldmod.util", "blocker", 102)},
    "pkg/fork_ctor.py": {("call-contract", "pkg.moe.MoE", "blocker", 103)},
    "pkg/fork_kw.py": {("call-contract", "pkg.layer.build", "blocker", 104)},
    "pkg/fork_mtp.py": {("call-contract", "pkg.block.Block.forward", "blocker", 105)},
    "pkg/fork_arity.py": {("return-arity", "pkg.attn.split", "blocker", 106)},
    "pkg/mhc.py": {("lint", "F821 current_platform", "blocker", 108)},
    # upstream's tree has this break too, but brought it in itself (#106): the fork's file still breaks
    "pkg/up_caller.py": {("return-arity", "pkg.attn.split", "blocker", 106)},
    "pkg/fork_unbound.py": {("call-contract", "pkg.block.Block.forward", "blocker", 105)},  # post_mix missing
}


@dataclass(frozen=True)
class History:
    repo: GitRepo
    base: str
    fork: str
    upstream: str
    fixed: str  # the fork with fork_kw.py adapted to upstream's build() (one blob differs)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    b = RepoBuilder(tmp_path_factory.mktemp("semantic") / "repo")
    base = b.commit(BASE, "base")
    for subject, files in UPSTREAM:
        b.commit(files, subject)
    upstream = b.head()
    b.branch("fork", base)
    fork = b.commit(FORK, "fork: features")
    fixed = b.commit(
        {"pkg/fork_kw.py": "from pkg.layer import build\n\n\ndef f():\n    return build(1)\n"}, "fork: no eps"
    )
    return History(GitRepo(b.path), base, fork, upstream, fixed)


def _by_file(result: SemanticResult) -> dict[str, set[tuple[str, str, str, int | None]]]:
    found: dict[str, set[tuple[str, str, str, int | None]]] = {}
    for f in result.findings:
        found.setdefault(f.path, set()).add((f.kind, f.symbol, f.severity, f.culprit.pr if f.culprit else None))
    return found


def test_plan_finds_exactly_what_was_planted(history: History) -> None:
    merge = history.repo.merge_tree(history.fork, history.upstream)
    assert not merge.conflicts
    result = check_merge(history.repo, fork=history.fork, upstream=history.upstream, merged=merge.tree)
    assert _by_file(result) == PLANTED
    assert not result.ok
    assert all(f.origin == "upstream" for f in result.findings)


def test_checks_sharing_a_cache_find_what_fresh_ones_find_and_parse_only_blobs_not_seen(history: History) -> None:
    """The proposals loop: fork and upstream fixed, the merged tree changing a file at a time, conflicted files
    read once resolved. Each check with the shared cache equals a fresh check, and parses only new blobs."""
    repo = history.repo
    merged = repo.merge_tree(history.fork, history.upstream).tree
    adapted = repo.merge_tree(history.fixed, history.upstream).tree  # pkg/fork_kw.py differs, nothing else
    steps = [(merged, ("pkg/fork_kw.py", "pkg/helpers.py")), (merged, ("pkg/fork_kw.py",)), (merged, ()), (adapted, ())]
    shared = FactsCache(repo)
    parsed: list[tuple[int, int]] = []  # (fresh, shared) files parsed by each check
    for tree, unknown in steps:
        fresh = FactsCache(repo)
        alone = check_merge(
            repo, fork=history.fork, upstream=history.upstream, merged=tree, unknown=unknown, facts=fresh
        )
        before = shared.parsed
        result = check_merge(
            repo, fork=history.fork, upstream=history.upstream, merged=tree, unknown=unknown, facts=shared
        )
        assert result.model_dump(exclude={"seconds"}) == alone.model_dump(exclude={"seconds"})
        parsed.append((fresh.parsed, shared.parsed - before))
    assert parsed[0][1] == parsed[0][0] > 4  # nothing seen yet
    assert parsed[1] == (parsed[0][0], 0)  # helpers.py now read: its merged blob is upstream's, parsed already
    assert 0 < parsed[2][1] < parsed[2][0]  # fork_kw.py now read: only what no check had read
    assert parsed[3][0] > 1 and parsed[3][1] == 1  # the one blob that changed
    assert (
        "pkg/fork_kw.py" not in _by_file(result) and _by_file(result)["pkg/fork_ctor.py"] == PLANTED["pkg/fork_ctor.py"]
    )


def test_checks_of_several_upstream_heads_sharing_a_cache_parse_the_forks_files_once(history: History) -> None:
    """drift's loop: one fork head, each upstream PR head in turn (here each upstream commit), one shared cache."""
    repo = history.repo
    heads = repo.out("rev-list", "--reverse", f"{history.base}..{history.upstream}").split()
    shared = FactsCache(repo)
    parsed: list[tuple[int, int]] = []
    for head in heads:
        tree = repo.merge_tree(history.fork, head).tree
        fresh = FactsCache(repo)
        alone = check_merge(repo, fork=history.fork, upstream=head, merged=tree, facts=fresh)
        before = shared.parsed
        result = check_merge(repo, fork=history.fork, upstream=head, merged=tree, facts=shared)
        assert result.model_dump(exclude={"seconds"}) == alone.model_dump(exclude={"seconds"})
        parsed.append((fresh.parsed, shared.parsed - before))
    assert len(heads) == len(UPSTREAM) and parsed[0][0] == parsed[0][1]
    assert all(shared < fresh for fresh, shared in parsed[1:])  # each head brings one PR's files, not the fork's
    assert sum(shared for _, shared in parsed) * 3 < sum(fresh for fresh, _ in parsed)


def test_findings_point_at_the_fork_line(history: History) -> None:
    merge = history.repo.merge_tree(history.fork, history.upstream)
    result = check_merge(history.repo, fork=history.fork, upstream=history.upstream, merged=merge.tree)
    lines = {f.path: f.line for f in result.findings}
    assert lines["pkg/fork_mtp.py"] == 9
    assert lines["pkg/fork_arity.py"] == 5
    assert lines["pkg/fork_removed.py"] == 1
    assert lines["pkg/mhc.py"] == 10  # upstream's mhc.py (6 lines), then the fork's function


def test_the_fork_head_merged_with_itself_finds_nothing(history: History) -> None:
    result = check_merge(history.repo, fork=history.fork, upstream=history.base, merged=history.fork)
    assert result.findings == []
    assert result.ok


def test_a_conflicted_module_is_unknown_not_missing(history: History) -> None:
    merge = history.repo.merge_tree(history.fork, history.upstream)
    result = check_merge(
        history.repo,
        fork=history.fork,
        upstream=history.upstream,
        merged=merge.tree,
        unknown=("pkg/fork_kw.py", "pkg/attn.py", "pkg/helpers.py"),
    )
    found = _by_file(result)
    assert "pkg/fork_kw.py" not in found  # not read at all
    assert "pkg/fork_removed.py" not in found  # a name upstream's side lacks may be the person's to keep
    # The fork never touched attn.py's split: any resolution keeps upstream's, so its contract is known.
    assert found["pkg/fork_arity.py"] == PLANTED["pkg/fork_arity.py"]
    assert found["pkg/fork_ctor.py"] == PLANTED["pkg/fork_ctor.py"]
