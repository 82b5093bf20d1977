"""Whether code an invariant found is live: imported from the feature's entry module, its own imports resolving.

A fork feature can survive a merge as text in a module nothing imports any more (a person kept the old
layout's file), or in a module whose imports name a package upstream removed. An invariant with ``live``
(:class:`~ds4sync.patchsets.model.Liveness`) counts only what it finds in live files. Modules are read from
the tree (a commit's blobs in one ``git cat-file --batch`` per import level) and parsed with ``ast``, never
imported.
"""

from __future__ import annotations

import ast
import re
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ds4sync.models.patchsets_results import InvariantStatus
from ds4sync.patchsets.model import Liveness
from ds4sync.patchsets.tree import Tree, read_many

Outcome = tuple[InvariantStatus, list[str], str, list[str]]
_BODIES = ("body", "orelse", "finalbody")
_IMPORT_MODULE = re.compile(r"""\bimport_module\(\s*["']([A-Za-z_][\w.]*)["']""")
_GUARDS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


@dataclass(frozen=True)
class _Import:
    line: int
    module: str  # absolute dotted name the statement needs (for ``from a import b``: ``a``)
    names: tuple[str, ...]  # ``from`` imports: the names, which may be submodules
    guarded: bool  # inside ``try`` with an ``except ImportError`` (or broader)
    in_tree: bool  # relative, or its top package is one of the tree's


