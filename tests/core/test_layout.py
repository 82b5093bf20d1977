"""Checks that keep the layout as the README draws it: no import cycle, a leaf core, a light CLI."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ds4sync"


def _modules() -> dict[str, Path]:
    found = {}
    for file in PACKAGE.rglob("*.py"):
        parts = file.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = file
    return found


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Every ds4sync module each module imports, at module level or inside functions."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, file in modules.items():
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("ds4sync"):
                target = node.module or ""
                submodules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
                graph[name].update(submodules)
                if target in modules and len(submodules) < len(node.names):
                    graph[name].add(target)
            elif isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in modules)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle() -> None:
    assert _cycles(_imports(_modules())) == []


def test_the_cycle_check_can_fail() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["e"]]


def test_core_imports_nothing_else_of_ours() -> None:
    graph = _imports(_modules())
    leaks = {m: sorted(t for t in targets if not t.startswith("ds4sync.core")) for m, targets in graph.items()}
    assert {m: t for m, t in leaks.items() if m.startswith("ds4sync.core") and t} == {}


def test_readme_layout_is_the_layout_on_disk() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Layout", 1)[1].split("```")[1]
    named = set(re.findall(r"ds4sync/(\w+)/", block))
    on_disk = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert named == on_disk


def _heavy_imported(module: str, heavy: set[str]) -> list[str]:
    """The top-level names in ``heavy`` that importing ``module`` in a fresh interpreter loads."""
    probe = f"import sys, {module}; print(sorted(set({sorted(heavy)!r}) & {{m.split('.')[0] for m in sys.modules}}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    return ast.literal_eval(out.stdout.strip())


def test_cli_start_up_imports_no_heavy_library() -> None:
    heavy = {"torch", "triton", "numpy", "ray", "plotly", "git", "jinja2", "httpx", "yaml"}
    assert _heavy_imported("ds4sync.cli", heavy) == []


def test_run_record_imports_no_heavy_library() -> None:
    # status, resume, merge, nightly, report and promote all read the record: it names result models
    # (the packages' results modules), never the code that produces them and its clients.
    heavy = {"httpx", "rich", "yaml", "ruamel", "jinja2", "git", "torch", "numpy", "ray"}
    assert _heavy_imported("ds4sync.record", heavy) == []


def test_the_heavy_import_probe_can_fail() -> None:
    assert _heavy_imported("json, email.mime.text", {"email", "json", "tomllib"}) == ["email", "json"]


def _writers(call: str) -> set[str]:
    """The package modules whose source calls ``call`` (a definition of it is no call)."""
    pattern = re.compile(rf"(?<!def )\b{re.escape(call)}\(")
    return {str(file.relative_to(ROOT)) for file in PACKAGE.rglob("*.py") if pattern.search(file.read_text())}


def test_the_runner_is_the_only_writer_of_the_record_and_the_report() -> None:
    assert _writers("store.save") == {"ds4sync/runner.py"}
    assert _writers("write_report") == {"ds4sync/runner.py"}


def test_the_writer_check_can_fail() -> None:
    assert "ds4sync/report/files.py" not in _writers("write_report")  # where it is defined
    assert {"ds4sync/runner.py", "ds4sync/loop/sync.py"} <= _writers("update_run")
