"""`ds4sync gate` outside a run tests the checkout as it is, in a scratch copy: it never writes into it."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from ds4sync.cli import main
from tests import faultrepo
from tests.scenarios import lines, make_pair

WRITER = """\
import pathlib, sys
pathlib.Path("written-by-the-gate.txt").write_text("x")
pathlib.Path("pkg_cache").mkdir(exist_ok=True)
sys.exit(0 if pathlib.Path("f.py").read_text() == "edited, not committed\\n" else 1)
"""


def test_gate_outside_a_run_leaves_the_checkout_byte_identical(tmp_path: Path, capsys) -> None:
    pair = make_pair(tmp_path, {"f.py": lines("a")}, [{"f.py": lines("up")}], [{"g.py": lines("fork")}])
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    script = profile / "writer.py"
    script.write_text(WRITER)
    tier = {
        "tier": "unit",
        "gates": [
            {"name": "writer", "kind": "command", "run": {"argv": ["{python}", str(script)], "expect_exit": 0}},
            {"name": "tests", "kind": "pytest", "run": {"paths": ["t"], "args": ["-q"]}},
        ],
    }
    (profile / "gates" / "unit.yaml").write_text(yaml.safe_dump(tier))
    (pair.repo / "f.py").write_text("edited, not committed\n")  # the gate must see this
    (pair.repo / "t").mkdir()
    (pair.repo / "t" / "test_x.py").write_text("def test_x():\n    assert True\n")  # untracked, seen too
    before = faultrepo.checkout_digest(pair.repo)
    code = main(
        ["gate", "--tier", "unit", "--repo", str(pair.repo), "--profile", str(profile), "--python", sys.executable]
    )
    assert code == 0, capsys.readouterr()
    assert faultrepo.checkout_digest(pair.repo) == before  # no .pytest_cache, __pycache__, written file
    assert not (pair.repo / "written-by-the-gate.txt").exists()
    assert not list((pair.repo / ".git" / "ds4sync").glob("gate-worktrees/*"))  # the copy is gone
