"""Checks that keep the layout as the README draws it.

No import cycle between modules or between packages, packages layered in the order a run goes, a leaf core,
a light CLI.
"""

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


#: ds4sync's packages (and top-level modules), lowest first: each imports only those before it, so the
#: layers read in the order a run goes. A package or module not named here fails the check.
LAYERS = (
    "core",  # errors, the one git module, processes, files: nothing else of ours
    "models",  # the run record, ds4sync.yaml, each phase's results and settings: core only
    "report",  # the report of a record (rendered from models only), which the runner writes
    "runner",  # Phase, RunContext, run_phases
    "merge",  # prepare, merge, resolve, commit
    "patchsets",  # replay, verify
    "semantic",  # semantic
    "native",  # build
    "serving",  # the serving tier's server, probes, bench and A/B, which gate runs
    "gates",  # gate
    "publish",  # publish
    "pipeline",  # the phase tuple
    "drift",  # drift watch, beside the runs
    "loop",  # a run's lifecycle, nightly, promote, bisect
    "demo",  # the sample fork and its loop
    "cli",  # typer adapters over all of the above
)

#: The imports that run up the layers on purpose, (importer, imported) package: why.
UPWARD = {
    ("merge", "patchsets"): "merge reads the patch-sets, the fork's definition, before replay proves them: "
    "which patch-set owns a conflicted hunk (plan, provenance) and whose invariants a proposed resolution "
    "must keep (proposals, validation)",
    ("merge", "semantic"): "a proposed resolution is refused when the semantic check finds a new blocker on "
    "its tree (imported inside the function, only when a resolver proposes)",
}

Edges = dict[tuple[str, str], list[tuple[str, str]]]


def _layer(module: str) -> str:
    """The layer of a ds4sync module: its package, or the module itself when it is top-level."""
    return module.split(".")[1]


def _package_imports(graph: dict[str, set[str]]) -> Edges:
    """Each (importer, imported) pair of distinct layers, with the module imports that make it."""
    edges: Edges = {}
    for module, targets in graph.items():
        for target in sorted(targets):
            if "." in module and "." in target and _layer(module) != _layer(target):
                edges.setdefault((_layer(module), _layer(target)), []).append((module, target))
    return edges


def _upward(edges: Edges, layers: tuple[str, ...]) -> Edges:
    """The pairs whose imported layer comes after the importer's in ``layers``."""
    rank = {layer: n for n, layer in enumerate(layers)}
    return {pair: imports for pair, imports in edges.items() if rank.get(pair[1], -1) > rank.get(pair[0], -1) >= 0}


def test_every_package_has_one_layer() -> None:
    on_disk = {_layer(m) for m in _modules() if "." in m}
    assert len(set(LAYERS)) == len(LAYERS)
    assert (sorted(on_disk - set(LAYERS)), sorted(set(LAYERS) - on_disk)) == ([], [])


def test_no_import_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = {layer: set() for layer in LAYERS}
    for importer, imported in _package_imports(_imports(_modules())):
        graph.setdefault(importer, set()).add(imported)
    assert _cycles(graph) == []


def test_imports_run_down_the_layers() -> None:
    upward = _upward(_package_imports(_imports(_modules())), LAYERS)
    assert {pair: imports for pair, imports in upward.items() if pair not in UPWARD} == {}
    assert sorted(set(UPWARD) - set(upward)) == [], "an allowed upward import no longer exists: drop it"


def test_the_layer_check_can_fail() -> None:
    graph = {"x.a.m": {"x.b.n", "x.a.o"}, "x.b.n": {"x.c"}, "x.c": set(), "x.a.o": set()}
    edges = _package_imports(graph)
    assert edges == {("a", "b"): [("x.a.m", "x.b.n")], ("b", "c"): [("x.b.n", "x.c")]}
    assert _upward(edges, ("c", "b", "a")) == {}
    assert _upward(edges, ("a", "c", "b")) == {("a", "b"): [("x.a.m", "x.b.n")]}


def test_the_pipeline_docstring_names_the_phases_in_order() -> None:
    from ds4sync import pipeline

    chain = next(line for line in (pipeline.__doc__ or "").splitlines() if "→" in line)
    named = re.split(r"[,→]", re.sub(r"\w+ \(([^)]*)\)", r"\1", chain))
    assert [name.strip() for name in named] == [phase.name for phase in pipeline.PHASES]


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
    assert _heavy_imported("ds4sync.models.record", heavy) == []


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
