"""The Ray executor's node cache: what the next gate task on a host removes of what killed tasks left.

No Ray here: :func:`ds4sync.gates.executors._node_checkout` is what each task runs first, on real git.
Folders of a task whose process is gone from this host go; those of a live task, or of another host
sharing the cache folder, stay.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.gates import executors


def test_the_next_task_removes_only_this_hosts_dead_tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = RepoBuilder(tmp_path / "source")
    commit = source.commit({"a.txt": "a\n"}, "init")
    cache = tmp_path / "cache"
    monkeypatch.setenv("DS4SYNC_RAY_CACHE", str(cache))
    clone, first = executors._node_checkout(str(source.path), commit, "g")
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs
    names = {
        "dead-here": f"g-{commit[:12]}-{executors._HOST}-{dead.pid}-1",
        "dead-elsewhere": f"g-{commit[:12]}-0badc0de-{dead.pid}-2",
        "live-here": first.name,  # this process: alive
    }
    for key in ("dead-here", "dead-elsewhere"):
        clone.worktree_add_detached(cache / "worktrees" / names[key], commit)
        (cache / "logs" / names[key]).mkdir(parents=True)
    _, second = executors._node_checkout(str(source.path), commit, "g")
    left = {p.name for p in (cache / "worktrees").iterdir()}
    assert left == {names["dead-elsewhere"], names["live-here"], second.name}
    assert {p.name for p in (cache / "logs").iterdir()} == {names["dead-elsewhere"]}
    registered = clone.worktrees()
    assert not any(names["dead-here"] in path for path in registered)
    executors._drop_task(clone, second, cache / "logs" / "absent")
    assert not second.exists() and not any(second.name in path for path in clone.worktrees())
