"""The "Remaining gate" list of real nightly runs: a tier is a blocker only when the run required it and it
did not run, whatever tiers the profile defines and whatever tiers ``gates.tiers`` / ``promote_tiers`` name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.core.names import TIERS
from ds4sync.models.record import RecordStore
from ds4sync.report.build import build_view
from tests.scenarios import BRANCH, lines, make_pair
from tests.timing import scaled_s


def _profile(tmp_path: Path) -> Path:
    """A profile with a gate in every tier: static and unit run anywhere, the others would need a GPU or server."""
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    for tier in TIERS:
        gate = (
            {"name": "whitespace", "kind": "static", "run": {"check": "diff-check"}}
            if tier == "static"
            else {"name": f"{tier}-ok", "kind": "command", "run": {"argv": ["{python}", "-c", "pass"]}}
        )
        doc = {"tier": tier, "gates": [{**gate, "timeout": scaled_s(60)}]}
        (profile / "gates" / f"{tier}.yaml").write_text(yaml.safe_dump(doc))
    return profile


def _nightly(tmp_path: Path, gates: dict, *, conflict: bool = False) -> list[str]:
    """Run one real nightly with ``gates:`` and return the tier items of its report's Remaining gate."""
    fork_change = {"a.py": lines("fork")} if conflict else {"b.py": lines("fork")}
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("up")}], [fork_change])
    config = {
        "upstream": {"remote": "upstream", "ref": "main"},
        "fork": {"branch": BRANCH},
        "profile": str(_profile(tmp_path)),
        "gates": {"python": sys.executable, **gates},
    }
    (pair.repo / "ds4sync.yaml").write_text(yaml.safe_dump(config))
    main(["nightly", "--repo", str(pair.repo), "--no-notify"])
    store = RecordStore(pair.repo / ".git" / "ds4sync")
    record = store.load(store.run_ids()[-1])
    view = build_view(record)
    return sorted(i.text for i in view.remaining if i.kind == "tier")


@pytest.mark.parametrize(
    ("gates", "blockers"),
    [
        # The configuration: gpu, kernel, serving and perf are defined but not asked for.
        ({"tiers": ["static", "unit"]}, []),
        ({"tiers": ["unit"]}, []),
        ({"tiers": []}, []),
        # promote requires a tier the gate phase does not run: that one is owed.
        ({"tiers": ["unit"], "promote_tiers": ["static", "unit"]}, ["static tier: required, not run"]),
        # A tier run but not required for promote is no blocker either way.
        ({"tiers": ["static", "unit"], "promote_tiers": ["unit"]}, []),
    ],
    ids=["static+unit", "unit", "none", "promote-needs-static", "promote-needs-unit-only"],
)
def test_only_required_tiers_that_did_not_run_are_blockers(tmp_path: Path, gates: dict, blockers: list[str]) -> None:
    assert _nightly(tmp_path, gates) == blockers


def test_required_tiers_of_a_run_stopped_before_its_gates_are_all_owed(tmp_path: Path) -> None:
    # The merge needs a person: neither required tier ran, and the ones never asked for are still not owed.
    items = _nightly(tmp_path, {"tiers": ["static", "unit"]}, conflict=True)
    assert items == ["static tier: required, not run", "unit tier: required, not run"]