@dataclass
class ImportGraph:
    """The Python modules of one tree under ``root`` and the imports between them (parsed as reached)."""

    tree: Tree
    root: str
    modules: dict[str, str | None] = field(default_factory=dict)  # dotted name -> file (None: namespace package)
    _imports: dict[str, list[_Import]] = field(default_factory=dict)
    _bound: dict[str, frozenset[str] | None] = field(default_factory=dict)  # None: any name (``__getattr__``, ``*``)
    _by_path: dict[str, str] = field(default_factory=dict)
    _walks: dict[tuple[str, ...], tuple[dict[str, str | None], list[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        prefix = self.root.strip("/") + "/" if self.root.strip("/") else ""
        for path in self.tree.paths():
            if not path.endswith(".py") or not path.startswith(prefix):
                continue
            parts = path[len(prefix) : -3].split("/")
            if not all(p.isidentifier() for p in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            for depth in range(1, len(parts)):
                self.modules.setdefault(".".join(parts[:depth]), None)
            if parts:
                self.modules[".".join(parts)] = path
        self.tops = frozenset(name.split(".")[0] for name in self.modules)
        self._by_path = {file: name for name, file in self.modules.items() if file is not None}

    def module_of(self, path: str) -> str | None:
        """The dotted module name of ``path``, or None when it is no module under the root."""
        return self._by_path.get(path)

    def imports(self, module: str) -> list[_Import]:
        """The import statements of ``module`` (read and parsed once; a file that does not parse has none)."""
        self._load([module])
        return self._imports.get(module, [])

    def reaches(self, entries: tuple[str, ...], module: str) -> list[str] | None:
        """The import chain ``[entry, ..., module]`` by which one of ``entries`` (those that exist) imports
        ``module`` at any depth, or None. Importing ``a.b.c`` runs ``a`` and ``a.b`` too, so they count. The
        walk goes breadth first, one batch read per level, and stops at the level that finds ``module``;
        later questions about the same entries go on from there."""
        if entries not in self._walks:
            self._walks[entries] = (
                {e: None for e in entries if e in self.modules},
                [e for e in entries if e in self.modules],
            )
        parent, frontier = self._walks[entries]
        while module not in parent and frontier:
            self._load(frontier)
            found: list[str] = []
            for importer in frontier:
                for target in self._targets(importer):
                    if target not in parent:
                        parent[target] = importer
                        found.append(target)
            frontier[:] = found
        if module not in parent:
            return None
        steps: list[str] = []
        step: str | None = module
        while step is not None:
            steps.append(step)
            step = parent[step]
        return steps[::-1]

    def unresolved(self, module: str) -> list[str]:
        """``path:line: imports X`` for each unguarded import of ``module`` that names the tree's packages and
        finds no module or package there."""
        path = self.modules.get(module)
        needed = [imp for imp in self.imports(module) if imp.in_tree and not imp.guarded]
        self._load([imp.module for imp in needed if imp.names])
        problems: list[str] = []
        for imp in needed:
            if imp.module not in self.modules:
                problems.append(f"{path}:{imp.line}: imports {imp.module}, which is not in the tree")
                continue
            bound = self._bound.get(imp.module, frozenset())
            missing = [
                n for n in imp.names if f"{imp.module}.{n}" not in self.modules and bound is not None and n not in bound
            ]
            problems += [f"{path}:{imp.line}: imports {n} from {imp.module}, which has no such name" for n in missing]
        return problems

    def _targets(self, module: str) -> Iterator[str]:
        for imp in self._imports.get(module, []):
            names = [imp.module, *(f"{imp.module}.{n}" for n in imp.names)]
            for name in names:
                parts = name.split(".")
                for depth in range(1, len(parts) + 1):
                    prefix = ".".join(parts[:depth])
                    if prefix in self.modules:
                        yield prefix

    def _load(self, modules: list[str]) -> None:
        wanted = {m: f for m in modules if m not in self._imports and (f := self.modules.get(m)) is not None}
        texts = read_many(self.tree, sorted(set(wanted.values())))
        for module, path in wanted.items():
            try:
                body = ast.parse(texts.get(path, ""), filename=path)
            except (SyntaxError, ValueError):
                self._imports[module], self._bound[module] = [], None
                continue
            package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
            self._imports[module] = list(_imports_of(body, texts.get(path, ""), package, self.tops))
            self._bound[module] = _bound_names(body.body)
        for module in modules:
            self._imports.setdefault(module, [])


_GRAPHS: weakref.WeakKeyDictionary[Any, dict[str, ImportGraph]] = weakref.WeakKeyDictionary()


def graph_of(tree: Tree, root: str = "") -> ImportGraph:
    """The import graph of ``tree`` under ``root``, built once per tree object and shared by its invariants."""
    by_root = _GRAPHS.setdefault(tree, {})
    if root not in by_root:
        by_root[root] = ImportGraph(tree, root)
    return by_root[root]


def problem(graph: ImportGraph, path: str, live: Liveness) -> list[str]:
    """Why the code in ``path`` is not live (empty: it is), one line per reason."""
    module = graph.module_of(path)
    if module is None:
        return [f"{path} is not a module under {live.root or 'the top'} of the tree"]
    reasons: list[str] = []
    if live.entry:
        if not any(e in graph.modules for e in live.entry):
            reasons.append(f"none of the entry modules {', '.join(live.entry)} is in the tree")
        elif graph.reaches(live.entry, module) is None:
            reasons.append(f"{path} is not live: no import chain reaches {module} from {' or '.join(live.entry)}")
    if live.imports_resolve:
        reasons += graph.unresolved(module)
    return reasons


def chain(graph: ImportGraph, path: str, live: Liveness) -> str:
    """``entry -> ... -> module``: how ``path`` is reached (the first chain found; empty when it is not)."""
    module = graph.module_of(path)
    steps = graph.reaches(live.entry, module) if module else None
    return " -> ".join(steps or ())


class _Without:
    """``tree`` without some files, so an invariant is checked again on its live files alone."""

    def __init__(self, tree: Tree, hidden: set[str]) -> None:
        self._tree, self._hidden = tree, hidden
        self.label = tree.label

    def paths(self) -> list[str]:
        return [p for p in self._tree.paths() if p not in self._hidden]

    def read(self, path: str) -> str | None:
        return None if path in self._hidden else self._tree.read(path)


def judge(tree: Tree, inv: Any, outcome: Outcome, check: Callable[[Tree, Any], Outcome]) -> Outcome:
    """``outcome`` of ``check(tree, inv)`` with ``inv.live`` applied: a holding result whose Python files are
    all live holds (the import chain as evidence); one that held through files that are not live is checked
    again without them, and is ``violated`` naming them when it no longer holds."""
    live: Liveness = inv.live
    graph = graph_of(tree, live.root)
    hidden: dict[str, list[str]] = {}
    view: Tree = tree
    while outcome[0] == "holds":
        dead = {p: why for p in outcome[1] if p.endswith(".py") and (why := problem(graph, p, live))}
        if not dead:
            break
        hidden.update(dead)
        view = _Without(tree, set(hidden))
        outcome = check(view, inv)
    if not hidden:
        live_files = [p for p in outcome[1] if p.endswith(".py")]
        chains = [f"live: {chain(graph, p, live)}" for p in live_files] if live.entry and outcome[0] == "holds" else []
        return outcome[0], outcome[1], outcome[2], [*chains, *outcome[3]]
    status, files, detail, evidence = outcome
    reasons = [line for why in hidden.values() for line in why]
    if status != "holds":
        return "violated", sorted(hidden), f"found only in code that is not live: {reasons[0]}", reasons
    live_files = [p for p in files if p.endswith(".py")]
    chains = [f"live: {chain(graph, p, live)}" for p in live_files] if live.entry else []
    ignored = f" (not live, not counted: {', '.join(sorted(hidden))})" if hidden else ""
    return status, files, f"{detail}{ignored}", [*chains, *evidence, *reasons]


def _imports_of(body: ast.Module, text: str, package: str, tops: frozenset[str]) -> Iterator[_Import]:
    for node, guarded in _statements(body.body, guarded=False):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield _Import(node.lineno, alias.name, (), guarded, alias.name.split(".")[0] in tops)
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names if a.name != "*")
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                module = ".".join([*base, *([node.module] if node.module else [])])
                yield _Import(node.lineno, module, names, guarded, True)
            elif node.module:
                yield _Import(node.lineno, node.module, names, guarded, node.module.split(".")[0] in tops)
    # importlib.import_module("pkg.mod") with a literal name: an edge, never a demand that it resolve
    for match in _IMPORT_MODULE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        yield _Import(line, match.group(1), (), True, match.group(1).split(".")[0] in tops)


def _statements(body: list[ast.stmt], *, guarded: bool) -> Iterator[tuple[ast.stmt, bool]]:
    """Every statement of ``body`` at any depth (function and class bodies included: lazy imports count) with
    whether an ``except ImportError`` guards it; ``if TYPE_CHECKING:`` bodies are left out (they never run)."""
    stack: list[tuple[ast.stmt, bool]] = [(stmt, guarded) for stmt in reversed(body)]
    while stack:
        node, guard = stack.pop()
        yield node, guard
        if isinstance(node, ast.Try | ast.TryStar):
            catches = guard or any(_catches_import_error(h) for h in node.handlers)
            inner = [(s, guard) for s in [*[x for h in node.handlers for x in h.body], *node.orelse, *node.finalbody]]
            inner += [(s, catches) for s in node.body]
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            inner = [(s, guard) for s in node.orelse]
        elif isinstance(node, ast.Match):
            inner = [(s, guard) for case in node.cases for s in case.body]
        else:
            inner = [(s, guard) for name in _BODIES for s in getattr(node, name, ())]
        stack.extend(reversed(inner))


def _bound_names(body: list[ast.stmt]) -> frozenset[str] | None:
    """Names a module binds at its top level (through if/try/with blocks); None when any name may be there
    (a module ``__getattr__`` or a star import)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return None
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try | ast.TryStar | ast.With):
            nested = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            nested += [stmt for h in getattr(node, "handlers", []) for stmt in h.body]
            inner = _bound_names(nested)
            if inner is None:
                return None
            names |= inner
    return frozenset(names)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Name) and k.id in _GUARDS for k in kinds)
