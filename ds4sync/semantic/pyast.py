"""What one Python file defines and what it uses, read with :mod:`ast`: the facts the semantic rules compare.

Definitions (module level, classes and their members) with call signatures and returned-tuple arity;
imports at every depth (inside functions and ``try`` blocks too), dotted references and calls, each
with the line it is on. Pure: text in, frozen facts out; nothing here reads git.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: A parameter: (name, kind, required); kind is ``pos`` (positional or keyword), ``posonly`` or ``kwonly``.
Param = tuple[str, str, bool]


@dataclass(frozen=True)
class Signature:
    """A callable's parameters as a caller binds them (``self``/``cls`` already dropped for methods)."""

    params: tuple[Param, ...]
    varargs: bool = False
    varkw: bool = False

    def binds(self, npos: int, keywords: tuple[str, ...], *, star: bool, dstar: bool) -> str | None:
        """Why a call with ``npos`` positional arguments and ``keywords`` does not bind, or None when it does.

        ``star``/``dstar``: the call passes ``*args``/``**kwargs``, so the counts it would fill are unknown.
        """
        positional = [p for p in self.params if p[1] in ("pos", "posonly")]
        if npos > len(positional) and not self.varargs and not star:
            return f"takes {len(positional)} positional arguments, the call passes {npos}"
        names = {p[0] for p in self.params if p[1] != "posonly"}
        for kw in keywords:
            if kw not in names and not self.varkw:
                return f"has no parameter `{kw}`"
        filled = {p[0] for p in positional[:npos]} | set(keywords)
        if star or dstar:
            return None
        missing = [p[0] for p in self.params if p[2] and p[0] not in filled]
        if missing:
            return "requires " + ", ".join(f"`{m}`" for m in missing) + " that the call does not pass"
        return None


@dataclass(frozen=True)
class Definition:
    """A module-level function, class or constant, or a class member (``qualname`` ``Class.name``)."""

    qualname: str
    kind: str  # function | class | method | classmethod | staticmethod | constant
    line: int
    signature: Signature | None = None  # a class: its constructor's; None when not known (inherited)
    members: frozenset[str] = frozenset()  # a class: names its body binds
    bases: tuple[str, ...] = ()  # a class: its bases as written (dotted)


@dataclass(frozen=True)
class Import:
    """One imported name: ``module`` absolute (relative imports resolved), ``name`` None for ``import a.b``."""

    line: int
    module: str
    name: str | None
    bound: str  # the local name it binds (``a`` for ``import a.b``)
    text: str  # as a person would write it, for messages


@dataclass(frozen=True)
class Call:
    """A call: ``target`` the callee as a dotted chain of names (``self.mtp_block``, ``mod.f``, ``super().x``).

    ``unpacked``: the number of names a plain tuple assignment unpacks its result into, else None.
    ``owner``: the class the call sits in (for ``self.x``), ``function``: the def it sits in.
    """

    line: int
    target: str
    npos: int
    keywords: tuple[str, ...]
    star: bool
    dstar: bool
    unpacked: int | None
    owner: str | None


@dataclass(frozen=True)
class Reference:
    """A dotted load of an imported name (``module.attr``, ``Class.method``), outside of calls' own callee."""

    line: int
    target: str


@dataclass
class ModuleFacts:
    """Everything the rules read of one file.

    ``names``: what the module binds at top level; ``dynamic``: a module ``__getattr__`` or a star
    import makes any name possible. ``self_classes``: class -> attribute -> dotted constructor
    (``self.x = Foo(...)`` anywhere in the class). ``words``: every identifier and attribute name.
    """

    defs: dict[str, Definition] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    dynamic: bool = False
    imports: list[Import] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)
    self_classes: dict[str, dict[str, str]] = field(default_factory=dict)
    class_bases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    broken: bool = False  # not parseable: no facts (a conflicted or non-Python file)
    tree: ast.Module | None = None
    package: list[str] = field(default_factory=list)
    walked: bool = False
    nodes: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    arities: dict[str, int | None] = field(default_factory=dict)

    def uses(self) -> ModuleFacts:
        """These facts with imports, calls and references filled in (walked once, on first use)."""
        if not self.walked and self.tree is not None:
            _Walker(self, self.package).visit(self.tree)
        self.walked = True
        return self

    def returns(self, qualname: str) -> int | None:
        """The length of the tuple every ``return`` of function ``qualname`` returns; None when not one length."""
        if qualname not in self.arities:
            node = self.nodes.get(qualname)
            self.arities[qualname] = _arity(node) if node is not None else None
        return self.arities[qualname]


