"""Nothing outside ``ds4sync/core/git/`` runs git: every git command is a named verb of the git package.

What counts as running git directly, in a module of ``ds4sync/`` outside ``ds4sync/core/git/`` (read from
its syntax tree, so a comment or a message naming a git command is no hit):

- **an argv of git**: a list or tuple display whose first element is the string ``"git"``, passed to any
  call (``subprocess.run(["git", ...])``, ``run_child(["git", ...])``, ``Popen(("git", ...))``, or a
  ``command=("git", ...)`` handed on to be run);
- **a git command line handed to the git package's runners**: a call of a method named ``run``,
  ``run_bytes`` or ``out`` whose first positional argument is a string (``repo.run("log", ...)``) or a
  starred expression (``repo.run(*args)``), the shapes of :meth:`ds4sync.core.git.GitRepo.run`;
- **GitPython**: ``import git`` or ``from git import ...`` (it passes the caller's ``GIT_*`` on).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ds4sync"
GIT_PACKAGE = PACKAGE / "core" / "git"
_RUNNERS = ("run", "run_bytes", "out")


def _is_git_argv(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.List | ast.Tuple)
        and bool(node.elts)
        and isinstance(node.elts[0], ast.Constant)
        and node.elts[0].value == "git"
    )


def _imports_gitpython(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "git" for a in node.names)
    return isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "git"


def git_calls(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of every place ``source`` runs git directly (the three shapes of the module doc)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if _imports_gitpython(node) and isinstance(node, ast.stmt):
            found.append((node.lineno, "imports GitPython"))
        elif isinstance(node, ast.Call):
            args = [*node.args, *(k.value for k in node.keywords)]
            if any(_is_git_argv(a) for a in args):
                found.append((node.lineno, "passes a git argv"))
            elif isinstance(node.func, ast.Attribute) and node.func.attr in _RUNNERS and node.args:
                first = node.args[0]
                if isinstance(first, ast.Starred) or (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    found.append((node.lineno, f"hands a git command line to .{node.func.attr}()"))
    return found


def test_only_the_git_package_runs_git() -> None:
    hits = [
        f"{file.relative_to(ROOT)}:{line}: {what}"
        for file in sorted(PACKAGE.rglob("*.py"))
        if not file.is_relative_to(GIT_PACKAGE)
        for line, what in git_calls(file.read_text(encoding="utf-8"))
    ]
    assert hits == [], "run git through a named verb of ds4sync.core.git:\n" + "\n".join(hits)


def test_the_git_package_is_where_git_runs() -> None:
    # The scan reads the right files: it finds the package's own runner, which starts git with an argv.
    runner = (GIT_PACKAGE / "env.py").read_text(encoding="utf-8")
    assert "passes a git argv" in [what for _, what in git_calls(runner)]


def test_the_boundary_scan_finds_each_shape() -> None:
    source = """
import git
from git import Repo
import subprocess
from ds4sync.core.proc import run_child
subprocess.run(["git", "status"], check=True)
run_child(("git", "fetch"), cwd=".")
record(command=("git", "diff", "--check", base))
repo.run("log", "-1")
wt.out("rev-parse", "HEAD")
wt.run_bytes("cat-file", "blob", spec)
self.repo.run(*args, ok_codes=(0, 128))
"""
    assert [line for line, _ in git_calls(source)] == [2, 3, 6, 7, 8, 9, 10, 11, 12]


def test_the_boundary_scan_lets_the_rest_be() -> None:
    source = """
import gitlab
from ds4sync.core.git import GitRepo
repo.log_tail("git")
proc.run(argv, cwd=root)
subprocess.run(["python", "-c", "print('git')"])
repo.run_phase(ctx)
message = "run `git fetch --unshallow`"
repo.resolve_commit("HEAD")
gate.run(ctx, tier)
"""
    assert git_calls(source) == []
