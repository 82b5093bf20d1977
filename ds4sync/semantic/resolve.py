"""One tree, read from git objects: its Python modules, their facts, and dotted names resolved against them.

A :class:`TreeView` lists the tree once (``git ls-tree -r``) and parses a module only when a rule
asks for it; parsed facts are shared between trees by blob id (a file both sides kept is parsed once).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from ds4sync.core.git import GitRepo
from ds4sync.semantic.pyast import Definition, ModuleFacts, module_name, parse_facts


class FactsCache:
    """Parsed facts by (blob id, path), read from the repository in batches."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self._facts: dict[tuple[str, str], ModuleFacts] = {}
        self._bytes: dict[str, bytes] = {}
        self.single_reads = 0  # blobs read one at a time (each a git process): what prefetching missed
        self.parsed = 0  # files parsed (each ``ast.parse``): what a cache shared between checks saved

    def prefetch(self, oids: Iterable[str]) -> None:
        """Read these blobs in one ``git cat-file --batch``."""
        wanted = [o for o in set(oids) if o not in self._bytes]
        if wanted:
            self._bytes.update(self.repo.blobs(wanted))

    def text(self, oid: str) -> bytes:
        """A blob's bytes (read now when it was not prefetched)."""
        if oid not in self._bytes:
            self.single_reads += 1
            self.prefetch([oid])
        return self._bytes.get(oid, b"")

    def facts(self, oid: str, path: str) -> ModuleFacts:
        """The facts of the blob ``oid`` read as the file ``path``."""
        key = (oid, path)
        if key not in self._facts:
            self.parsed += 1
            self._facts[key] = parse_facts(self.text(oid), path=path)
        return self._facts[key]


@dataclass(frozen=True)
class Resolved:
    """Where a dotted name led: ``status`` found | missing | unknown | module.

    ``module``/``path``: the deepest module reached and its file; ``qualname``: the definition in
    it (found), or the first name it lacks (missing); ``definition``: the one found.
    """

    status: str
    module: str
    path: str | None = None
    qualname: str = ""
    definition: Definition | None = None


class TreeView:
    """A tree's Python modules: path -> blob id, module -> path, and the facts of each on demand.

    ``unknown``: paths whose content is not to be read (conflicted in a plan): names in them
    resolve as unknown.
    """

    def __init__(self, repo: GitRepo, rev: str, cache: FactsCache, *, unknown: Collection[str] = ()) -> None:
        self.rev = rev
        self.cache = cache
        self.unknown = frozenset(unknown)
        self.stand_in: TreeView | None = None
        #: (path, qualname) -> whether every resolution of the conflicted ``path`` keeps upstream's definition.
        self.keeps: Callable[[str, str], bool] = lambda _path, _qualname: False
        self.oids: dict[str, str] = {}
        self.dirs: set[str] = set()
        for path, (_mode, kind, oid) in repo.tree_entries(rev).items():
            if kind != "blob" or not path.endswith(".py"):
                continue
            self.oids[path] = oid
            parts = path.split("/")
            for i in range(1, len(parts)):
                self.dirs.add("/".join(parts[:i]))
        self.modules: dict[str, str] = {}
        for path in self.oids:
            name = module_name(path)
            if name:
                self.modules[name] = path
        self.packages = {m.split(".")[0] for m in self.modules}

    def facts(self, path: str) -> ModuleFacts | None:
        """The facts of ``path`` in this tree; None when absent, or unknown without a stand-in.

        An unknown (conflicted) module stands in as upstream's version (:attr:`stand_in`) for the
        definitions :attr:`keeps` says any resolution keeps; a name it lacks resolves as unknown.
        """
        if path in self.unknown:
            return self.stand_in.facts(path) if self.stand_in is not None else None
        oid = self.oids.get(path)
        if oid is None:
            return None
        return self.cache.facts(oid, path)

    def is_module(self, name: str) -> bool:
        """A module file, a package, or a namespace folder of Python files."""
        return name in self.modules or name.replace(".", "/") in self.dirs

    def resolve(self, name: str, *, depth: int = 0) -> Resolved:
        """Resolve ``a.b.c.X.y`` against the tree: the longest module prefix, then a name and a class member.

        A name the module imports (a re-export) is followed to its home, three hops at most.
        """
        parts = name.split(".")
        if parts[0] not in self.packages:
            return Resolved("unknown", name)
        cut = 1
        for i in range(len(parts), 0, -1):
            if self.is_module(".".join(parts[:i])):
                cut = i
                break
        module = ".".join(parts[:cut])
        path = self.modules.get(module)
        rest = parts[cut:]
        if not rest:
            return Resolved("module", module, path)
        if path is None:  # a namespace folder binds only its submodules
            return Resolved("missing", module, None, rest[0])
        facts = self.facts(path)
        if facts is None or facts.broken:
            return Resolved("unknown", module, path)
        return self._in_module(facts, module, path, rest, depth)

    def _in_module(self, facts: ModuleFacts, module: str, path: str, rest: list[str], depth: int) -> Resolved:
        """``rest`` (a name, then a class member) inside the parsed ``module``."""
        head = rest[0]
        if head not in facts.names:
            return Resolved("unknown" if facts.dynamic or path in self.unknown else "missing", module, path, head)
        definition = facts.defs.get(head)
        if definition is None and depth < 3:
            source = next((i for i in facts.uses().imports if i.bound == head and i.name), None)
            if source is not None:
                followed = self.resolve(".".join([source.module, source.name or "", *rest[1:]]), depth=depth + 1)
                if followed.status in ("found", "module"):
                    return followed
        if len(rest) == 1 or definition is None or definition.kind != "class":
            return Resolved("found" if len(rest) == 1 else "unknown", module, path, head, definition)
        member = f"{head}.{rest[1]}"
        if rest[1].startswith("__") and rest[1].endswith("__") and rest[1] not in definition.members:
            return Resolved("unknown", module, path, member)  # object's own (``__new__``, ``__dict__``)
        if rest[1] not in definition.members:
            return Resolved("unknown" if path in self.unknown else "missing", module, path, member)
        if len(rest) > 2:
            return Resolved("unknown", module, path, member)
        return Resolved("found", module, path, member, facts.defs.get(member))

    def module_path(self, name: str) -> str | None:
        """The file of the longest module prefix of the dotted ``name`` (None outside the tree's packages)."""
        parts = name.split(".")
        if parts[0] not in self.packages:
            return None
        for i in range(len(parts), 0, -1):
            path = self.modules.get(".".join(parts[:i]))
            if path is not None:
                return path
        return None

    def path_of(self, module: str) -> str | None:
        """The file of ``module`` in this tree (None for a namespace folder or none)."""
        return self.modules.get(module)