def module_name(path: str) -> str | None:
    """``a/b/c.py`` -> ``a.b.c``; ``a/b/__init__.py`` -> ``a.b``; None for a non-Python path."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of names and attributes; ``super().x`` for one through ``super()``; else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super" and parts:
        parts.append("super()")
    else:
        return None
    return ".".join(reversed(parts))


def parse_facts(text: str | bytes, *, path: str) -> ModuleFacts:
    """The definitions of one Python file (``path`` names its module, for relative imports).

    What it uses (imports, calls, references) is read on :meth:`ModuleFacts.uses`.
    """
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError):
        return ModuleFacts(broken=True)
    facts = ModuleFacts(tree=tree, package=_package_of(path))
    _top_level(tree, facts)
    return facts


def _package_of(path: str) -> list[str]:
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    return parts[:-1]


def _top_level(tree: ast.Module, facts: ModuleFacts) -> None:
    for node in tree.body:
        _bind_top(node, facts)


def _bind_top(node: ast.stmt, facts: ModuleFacts) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        facts.names.add(node.name)
        facts.defs[node.name] = _function(node, node.name, "function", method=False)
        facts.nodes[node.name] = node
        if node.name == "__getattr__":
            facts.dynamic = True
    elif isinstance(node, ast.ClassDef):
        facts.names.add(node.name)
        _class(node, facts)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            if alias.name == "*":
                facts.dynamic = True
            else:
                facts.names.add(alias.asname or alias.name.split(".")[0])
    elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for name in _target_names(target):
                facts.names.add(name)
                facts.defs.setdefault(name, Definition(name, "constant", node.lineno))
    elif isinstance(node, (ast.If, ast.Try, ast.TryStar, ast.With, ast.For, ast.While)):
        for child in _child_blocks(node):
            _bind_top(child, facts)


def _child_blocks(node: ast.stmt) -> list[ast.stmt]:
    blocks: list[ast.stmt] = []
    for attr in ("body", "orelse", "finalbody"):
        blocks.extend(getattr(node, attr, []) or [])
    for handler in getattr(node, "handlers", []) or []:
        blocks.extend(handler.body)
    return blocks


def _target_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _target_names(elt)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


def _function(node: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str, kind: str, *, method: bool) -> Definition:
    decorators = {dotted(d) or "" for d in node.decorator_list}
    drop = method and "staticmethod" not in decorators
    if method and decorators & {"staticmethod", "classmethod"}:
        kind = "staticmethod" if "staticmethod" in decorators else "classmethod"  # bound alike through the class
    return Definition(qualname, kind, node.lineno, _signature(node.args, drop_first=drop))


def _signature(args: ast.arguments, *, drop_first: bool) -> Signature:
    positional = [*args.posonlyargs, *args.args]
    defaults_from = len(positional) - len(args.defaults)
    params: list[Param] = []
    for i, arg in enumerate(positional):
        kind = "posonly" if i < len(args.posonlyargs) else "pos"
        params.append((arg.arg, kind, i < defaults_from))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params.append((arg.arg, "kwonly", default is None))
    if drop_first and params and params[0][1] != "kwonly":
        params = params[1:]
    return Signature(tuple(params), args.vararg is not None, args.kwarg is not None)


def _arity(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    """The length of the returned tuple when every ``return`` of the body returns a tuple of one length."""
    sizes: set[int | None] = set()
    stack: list[ast.AST] = list(node.body)
    while stack:
        child = stack.pop()
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(child, ast.Return):
            value = child.value
            if isinstance(value, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in value.elts):
                sizes.add(len(value.elts))
            else:
                sizes.add(None)
        stack.extend(ast.iter_child_nodes(child))
    return sizes.pop() if len(sizes) == 1 else None


def _class(node: ast.ClassDef, facts: ModuleFacts) -> None:
    members: set[str] = set()
    fields: list[Param] = []
    decorators = {
        (dotted(d.func if isinstance(d, ast.Call) else d) or "").rsplit(".", 1)[-1] for d in node.decorator_list
    }
    init: Signature | None = None
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            members.add(item.name)
            definition = _function(item, f"{node.name}.{item.name}", "method", method=True)
            facts.defs[definition.qualname] = definition
            facts.nodes[definition.qualname] = item
            if item.name == "__init__":
                init = definition.signature
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            members.add(item.target.id)
            annotation = ast.unparse(item.annotation)
            if "ClassVar" not in annotation:
                fields.append((item.target.id, "pos", item.value is None or _field_required(item.value)))
        elif isinstance(item, ast.Assign):
            for target in item.targets:
                members.update(_target_names(target))
        elif isinstance(item, ast.ClassDef):
            members.add(item.name)
    if init is None and "dataclass" in decorators:
        init = Signature(tuple(fields))
    bases = tuple(b for b in (dotted(base) for base in node.bases) if b)
    facts.class_bases[node.name] = bases
    facts.defs[node.name] = Definition(node.name, "class", node.lineno, init, frozenset(members), bases)


def _last(node: ast.expr) -> str:
    return (dotted(node) or "").rsplit(".", 1)[-1]


def _field_required(value: ast.expr) -> bool:
    """``x: int = field(...)`` is required unless the field gives a default or a default factory."""
    if isinstance(value, ast.Call) and (dotted(value.func) or "").rsplit(".", 1)[-1] == "field":
        return not any(k.arg in ("default", "default_factory") for k in value.keywords)
    return False


#: Nodes with no child the walker reads (and no ``visit_`` method of its own).
_LEAVES = (ast.Name, ast.Constant, ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)
_HANDLERS: dict[type, Callable[[_Walker, Any], None]] = {}


class _Walker(ast.NodeVisitor):
    """Imports, calls and dotted references at every depth, with the class each sits in."""

    def __init__(self, facts: ModuleFacts, package: list[str]) -> None:
        self.facts = facts
        self.package = package
        self.owner: list[str] = []
        self.unpacks: dict[int, int] = {}  # id(call node) -> names unpacked
        self.callees: set[int] = set()

    def visit(self, node: ast.AST) -> None:
        """``NodeVisitor.visit`` with the handler looked up once per node type, not by name per node."""
        handler = _HANDLERS.get(type(node))
        if handler is None:
            handler = _HANDLERS[type(node)] = getattr(_Walker, f"visit_{type(node).__name__}", _Walker.generic_visit)
        handler(self, node)

    def generic_visit(self, node: ast.AST) -> None:
        """Every child in field order, as ``NodeVisitor.generic_visit``; names, constants and contexts hold
        nothing read here and are not entered (they are most of a tree's nodes)."""
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST) and not isinstance(item, _LEAVES):
                        self.visit(item)
            elif isinstance(value, ast.AST) and not isinstance(value, _LEAVES):
                self.visit(value)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.owner.append(node.name)
        self.facts.self_classes.setdefault(node.name, {})
        self.generic_visit(node)
        self.owner.pop()

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self._add(node, alias.name, None, alias.asname, f"import {alias.name} as {alias.asname}")
            else:
                self._add(node, alias.name, None, alias.name.split(".")[0], f"import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package[: len(self.package) - node.level + 1] if node.level <= len(self.package) else []
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        if not module:
            return
        for alias in node.names:
            if alias.name == "*":
                continue
            text = f"from {'.' * node.level}{node.module or ''} import {alias.name}"
            self._add(node, module, alias.name, alias.asname or alias.name, text)

    def _add(self, node: ast.stmt, module: str, name: str | None, bound: str, text: str) -> None:
        self.facts.imports.append(Import(node.lineno, module, name, bound, text))

    def visit_Assign(self, node: ast.Assign) -> None:
        value = node.value
        if isinstance(value, ast.Await):
            value = value.value
        if isinstance(value, ast.Call) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in target.elts):
                self.unpacks[id(value)] = len(target.elts)
            owner = self.owner[-1] if self.owner else None
            if owner and isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                callee = dotted(value.func)
                if target.value.id == "self" and callee:
                    self.facts.self_classes.setdefault(owner, {}).setdefault(target.attr, callee)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        target = dotted(node.func)
        if target:
            self.callees.add(id(node.func))
            self.facts.calls.append(
                Call(
                    line=node.lineno,
                    target=target,
                    npos=sum(1 for a in node.args if not isinstance(a, ast.Starred)),
                    keywords=tuple(k.arg for k in node.keywords if k.arg),
                    star=any(isinstance(a, ast.Starred) for a in node.args),
                    dstar=any(k.arg is None for k in node.keywords),
                    unpacked=self.unpacks.get(id(node)),
                    owner=self.owner[-1] if self.owner else None,
                )
            )
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load) and id(node) not in self.callees:
            target = dotted(node)
            if target and not target.startswith(("self.", "super().", "cls.")):
                self.facts.references.append(Reference(node.lineno, target))
                return  # the chain's inner attributes are the same reference, shorter
        self.generic_visit(node)
