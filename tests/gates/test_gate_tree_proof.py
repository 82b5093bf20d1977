"""The tree a gate result proves is the tree its gates saw, for every state a checkout can be in.

Each case puts the checkout in one state git knows (an unstaged edit, a staged then re-edited file, a
deletion, an intent-to-add entry, a mode change, an untracked symlink, names with spaces, globs and a
leading dash, no committer identity) and runs a gate that writes a manifest of every file it sees. Two
entry points: `ds4sync gate` outside a run (the gates run in a scratch copy) and the runner in a given
worktree (as a run's gates do). Each must see exactly the checkout minus its ignored files, and the
result's tree must be git's tree of those files.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import git
import pytest
import yaml
from gates_helpers import PYTHON, workspace

from ds4sync.cli import main
from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.gates.runner import TierOptions, run_tier

MANIFEST = """\
import hashlib, json, os, stat, sys
from pathlib import Path

seen = {}
for root, dirs, files in os.walk("."):
    dirs[:] = [d for d in dirs if d != ".git" and not os.path.islink(os.path.join(root, d))]
    for name in files + [d for d in os.listdir(root) if os.path.islink(os.path.join(root, d)) and d not in files]:
        path = os.path.join(root, name)[2:]
        if path == ".git":  # a linked worktree's pointer to its repository
            continue
        if os.path.islink(path):
            seen[path] = ["link", os.readlink(path)]
        else:
            mode = os.stat(path).st_mode
            seen[path] = ["file", bool(mode & stat.S_IXUSR), hashlib.sha256(Path(path).read_bytes()).hexdigest()]
Path(sys.argv[1]).write_text(json.dumps(seen, sort_keys=True))
"""

IGNORED = ("build.log", "cache/blob.bin")  # ignored by the checkout's .gitignore: no gate sees them


def manifest(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, list]:
    """What MANIFEST writes, computed here for the checkout (``skip``: relative paths left out)."""
    seen: dict[str, list] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if ".git" in rel.parts or rel.as_posix() in skip or any(p.is_symlink() for p in list(rel.parents)[:-1]):
            continue
        if path.is_symlink():
            seen[rel.as_posix()] = ["link", os.readlink(path)]
        elif path.is_file():
            mode = path.stat().st_mode
            seen[rel.as_posix()] = ["file", bool(mode & stat.S_IXUSR), hashlib.sha256(path.read_bytes()).hexdigest()]
    return seen


def _edit(repo: RepoBuilder) -> None:
    (repo.path / "pkg" / "a.py").write_text("edited, not committed\n")


def _staged_then_edited(repo: RepoBuilder) -> None:
    (repo.path / "pkg" / "a.py").write_text("staged\n")
    git.Repo(repo.path).git.add("pkg/a.py")
    (repo.path / "pkg" / "a.py").write_text("edited again after staging\n")


def _deleted(repo: RepoBuilder) -> None:
    (repo.path / "pkg" / "b.py").unlink()


def _staged_deletion(repo: RepoBuilder) -> None:
    git.Repo(repo.path).git.rm("-q", "pkg/b.py")


def _intent_to_add(repo: RepoBuilder) -> None:  # `git stash create` refuses this index
    (repo.path / "pkg" / "new.py").write_text("new, added with -N\n")
    git.Repo(repo.path).git.add("-N", "pkg/new.py")
    _edit(repo)


def _mode_change(repo: RepoBuilder) -> None:
    path = repo.path / "tool.sh"
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _untracked_symlink(repo: RepoBuilder) -> None:
    (repo.path / "link-to-a.py").symlink_to("pkg/a.py")
    (repo.path / "dangling").symlink_to("no-such-file")


def _odd_names(repo: RepoBuilder) -> None:
    for name in ("-dash [1]*.txt", "sp ace/ü n?.py", "pkg/tab\tname.txt"):
        (repo.path / name).parent.mkdir(parents=True, exist_ok=True)
        (repo.path / name).write_text(f"{name}\n")


def _no_identity(repo: RepoBuilder) -> None:  # nothing to commit as: the proof must not need to commit
    with git.Repo(repo.path).config_writer() as cfg:
        cfg.remove_option("user", "email")
        cfg.remove_option("user", "name")
        cfg.set_value("user", "useConfigOnly", "true")
    _edit(repo)


STATES: dict[str, Callable[[RepoBuilder], None]] = {
    "edit": _edit,
    "staged-then-edited": _staged_then_edited,
    "deleted": _deleted,
    "staged-deletion": _staged_deletion,
    "intent-to-add": _intent_to_add,
    "mode-change": _mode_change,
    "untracked-symlink": _untracked_symlink,
    "odd-names": _odd_names,
    "no-identity": _no_identity,
}


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RepoBuilder, Path]:
    """A committed project with a manifest gate in its profile, and the path the gate writes its manifest to."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no global identity to fall back on
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    repo = RepoBuilder(tmp_path / "proj")
    out = tmp_path / "seen.json"
    tier: dict[str, Any] = {
        "tier": "unit",
        "gates": [{"name": "manifest", "kind": "command", "run": {"argv": ["{python}", "manifest.py", str(out)]}}],
    }
    repo.commit(
        {
            "manifest.py": MANIFEST,
            "pkg/a.py": "a\n",
            "pkg/b.py": "b\n",
            "tool.sh": "echo tool\n",
            ".gitignore": "*.log\ncache/\n",
            "profile/gates/unit.yaml": yaml.safe_dump(tier),
        },
        "project",
    )
    for rel in IGNORED:
        (repo.path / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo.path / rel).write_text("ignored\n")
    return repo, out


