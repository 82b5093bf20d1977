"""The per-file rules: imports that do not resolve, references to missing definitions, calls that do not bind.

Each rule reads one file's facts against one :class:`TreeView` and returns raw findings keyed without
line numbers, so that :mod:`ds4sync.semantic.check` can subtract the same keys found on the fork head
and on upstream (the differential).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ds4sync.semantic.pyast import Call, Definition, Import, ModuleFacts, module_name
from ds4sync.semantic.resolve import Resolved, TreeView

#: ``changed(module_path)``: whether the rule should look at a target in this module file (the
#: merged tree skips modules identical on every side: there the fork head already answers).
Changed = Callable[[str | None], bool]


@dataclass(frozen=True)
class Raw:
    """A finding before attribution: ``key`` is what the differential compares (no line number).

    ``defined_in``: the module file of the broken target; ``tokens``: words to pickaxe for.
    """

    kind: str
    line: int
    symbol: str
    message: str
    key: tuple[str, ...]
    defined_in: str | None
    tokens: tuple[str, ...]


def check_file(view: TreeView, path: str, facts: ModuleFacts, changed: Changed) -> list[Raw]:
    """Every import, reference and call of ``path`` (facts read from ``view``) that breaks against ``view``."""
    own = module_name(path) or ""
    bindings = _bindings(facts, own)
    found: list[Raw] = []
    bad_heads: set[str] = set()
    for imp in facts.imports:
        raw = _check_import(view, imp, changed)
        if raw is not None:
            found.append(raw)
            bad_heads.add(imp.bound)
    for ref in [*((r.line, r.target) for r in facts.references), *((c.line, c.target) for c in facts.calls)]:
        raw = _check_reference(view, bindings, ref[0], ref[1], changed, bad_heads)
        if raw is not None:
            found.append(raw)
    for call in facts.calls:
        found.extend(_check_call(view, bindings, facts, call, changed))
    return list({r.key: r for r in found}.values())


def _bindings(facts: ModuleFacts, own: str) -> dict[str, str]:
    """Local name -> the dotted name it stands for: imports (first binding wins), then the file's own definitions."""
    bound: dict[str, str] = {}
    for imp in facts.imports:
        if imp.name is None:
            target = imp.module if imp.bound != imp.module.split(".")[0] else imp.bound
        else:
            target = f"{imp.module}.{imp.name}"
        bound.setdefault(imp.bound, target)
    for name, definition in facts.defs.items():
        if "." not in name and definition.kind in ("function", "class") and own:
            bound.setdefault(name, f"{own}.{name}")
    return bound


def _expand(bindings: dict[str, str], target: str) -> str | None:
    head, _, rest = target.partition(".")
    base = bindings.get(head)
    if base is None:
        return None
    return f"{base}.{rest}" if rest else base


def _check_import(view: TreeView, imp: Import, changed: Changed) -> Raw | None:
    if imp.module.split(".")[0] not in view.packages:
        return None
    full = imp.module if imp.name is None else f"{imp.module}.{imp.name}"
    if not view.is_module(imp.module):  # a set lookup: no module file is read
        return Raw(
            "unresolved-import",
            imp.line,
            full,
            f"`{imp.text}`: module `{imp.module}` is not in the merged tree",
            ("unresolved-import", full),
            imp.module.replace(".", "/") + ".py",  # where it was: its history names the move
            (),
        )
    if imp.name is None or view.is_module(full) or not changed(view.path_of(imp.module)):
        return None
    resolved = view.resolve(full)
    if resolved.status != "missing":
        return None
    return Raw(
        "unresolved-import",
        imp.line,
        full,
        f"`{imp.text}`: `{imp.module}` has no `{imp.name}`",
        ("unresolved-import", full),
        resolved.path,
        (imp.name,),
    )


