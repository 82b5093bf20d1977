"""The facts walk reads every call, reference and import of a file, wherever it sits, in source order.

The oracle is :func:`ast.walk` over the same tree: every call whose callee is a dotted name, and every
import, must be in the facts whatever statement or expression holds it.
"""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import pytest

from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.semantic.check import _mentions_changed, check_merge
from ds4sync.semantic.pyast import dotted, parse_facts
from ds4sync.semantic.resolve import FactsCache
from tests.semantic.test_kinds import BASE

# Calls and imports in every kind of place a Python file can hold them.
SOURCE = """
import os.path as osp
from . import sibling
from .pkg.mod import name as alias


@deco.make(arg.value)
def top(a=defaults.build(1), *, b=kw.default()) -> ret.Type:
    import inner.module
    x, y = pair.split(a)
    f"{fmt.call(x)!r:>{width.get()}}"
    lam = lambda q: lam_body.fn(q)
    [comp.item(i) for i in range(3) if cond.check(i)]
    {k.key(): v.value() for k, v in {}.items()}
    await_me = (yield gen.send(x))
    del holder.attr
    with ctx.manager() as m, other.ctx():
        assert check.it(m), msg.text()
    try:
        raise err.Type(m)
    except exc.Kind as e:
        from handler import thing
    else:
        els.call()
    finally:
        fin.call()
    match subject.get():
        case {"k": v} if guard.ok(v):
            case_body.run()
        case _:
            pass
    return outer.fn(inner.fn(nested.deep(a)), *star.args(), **dstar.kw())


class Box(base.Model, metaclass=meta.Kind):
    field: ann.Type = dc.field(default=None)

    def __init__(self):
        self.part = parts.Part(self)
        super().__init__()

    async def run(self):
        async for item in aiter.source():
            await self.part.forward(item)
        async with alock.lock():
            pass
"""


def _dotted_calls(tree: ast.Module) -> list[tuple[int, str]]:
    return sorted((n.lineno, t) for n in ast.walk(tree) if isinstance(n, ast.Call) and (t := dotted(n.func)))


def test_every_dotted_call_and_import_is_found_wherever_it_sits() -> None:
    facts = parse_facts(SOURCE, path="pkg/sub/file.py").uses()
    tree = ast.parse(SOURCE)
    assert sorted((c.line, c.target) for c in facts.calls) == _dotted_calls(tree)
    imported = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert sorted(i.line for i in facts.imports) == sorted(n.lineno for n in imported for _ in n.names)
    assert [i.module for i in facts.imports] == [
        "os.path",
        "pkg.sub",
        "pkg.sub.pkg.mod",
        "inner.module",
        "handler",
    ]  # source order, relative imports resolved
    assert {"defaults.build", "kw.default", "fmt.call", "width.get", "lam_body.fn", "guard.ok", "fin.call"} <= {
        c.target for c in facts.calls
    }  # defaults, f-strings, lambdas, match guards, finally blocks
    assert facts.self_classes["Box"] == {"part": "parts.Part"}
    assert facts.class_bases["Box"] == ("base.Model",)
    x_y = next(c for c in facts.calls if c.target == "pair.split")
    assert x_y.unpacked == 2 and x_y.owner is None
    assert next(c for c in facts.calls if c.target == "self.part.forward").owner == "Box"


@pytest.mark.parametrize(
    ("changed", "text", "mentions"),
    [
        ("pkg/newmod.py", b"from pkg import newmod\n", True),
        ("pkg/newmod.py", b"x = newmodule.y\n", False),  # a longer name is not the module
        ("pkg/newmod.py", b"x = my_newmod\n", False),
        ("pkg/newmod.py", b"x = a.newmod.y\n", True),
        ("pkg/sub/__init__.py", b"from pkg.sub import y\n", True),  # a package's __init__ is its folder's name
        ("pkg/sub/__init__.py", b"import pkg\n", True),
        ("pkg/odd-name.py", b"see odd-name here\n", True),  # not an identifier: searched as a pattern
        ("pkg/odd-name.py", b"see odd-names here\n", False),
        ("pkg/newmod.py", b"nothing related\n", False),
    ],
)
def test_a_file_is_read_when_it_names_a_changed_module(changed: str, text: bytes, mentions: bool) -> None:
    merged, fork = _View({changed: "b" * 40, "other.py": "c" * 40}), _View({"other.py": "c" * 40})
    assert _mentions_changed(merged, fork)(text) is mentions  # type: ignore[arg-type]


class _View:
    def __init__(self, oids: dict[str, str]) -> None:
        self.oids, self.unknown = oids, frozenset[str]()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_check_leaves_cycle_collection_as_it_found_it(tmp_path: Path, enabled: bool) -> None:
    builder = RepoBuilder(tmp_path / "repo")
    builder.commit(BASE, "base")
    builder.branch("fork")
    caller = "from pkg.layer import build\n\n\ndef fork_fn():\n    return build(1, scale=2.0)\n"
    fork = builder.commit({"pkg/fork_caller.py": caller}, "fork")
    builder.checkout("main")
    upstream = builder.commit({"pkg/layer.py": "def build(x):\n    return x\n"}, "upstream (#1)")
    seen: list[bool] = []
    original = FactsCache.facts

    def facts(self: FactsCache, oid: str, path: str):
        seen.append(gc.isenabled())
        return original(self, oid, path)

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(FactsCache, "facts", facts)
            repo = GitRepo(builder.path)
            merged = repo.merge_tree(fork, upstream).tree
            result = check_merge(repo, fork=fork, upstream=upstream, merged=merged)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert seen and not any(seen), "files are parsed with the cycle collector paused"
    assert [(f.path, f.kind) for f in result.findings] == [("pkg/fork_caller.py", "call-contract")]