@pytest.mark.parametrize("state", sorted(STATES))
def test_gate_outside_a_run_sees_the_checkout_and_proves_its_tree(
    checkout: tuple[RepoBuilder, Path], state: str, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, out = checkout
    STATES[state](repo)
    expected, tree = manifest(repo.path, skip=IGNORED), GitRepo(repo.path).worktree_tree()[0]
    args = ["gate", "--tier", "unit", "--repo", str(repo.path), "--profile", str(repo.path / "profile")]
    code = main([*args, "--python", sys.executable, "--json"])
    printed = capsys.readouterr()
    assert code == 0, printed
    assert json.loads(out.read_text()) == expected
    (result,) = json.loads(printed.out)["data"]["gates"]
    assert (result["status"], result["tree"]) == ("passed", tree)
    assert manifest(repo.path, skip=IGNORED) == expected  # the checkout itself is as it was


@pytest.mark.parametrize("state", sorted(STATES))
def test_gate_in_a_given_worktree_proves_the_tree_it_saw(checkout: tuple[RepoBuilder, Path], state: str) -> None:
    repo, out = checkout
    STATES[state](repo)
    result = run_tier(workspace(repo), TierOptions(tier="unit", python=PYTHON, target=repo.path, use_cache=False))
    (gate,) = result.gates
    assert gate.status == "passed", gate
    seen = json.loads(out.read_text())
    assert seen == manifest(repo.path)  # here, in the person's own worktree, ignored files are there too
    # The tree holds what the gate saw but the ignored files: check it out elsewhere and compare.
    elsewhere = repo.path.parent / "from-the-tree"
    GitRepo(repo.path).run("worktree", "add", "--quiet", "--detach", str(elsewhere), "HEAD")
    assert result.tree is not None
    GitRepo(elsewhere).run("read-tree", "--reset", "-u", result.tree)
    assert manifest(elsewhere) == {rel: entry for rel, entry in seen.items() if rel not in IGNORED}
    assert gate.tree == result.tree and gate.commit == GitRepo(repo.path).head()


def test_a_gate_that_edits_a_tracked_file_makes_every_result_an_error(checkout: tuple[RepoBuilder, Path]) -> None:
    """The proof holds only if the tree did not move under the gates: an edit of a tracked file (here by a gate
    itself) turns every gate of the tier into an error naming both trees; an untracked file a gate writes (a cache)
    does not count."""
    repo, out = checkout
    tier: dict[str, Any] = {
        "tier": "unit",
        "gates": [
            {"name": "manifest", "kind": "command", "run": {"argv": ["{python}", "manifest.py", str(out)]}},
            {"name": "cache", "kind": "command", "run": {"argv": ["{python}", "-c", "open('cache.txt', 'w')"]}},
        ],
    }
    repo.commit({"profile/gates/unit.yaml": yaml.safe_dump(tier)}, "a gate that writes a cache")
    ok = run_tier(workspace(repo), TierOptions(tier="unit", python=PYTHON, target=repo.path, use_cache=False))
    assert [g.status for g in ok.gates] == ["passed", "passed"]
    edits = "open('pkg/a.py', 'a').write('# a gate was here\\n')"
    tier["gates"].append({"name": "editor", "kind": "command", "run": {"argv": ["{python}", "-c", edits]}})
    repo.commit({"profile/gates/unit.yaml": yaml.safe_dump(tier)}, "a gate that edits a tracked file")
    bad = run_tier(workspace(repo), TierOptions(tier="unit", python=PYTHON, target=repo.path, use_cache=False))
    assert {g.status for g in bad.gates} == {"error"}
    assert all(g.reason and "the checkout changed while the gates ran" in g.reason for g in bad.gates)