def _check_reference(
    view: TreeView, bindings: dict[str, str], line: int, target: str, changed: Changed, bad: set[str]
) -> Raw | None:
    head = target.split(".")[0]
    if "." not in target or head in bad:
        return None
    full = _expand(bindings, target)
    if full is None:
        return None
    if not changed(view.module_path(full)):
        return None
    resolved = view.resolve(full)
    if resolved.status != "missing" or not changed(resolved.path):
        return None
    symbol = f"{resolved.module}.{resolved.qualname}"
    return Raw(
        "removed-definition",
        line,
        symbol,
        f"`{target}`: `{resolved.qualname}` is not defined in `{resolved.module}` any more",
        ("removed-definition", symbol),
        resolved.path,
        (resolved.qualname.rsplit(".", 1)[-1],),
    )


def _callee(
    view: TreeView, bindings: dict[str, str], facts: ModuleFacts, call: Call, changed: Changed
) -> tuple[str, Resolved, bool] | None:
    """(what the call binds to as a name, where it resolved, whether it is a module's ``forward``)."""
    target = call.target
    if target.startswith("self.") and target.count(".") == 1 and call.owner:
        ctor = facts.self_classes.get(call.owner, {}).get(target[5:])
        full = _expand(bindings, ctor) if ctor else None
        if full is None:
            return None
        return _method(view, full, ("forward", "__call__"))
    if target.startswith("super().") and target.count(".") == 1 and call.owner:
        bases = facts.class_bases.get(call.owner, ())
        full = _expand(bindings, bases[0]) if bases else None
        if full is None or target[8:] not in ("__init__", "forward"):
            return None
        found = _method(view, full, (target[8:],))
        return found
    full = _expand(bindings, target)
    if full is None or not changed(view.module_path(full)):
        return None
    resolved = view.resolve(full)
    if resolved.status != "found" or resolved.definition is None:
        return None
    return full, resolved, False


def _method(view: TreeView, cls: str, names: tuple[str, ...]) -> tuple[str, Resolved, bool] | None:
    for name in names:
        resolved = view.resolve(f"{cls}.{name}")
        if resolved.status == "found" and resolved.definition is not None:
            return f"{cls}.{name}", resolved, True
    return None


def _check_call(
    view: TreeView, bindings: dict[str, str], facts: ModuleFacts, call: Call, changed: Changed
) -> list[Raw]:
    found = _callee(view, bindings, facts, call, changed)
    if found is None:
        return []
    name, resolved, through_instance = found
    if not changed(resolved.path):
        return []
    npos = call.npos
    if resolved.definition is not None and resolved.definition.kind == "method" and not through_instance:
        if npos == 0 or "__" in name.rsplit(".", 1)[-1]:
            return []  # `Class.method(...)` passing self by keyword or through *args, or a dunder: not ours
        npos -= 1  # `Class.method(obj, ...)`: the caller passes self as the first positional argument
    if resolved.path in view.unknown and not view.keeps(resolved.path, resolved.qualname):
        return []  # a conflicted module's definition the fork changed too: the person decides its contract
    definition: Definition = resolved.definition  # type: ignore[assignment]
    out: list[Raw] = []
    signature = definition.signature
    if signature is not None and definition.kind != "constant":
        reason = signature.binds(npos, call.keywords, star=call.star, dstar=call.dstar)
        if reason is not None:
            shape = (str(npos), *sorted(call.keywords))
            what = f"`{call.target}(...)` calls `{name}`" if call.target != name.split(".", 1)[-1] else f"`{name}`"
            tokens = tuple(p[0] for p in signature.params if p[2]) + tuple(call.keywords) + (name.rsplit(".", 1)[-1],)
            out.append(
                Raw(
                    "call-contract",
                    call.line,
                    name,
                    f"{what}, which {reason}",
                    ("call-contract", name, *shape),
                    resolved.path,
                    tokens,
                )
            )
    module_facts = view.facts(resolved.path) if resolved.path and call.unpacked is not None else None
    returns = module_facts.returns(resolved.qualname) if module_facts is not None else None
    if call.unpacked is not None and returns is not None and returns != call.unpacked:
        out.append(
            Raw(
                "return-arity",
                call.line,
                name,
                f"`{call.target}(...)` is unpacked into {call.unpacked} names; `{name}` returns {returns}",
                ("return-arity", name, str(call.unpacked)),
                resolved.path,
                ("return", name.rsplit(".", 1)[-1]),
            )
        )
    return out
