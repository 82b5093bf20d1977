"""Run records that the real pipeline produced: a clean merge, a needs-person merge, a failed and a killed run.

Each function drives the real CLI (or the real phases) on real git repositories in a tmp folder
and returns the store and the run's id; the report tests render those records, never hand-made ones.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import yaml

from ds4sync.cli import main
from ds4sync.models.record import RecordStore
from tests.scenarios import BRANCH, lines, make_pair
from tests.test_killed_run import KILLER
from tests.timing import scaled_s

CHECK = "import sys; sys.path.insert(0, '.'); import a; assert 'up' in a.NAMES, f'lost in the merge: {a.NAMES}'"


def _store(repo: Path) -> RecordStore:
    return RecordStore(repo / ".git" / "ds4sync")


def merged_run(tmp_path: Path) -> tuple[RecordStore, str]:
    """``ds4sync merge`` of a clean merge: merge, replay and verify done, the rest not run (paused)."""
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) == 0
    store = _store(pair.repo)
    return store, store.run_ids()[-1]


def needs_person_run(tmp_path: Path) -> tuple[RecordStore, str]:
    """``ds4sync merge`` where both sides changed the same lines: stopped in resolve for a person."""
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("up")}], [{"a.py": lines("fork")}])
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) == 4
    store = _store(pair.repo)
    return store, store.run_ids()[-1]


def failed_run(tmp_path: Path) -> tuple[RecordStore, str]:
    """``ds4sync nightly`` whose merged tree fails a command gate (an assertion) and passes a pytest gate."""
    pair = make_pair(
        tmp_path,
        {"a.py": "NAMES = ['base']\n", "tests/test_a.py": "def test_a():\n    assert True\n"},
        [{"c.py": lines("upstream")}],
        [{"b.py": lines("fork")}],
    )
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    gates = {
        "tier": "unit",
        "gates": [
            {
                "name": "names-kept",
                "kind": "command",
                "run": {"argv": ["{python}", "-c", CHECK]},
                "timeout": scaled_s(60),
            },
            {"name": "unit-tests", "kind": "pytest", "run": {"paths": ["tests"]}, "timeout": scaled_s(120)},
        ],
    }
    (profile / "gates" / "unit.yaml").write_text(yaml.safe_dump(gates))
    config = {
        "upstream": {"remote": "upstream", "ref": "main"},
        "fork": {"branch": BRANCH},
        "profile": str(profile),
        "gates": {"tiers": ["unit"], "python": sys.executable},
    }
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump(config))
    assert main(["nightly", "--repo", str(pair.repo), "--no-notify"]) == 1
    store = _store(pair.repo)
    return store, store.run_ids()[-1]


def killed_run(tmp_path: Path) -> tuple[RecordStore, str]:
    """The real pipeline SIGKILLed right after ``git merge``: phase merge left running, its process gone."""
    pair = make_pair(
        tmp_path,
        {"f.py": lines("a"), "g.py": lines("g")},
        [{"f.py": lines("up"), "g.py": lines("g", "up")}],
        [{"f.py": lines("fork")}],
    )
    proc = subprocess.run([sys.executable, "-c", KILLER, str(pair.repo), BRANCH], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    store = _store(pair.repo)
    return store, store.run_ids()[-1]
