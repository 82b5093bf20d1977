"""benchmarks/realsyncs.py: a fork's rebases found from its own branches, on generated histories."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder

_SPEC = importlib.util.spec_from_file_location(
    "realsyncs_under_test", Path(__file__).resolve().parents[1] / "benchmarks" / "realsyncs.py"
)
assert _SPEC is not None and _SPEC.loader is not None
realsyncs = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = realsyncs  # dataclasses look their module up
_SPEC.loader.exec_module(realsyncs)


def _fork_line(b: RepoBuilder, name: str, start: str, subjects: list[str], tag: str) -> list[str]:
    b.branch(name, start)
    b.checkout(name)
    shas = [b.commit({f"fork/{i}.py": f"{tag} {s}\n"}, s) for i, s in enumerate(subjects)]
    b.checkout("main")
    return shas


def test_rebases_pair_with_the_nearest_newer_base_and_the_closing_commit(builder: RepoBuilder) -> None:
    b = builder
    base0 = b.commit({"up.py": "0\n"}, "upstream 0")
    b.commit({"up.py": "1\n"}, "upstream 1")
    base1 = b.head()
    b.commit({"up.py": "2\n"}, "upstream 2")
    base2 = b.head()
    subjects = ["fork: kernels", "fork: scheduler", "fork: kv cache"]
    old = _fork_line(b, "backup/fork-before-rebase", base0, subjects, "old")
    # The same commits on base1, then one more commit the person added after the rebase.
    mid = _fork_line(b, "fork-mid", base1, [*subjects, "fork: later work"], "mid")
    # Again on base2, with a squash that carries too few subjects to pair with anything.
    _fork_line(b, "fork-squashed", base2, ["fork: everything"], "new")
    # An unrelated experiment on base2 shares one subject: not a rebase of the backup.
    _fork_line(b, "experiment", base2, ["fork: kernels", "exp 1", "exp 2", "exp 3"], "exp")

    syncs = realsyncs.find_real_syncs(GitRepo(b.path), upstream="main")

    by_before = {s.before: s for s in syncs}
    sync = by_before["backup/fork-before-rebase"]
    assert (sync.before_head, sync.old_base) == (old[-1], base0)
    assert (sync.after, sync.new_base) == ("fork-mid", base1)
    assert sync.after_head == mid[2]  # the commit closing the matched run, not the later work
    assert (sync.carried, sync.total, sync.new, sync.upstream_commits) == (3, 3, 0, 1)
    assert "fork-squashed" not in {s.after for s in syncs}
    assert "experiment" not in {s.after for s in syncs}
