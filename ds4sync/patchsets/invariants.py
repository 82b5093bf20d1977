"""Evaluate invariants on a tree: each result names the patch-set, the invariant, the files
and what was (or was not) found.

Regexes are Python ``re`` with MULTILINE; symbols are read with ``ast`` and never imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from ds4sync.core.paths import is_glob
from ds4sync.models.patchsets_results import InvariantResult, InvariantStatus
from ds4sync.patchsets import liveness
from ds4sync.patchsets.model import (
    AbsentInvariant,
    ContainsInvariant,
    CrossRefInvariant,
    FileAbsentInvariant,
    FileExistsInvariant,
    Invariant,
    PatchSet,
    SymbolInvariant,
    TestInvariant,
)
from ds4sync.patchsets.tree import Tree, match_paths, read_many

_MAX_EVIDENCE = 12


def evaluate(tree: Tree, patchset: PatchSet) -> list[InvariantResult]:
    """Every invariant of ``patchset`` on ``tree``, in the order the yaml lists them."""
    return [
        evaluate_one(tree, inv, patchset=patchset.id, name=name)
        for inv, name in zip(patchset.invariants, patchset.invariant_ids(), strict=True)
    ]


def evaluate_one(tree: Tree, inv: Invariant, *, patchset: str, name: str) -> InvariantResult:
    """One invariant on ``tree`` (with ``live`` set, only what it finds in live code counts: :mod:`.liveness`)."""
    check = _CHECKS[inv.kind]
    outcome = check(tree, inv)
    if getattr(inv, "live", None) is not None:
        outcome = liveness.judge(tree, inv, outcome, check)
    status, files, detail, evidence = outcome
    return InvariantResult(
        patchset=patchset,
        invariant=name,
        kind=inv.kind,
        severity=inv.severity,
        status=status,
        files=tuple(files),
        detail=detail,
        evidence=tuple(evidence[:_MAX_EVIDENCE]),
    )


_Outcome = tuple[InvariantStatus, list[str], str, list[str]]


def _where(text: str, match: re.Match[str], path: str) -> str:
    line_no = text.count("\n", 0, match.start()) + 1
    first = match.group(0).strip().splitlines()
    return f"{path}:{line_no}: {first[0][:100] if first else ''}"


def _files_text(patterns: tuple[str, ...]) -> str:
    return ", ".join(patterns)


def _contains(tree: Tree, inv: ContainsInvariant) -> _Outcome:
    files = match_paths(tree, inv.files)
    if not files:
        return "violated", [], f"no file matches {_files_text(inv.files)}", []
    rx = re.compile(inv.pattern, re.MULTILINE)
    evidence, missing, total = [], [], 0
    texts = read_many(tree, files)
    for path in files:
        text = texts.get(path, "")
        hits = list(rx.finditer(text))
        total += len(hits)
        evidence += [_where(text, m, path) for m in hits[:3]]
        if not hits:
            missing.append(path)
    if inv.every_file and missing:
        return "violated", files, f"/{inv.pattern}/ not found in {', '.join(missing[:5])}", evidence
    if total < inv.min_count:
        found = f"found {total} time(s), need {inv.min_count}" if total else "not found"
        return "violated", files, f"/{inv.pattern}/ {found} in {_files_text(inv.files)}", evidence
    return "holds", files, f"/{inv.pattern}/ found {total} time(s) in {len(files)} file(s)", evidence


def _absent(tree: Tree, inv: AbsentInvariant) -> _Outcome:
    files = match_paths(tree, inv.files)
    if not files and not inv.missing_ok:
        return (
            "violated",
            [],
            f"no file matches {_files_text(inv.files)}: nothing was checked (moved or gone? "
            "list its new path, or set missing_ok)",
            [],
        )
    rx = re.compile(inv.pattern, re.MULTILINE)
    evidence = []
    texts = read_many(tree, files)
    for path in files:
        text = texts.get(path, "")
        evidence += [_where(text, m, path) for m in rx.finditer(text)]
    if evidence:
        return "violated", files, f"/{inv.pattern}/ must be absent but was found {len(evidence)} time(s)", evidence
    if not files:
        return "holds", [], f"no file matches {_files_text(inv.files)} (missing_ok)", []
    return "holds", files, f"/{inv.pattern}/ absent from {len(files)} file(s)", []


def _file_paths(tree: Tree, path: str) -> list[str]:
    if is_glob(path):
        return match_paths(tree, [path])
    if tree.read(path) is not None:
        return [path]
    prefix = path.rstrip("/") + "/"  # a folder counts when it holds files
    return [p for p in tree.paths() if p.startswith(prefix)][:1]


def _file_exists(tree: Tree, inv: FileExistsInvariant) -> _Outcome:
    for path in inv.path:
        found = _file_paths(tree, path)
        if found:
            moved = f" (candidate {inv.path.index(path) + 1} of {len(inv.path)})" if len(inv.path) > 1 else ""
            return "holds", found, f"{path} exists{moved}", []
    return "violated", [], f"{' / '.join(inv.path)} does not exist", []


def _file_absent(tree: Tree, inv: FileAbsentInvariant) -> _Outcome:
    found = [p for path in inv.path for p in _file_paths(tree, path)]
    if found:
        return "violated", found, f"{', '.join(found[:5])} must not exist but does", found
    return "holds", [], f"{' / '.join(inv.path)} is absent", []


def _symbol(tree: Tree, inv: SymbolInvariant) -> _Outcome:
    module, _, qualname = inv.symbol.partition(":")
    root = inv.root.strip("/") + "/" if inv.root.strip("/") else ""
    first: _Outcome | None = None
    for i, name in enumerate((module, *inv.also_in)):
        outcome = _symbol_in(tree, name, qualname, root)
        if outcome[0] == "holds":
            if i:
                return "holds", outcome[1], f"{outcome[2]} (moved from {module})", outcome[3]
            return outcome
        first = first or outcome
    assert first is not None
    if inv.anywhere:
        found = _symbol_anywhere(tree, inv.anywhere, qualname, skip={p for p in first[1]})
        if found is not None:
            return "holds", found[1], f"{found[2]} (looked up in {inv.anywhere}; moved from {module})", found[3]
        tried = f"{module}{', ' + ', '.join(inv.also_in) if inv.also_in else ''}"
        return "violated", first[1], f"{qualname} is defined in none of {tried} nor in {inv.anywhere}", []
    if inv.also_in:
        return "violated", first[1], f"{first[2]}; nor in {', '.join(inv.also_in)}", []
    return first


def _symbol_in(tree: Tree, module: str, qualname: str, root: str) -> _Outcome:
    base = module.replace(".", "/")
    candidates = [f"{root}{base}.py", f"{root}{base}/__init__.py"]
    path = next((c for c in candidates if tree.read(c) is not None), None)
    if path is None:
        return "violated", [], f"module {module} not found ({' or '.join(candidates)})", []
    return _symbol_at(tree, path, qualname)


def _symbol_at(tree: Tree, path: str, qualname: str) -> _Outcome:
    try:
        module_ast = ast.parse(tree.read(path) or "", filename=path)
    except SyntaxError as exc:
        return "violated", [path], f"{path} does not parse ({exc.msg} at line {exc.lineno})", []
    return _walk_symbol(module_ast, qualname, path)


def _symbol_anywhere(tree: Tree, glob: str, qualname: str, *, skip: set[str]) -> _Outcome | None:
    """The first file of ``glob`` that defines ``qualname`` itself (re-exports do not count here)."""
    head = re.escape(qualname.split(".")[0])
    last = re.escape(qualname.split(".")[-1])
    quick = re.compile(rf"^\s*(?:async\s+def|def|class)\s+{last}\b|^\s*{last}\s*[:=]", re.MULTILINE)
    top = re.compile(rf"^(?:async\s+def|def|class)\s+{head}\b|^{head}\s*[:=]|^\s+{head}\s*[:=]", re.MULTILINE)
    for path in match_paths(tree, [glob]):
        if path in skip or not path.endswith(".py"):
            continue
        text = tree.read(path) or ""
        if not quick.search(text) or not top.search(text):
            continue
        outcome = _symbol_at(tree, path, qualname)
        if outcome[0] == "holds" and "re-exported" not in outcome[2]:
            return outcome
    return None


def _walk_symbol(module_ast: ast.Module, qualname: str, path: str) -> _Outcome:
    scope: list[ast.stmt] = module_ast.body
    parts = qualname.split(".")
    for depth, part in enumerate(parts):
        node = _bindings(scope).get(part)
        shown = ".".join(parts[: depth + 1])
        if node is None:
            return "violated", [path], f"{shown} is not defined in {path}", []
        if isinstance(node, ast.ImportFrom | ast.Import):
            origin = getattr(node, "module", None) or "an import"
            if depth == len(parts) - 1:
                return (
                    "holds",
                    [path],
                    f"{qualname} is re-exported in {path} from {origin}",
                    [f"{path}:{node.lineno}: import"],
                )
            return "violated", [path], f"{shown} is imported from {origin} in {path}; check that module instead", []
        if depth == len(parts) - 1:
            return "holds", [path], f"{qualname} defined in {path}", [f"{path}:{node.lineno}: {type(node).__name__}"]
        if not isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            return "violated", [path], f"{shown} in {path} is not a class or function", []
        scope = node.body
    raise AssertionError("unreachable")


def _bindings(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """Names bound at this level (descending into if/try/with blocks), last binding wins."""
    names: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = node
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.ImportFrom | ast.Import):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, ast.If | ast.Try | ast.With):
            nested = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            for handler in getattr(node, "handlers", []):
                nested += handler.body
            names.update({k: v for k, v in _bindings(nested).items() if k not in names})
    return names


def _cross_ref(tree: Tree, inv: CrossRefInvariant) -> _Outcome:
    src_files = match_paths(tree, inv.source.files)
    dst_files = match_paths(tree, inv.target.files)
    rx = re.compile(inv.source.pattern, re.MULTILINE)
    group: int | str = "name" if "name" in rx.groupindex else 1
    names: dict[str, str] = {}
    src_texts = read_many(tree, src_files)
    for path in src_files:
        for match in rx.finditer(src_texts.get(path, "")):
            names.setdefault(match.group(group), path)
    files = sorted(set(src_files) | set(dst_files))
    if len(names) < inv.min_names:
        return (
            "violated",
            files,
            (
                f"{len(names)} name(s) extracted by /{inv.source.pattern}/ from "
                f"{_files_text(inv.source.files)}, need {inv.min_names}"
            ),
            [],
        )
    dst_texts = read_many(tree, dst_files)
    texts = [dst_texts.get(p, "") for p in dst_files]
    missing = []
    for name in names:
        target = re.compile(inv.target.pattern.replace("{name}", re.escape(name)), re.MULTILINE)
        if not any(target.search(text) for text in texts):
            missing.append(f"{name} (from {names[name]})")
    if missing:
        return (
            "violated",
            files,
            (
                f"{len(missing)} of {len(names)} name(s) have no match for "
                f"/{inv.target.pattern}/ in {_files_text(inv.target.files)}"
            ),
            missing,
        )
    return "holds", files, f"all {len(names)} name(s) found in {_files_text(inv.target.files)}", sorted(names)


def _test(_tree: Tree, inv: TestInvariant) -> _Outcome:
    return "deferred", [inv.node.split("::")[0]], f"{inv.node}: run by the gate phase", []


_CHECKS: dict[str, Callable[[Tree, Any], _Outcome]] = {
    "contains": _contains,
    "absent": _absent,
    "file_exists": _file_exists,
    "file_absent": _file_absent,
    "symbol": _symbol,
    "cross_ref": _cross_ref,
    "test": _test,
}
