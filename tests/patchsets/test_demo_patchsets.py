"""The demo fork's patch-sets show every replay outcome across the demo's two syncs."""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from ds4sync.demo import run as demo
from ds4sync.demo.patchsets import adapt_like_a_person, write_demo_patchsets
from ds4sync.loop import sync
from ds4sync.runner import open_workspace


def _statuses(outcome) -> dict[str, str]:
    return {e.id: e.status for e in outcome.record.results.replay.entries}


@pytest.mark.slow
def test_demo_patchsets_cover_every_outcome(tmp_path: Path) -> None:
    upstream, shas = demo.build_upstream(tmp_path / "upstream")
    profile = tmp_path / "profile"
    (profile / "patches" / "resolutions").mkdir(parents=True)
    fork = demo.build_fork(tmp_path / "fork", upstream.path, shas["base"])
    fork_head = fork.head()
    written = write_demo_patchsets(profile, fork, base=shas["base"])
    assert fork.head() == fork_head and git.Repo(fork.path).active_branch.name == demo.FORK_BRANCH
    demo.write_demo_gates(profile)
    config = demo.write_config(fork.path, upstream.path, profile)

    def ws():
        return open_workspace(fork.path, config_path=config)

    first = sync.start_merge(ws(), shas["u1"])
    assert first.status == "needs-person"  # the envs.py conflict of the merge demo
    demo.resolve_like_a_person(Path(first.record.worktree))
    first = sync.resume(ws())
    assert first.status == "done", first.outcome
    assert _statuses(first) == written.expected["u1"]

    second = sync.start_merge(ws(), shas["u2"])
    assert second.status == "needs-person"
    assert second.record.phases["replay"].status == "needs-person"
    assert _statuses(second) == written.expected["u2"]
    adapt_like_a_person(Path(second.record.worktree))
    second = sync.resume(ws())
    assert second.status == "done", second.outcome
    statuses = _statuses(second)
    assert statuses["sm120-attention-logging"] == "adapted"
    text = (Path(second.record.worktree) / demo_attention()).read_text()
    assert "import math\nimport logging\n" in text
    assert second.record.results.verify.totals["violated"] == 0


def demo_attention() -> str:
    from ds4sync.demo.patchsets import ATTENTION

    return ATTENTION


def test_write_demo_patchsets_rejects_another_repo(builder, tmp_path: Path) -> None:
    base = builder.commit({"README.md": "x\n"}, "base")
    with pytest.raises(ValueError, match="is not the demo fork"):
        write_demo_patchsets(tmp_path / "profile", builder, base=base)
