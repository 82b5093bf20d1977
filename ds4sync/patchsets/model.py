"""Typed models of ``patchset.yaml``: a fork feature, backport, fixup or removal as one unit.

A patch-set is a folder ``<profile>/patches/<id>/`` holding ``patchset.yaml`` and the
``.patch`` files of ``git format-patch``. The yaml is validated once, here, into frozen
models; a bad file is one line naming the file and the key path.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from ds4sync.core.errors import ConfigError
from ds4sync.core.model import DOTTED_NAME, FrozenModel, ModuleName, Regex, checked_regex, read_yaml, updated, validate
from ds4sync.core.names import PatchSetKind
from ds4sync.patchsets.lint import lint_patch

PATCHSET_FILE = "patchset.yaml"
CATALOGUE_FILE = "catalogue.yaml"
ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
Severity = Literal["blocking", "advisory"]
Globs = Annotated[tuple[str, ...], Field(min_length=1)]


def _as_tuple(value: object) -> object:
    return (value,) if isinstance(value, str) else value


def _as_commits(value: object) -> object:
    """``since``: one commit, a list of them, or nothing (None, as older files may say)."""
    return () if value is None else _as_tuple(value)


class _InvariantBase(FrozenModel):
    """Fields every invariant has: an optional id, its severity and a note.

    ``advisory`` invariants are evaluated and reported but never fail a sync: use it for
    inferred invariants that were not yet confirmed against a fork checkout.
    """

    id: str | None = None
    severity: Severity = "blocking"
    note: str = ""


class Liveness(FrozenModel):
    """The option ``live`` of an invariant: the code it found must be live, not a leftover.

    ``entry``: dotted module names (the dispatcher or model a feature hooks into); each Python file
    the invariant found must be reachable by imports (any depth, lazy function-level imports included,
    ``if TYPE_CHECKING:`` ones not) from one of them that exists in the tree. ``imports_resolve``: each
    import of such a file that names a package of the tree (and each relative import) resolves to a module
    or package there, unless it is guarded by ``try: ... except ImportError``. ``root``: the folder the
    packages sit in (default the top). Files that are not ``.py`` are not judged.
    """

    entry: tuple[ModuleName, ...] = ()
    imports_resolve: bool = False
    root: str = ""

    _entry = field_validator("entry", mode="before")(_as_tuple)

    @model_validator(mode="after")
    def _something(self) -> Liveness:
        if not self.entry and not self.imports_resolve:
            raise ValueError("set entry (modules the code must be imported from) and/or imports_resolve: true")
        return self


class ContainsInvariant(_InvariantBase):
    """A regular expression (Python ``re``, MULTILINE) must match in the files of ``files``.

    ``files`` is a path or glob (``**`` crosses folders, ``{a,b}`` alternatives) or a list
    of them. ``every_file``: each matched file must match (default: at least one);
    ``min_count``: total matches needed across the files. ``live`` (:class:`Liveness`): only
    matches in live Python files count.
    """

    kind: Literal["contains"]
    files: Globs
    pattern: Regex
    every_file: bool = False
    min_count: int = Field(default=1, ge=1)
    live: Liveness | None = None

    _files = field_validator("files", mode="before")(_as_tuple)


class AbsentInvariant(_InvariantBase):
    """A regular expression must match in none of the files of ``files``.

    When no file matches ``files`` nothing was checked: that is a violation saying so
    (the files moved or are gone), unless ``missing_ok`` says an absent file is fine too.
    """

    kind: Literal["absent"]
    files: Globs
    pattern: Regex
    missing_ok: bool = False

    _files = field_validator("files", mode="before")(_as_tuple)


class FileExistsInvariant(_InvariantBase):
    """A file (or at least one file of a glob) must exist.

    ``path`` may be a list of candidate paths or globs (a file that moved): any one found holds.
    ``live`` (:class:`Liveness`): only a live Python file counts as found.
    """

    kind: Literal["file_exists"]
    path: Globs
    live: Liveness | None = None

    _path = field_validator("path", mode="before")(_as_tuple)


class FileAbsentInvariant(_InvariantBase):
    """No file may exist at ``path`` (or match it, for a glob); a list: at none of them."""

    kind: Literal["file_absent"]
    path: Globs

    _path = field_validator("path", mode="before")(_as_tuple)


class SymbolInvariant(_InvariantBase):
    """A Python name must be defined: ``pkg.mod:Class.method``, read with ``ast``, never imported.

    ``pkg.mod`` resolves to ``pkg/mod.py`` or ``pkg/mod/__init__.py`` under ``root`` (a folder
    of the tree, default the top). Module-level names bound by ``def``, ``class``,
    assignment or ``from ... import`` (a re-export) count.

    A symbol that moves: ``also_in`` lists other modules (``pkg.old_mod``) that may define
    the same qualified name; ``anywhere`` is a glob of Python files (``vllm/**/*.py``) searched
    for a module defining it when none of the named modules does. The result names where
    it was found. ``live`` (:class:`Liveness`): only a definition in a live module counts.
    """

    kind: Literal["symbol"]
    symbol: str
    root: str = ""
    also_in: tuple[ModuleName, ...] = ()
    anywhere: str | None = None
    live: Liveness | None = None

    @field_validator("symbol")
    @classmethod
    def _shape(cls, value: str) -> str:
        module, sep, qualname = value.partition(":")
        if not sep or not DOTTED_NAME.fullmatch(module or "-") or not DOTTED_NAME.fullmatch(qualname or "-"):
            raise ValueError("expected 'package.module:Name' or 'package.module:Class.method'")
        return value

    _also_in = field_validator("also_in", mode="before")(_as_tuple)


class RefSide(FrozenModel):
    """One side of a cross reference: files (globs) and a regular expression.

    On the source side the pattern has one group (or a group named ``name``) giving the
    name; on the target side ``{name}`` stands for the escaped name.
    """

    files: Globs
    pattern: Regex

    _files = field_validator("files", mode="before")(_as_tuple)


class CrossRefInvariant(_InvariantBase):
    """Every name extracted from ``source`` must appear, through ``target.pattern``, in ``target``.

    The by-hand audits of vLLM forks after a sync: every ``ops.impl`` has its ``ops.def``,
    every env var declared has its runtime entry. ``min_names``: fewer names extracted is
    a violation (an empty source proves nothing).
    """

    kind: Literal["cross_ref"]
    source: RefSide
    target: RefSide
    min_names: int = Field(default=1, ge=0)

    @model_validator(mode="after")
    def _placeholder(self) -> CrossRefInvariant:
        if "{name}" not in self.target.pattern:
            raise ValueError("target.pattern must contain the {name} placeholder")
        checked_regex(self.target.pattern.replace("{name}", "x"))
        if re.compile(self.source.pattern).groups < 1:
            raise ValueError("source.pattern needs a group that captures the name")
        return self


class TestInvariant(_InvariantBase):
    """A pytest node id that must pass; run by the gate phase, listed here for the report."""

    __test__ = False  # not a pytest class

    kind: Literal["test"]
    node: str


Invariant = Annotated[
    ContainsInvariant
    | AbsentInvariant
    | FileExistsInvariant
    | FileAbsentInvariant
    | SymbolInvariant
    | CrossRefInvariant
    | TestInvariant,
    Field(discriminator="kind"),
]


class Upstream(FrozenModel):
    """Where a backport comes from: repository, PR number and commit."""

    repo: str | None = None
    pr: int | None = None
    commit: str | None = None


class DropWhen(FrozenModel):
    """When upstream makes the patch-set unnecessary (any one that is set and holds).

    ``upstream_has_commit``: the upstream SHA being synced contains this commit.
    ``invariants_hold_on_upstream``: the patch-set's own blocking invariants hold on the
    upstream tree alone. ``upstream_invariants``: these invariants hold on the upstream tree.
    """

    upstream_has_commit: str | None = None
    invariants_hold_on_upstream: bool = False
    upstream_invariants: tuple[Invariant, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether no condition is set."""
        return not (self.upstream_has_commit or self.invariants_hold_on_upstream or self.upstream_invariants)


class CarriedWhen(FrozenModel):
    """When a fork tree carries the patch-set at all (every condition that is set must hold).

    ``since``: a fork commit (SHA or ref) that introduced the feature; a fork head whose history
    lacks it (or a repository that does not know it) does not carry the patch-set. A list names the
    commit and its copies on branches that were rebased or cherry-picked (same change, other SHA): any
    one of them in the history carries it.
    ``tree``: invariants checked on the fork's own tree (before any merge), e.g. the module the
    feature lives in exists. A patch-set that is not carried is reported ``not-carried``: never a
    failure, never counted as holding.
    """

    since: tuple[str, ...] = ()
    tree: tuple[Invariant, ...] = ()
    note: str = ""

    _since = field_validator("since", mode="before")(_as_commits)


class PatchSet(FrozenModel):
    """One ``patchset.yaml``: a fork carry that every sync proves still present.

    ``patches`` lists the ``.patch`` files (relative to the folder) in apply order; empty
    means metadata and invariants only (``note`` says why). ``folder`` is filled by the loader.
    """

    id: str
    title: str
    kind: PatchSetKind
    owner: str = ""
    rationale: str = ""
    note: str = ""
    upstream: Upstream | None = None
    depends_on: tuple[str, ...] = ()
    drop_when: DropWhen | None = None
    carried_when: CarriedWhen | None = None
    invariants: tuple[Invariant, ...] = ()
    tests: tuple[str, ...] = ()
    patches: tuple[str, ...] = ()
    folder: Path | None = Field(default=None, exclude=True)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not ID_RE.match(value):
            raise ValueError("must be lower case letters, digits, '.', '_' or '-'")
        return value

    def invariant_ids(self) -> list[str]:
        """Each invariant's id: its own, else ``<kind>-<n>`` (1-based within the patch-set)."""
        return [inv.id or f"{inv.kind}-{i}" for i, inv in enumerate(self.invariants, 1)]

    def patch_files(self) -> list[Path]:
        """The ``.patch`` files, absolute, in apply order."""
        assert self.folder is not None
        return [self.folder / name for name in self.patches]


class BranchCarries(FrozenModel):
    """Which patch-sets one fork branch carries: ``carries`` lists ids, or ``["*"]`` for all.

    Every other patch-set is ``not-carried`` on that branch. ``note`` says why (the branch
    predates a feature, keeps an older layout...).
    """

    carries: tuple[str, ...]
    note: str = ""

    def carries_id(self, patchset_id: str) -> bool:
        """Whether ``patchset_id`` is carried by this branch."""
        return "*" in self.carries or patchset_id in self.carries


class Catalogue(FrozenModel):
    """Optional ``patches/catalogue.yaml``: when the catalogue applies to a tree at all, and per branch what it carries.

    ``applies_when`` invariants are checked on the tree first; when one does not hold the
    patch-sets are reported as not applicable instead of as violations (a catalogue for
    one fork run against another project's tree). ``branches`` maps fork branch names
    (exact, or ``fnmatch`` patterns; the first match in file order wins) to the patch-sets
    they carry; a branch not listed carries every patch-set (subject to ``carried_when``).
    """

    name: str = ""
    applies_when: tuple[Invariant, ...] = ()
    branches: dict[str, BranchCarries] = Field(default_factory=dict)

    def branch_entry(self, branch: str | None) -> tuple[str, BranchCarries] | None:
        """``(pattern, entry)`` of the first ``branches`` key matching ``branch``, else None."""
        if not branch:
            return None
        if branch in self.branches:
            return branch, self.branches[branch]
        for pattern, entry in self.branches.items():
            if fnmatch.fnmatchcase(branch, pattern):
                return pattern, entry
        return None


def load_patchset(folder: Path, *, lint: bool = True) -> PatchSet:
    """Load ``<folder>/patchset.yaml`` (with ``lint``, also its patch files' damage, see below).

    Raises:
        ConfigError: malformed YAML, an unknown key, a bad regex, an id that differs from
            the folder name, a listed patch file that is missing or damaged
            (:func:`ds4sync.patchsets.lint.lint_patch`: binary stubs, binary patches without
            full index lines, CRLF damage).
    """
    path = folder / PATCHSET_FILE
    patchset = validate(PatchSet, read_yaml(path), source=path)
    if patchset.id != folder.name:
        raise ConfigError(
            f"id: '{patchset.id}' differs from the folder name '{folder.name}'",
            where=str(path),
            fix="rename the folder or the id",
        )
    for name in patchset.patches:
        if not (folder / name).is_file():
            raise ConfigError(
                f"patches: file '{name}' does not exist",
                where=str(path),
                fix="run `ds4sync patches refresh` or fix the list",
            )
        problems = lint_patch(folder / name) if lint else []
        if problems:
            raise ConfigError(
                "; ".join(problems),
                where=str(folder / name),
                fix="git would drop or damage these files when it applies the patch",
            )
    return updated(patchset, folder=folder)


def load_catalogue(patches_dir: Path) -> tuple[Catalogue, list[PatchSet]]:
    """Every patch-set under ``patches_dir`` in dependency order, plus the catalogue settings.

    A missing folder is an empty catalogue.

    Raises:
        ConfigError: a malformed file, duplicate ids, an unknown dependency, a cycle, a branch
            that carries an unknown id.
    """
    if not patches_dir.is_dir():
        return Catalogue(), []
    cat_path = patches_dir / CATALOGUE_FILE
    catalogue = validate(Catalogue, read_yaml(cat_path), source=cat_path) if cat_path.is_file() else Catalogue()
    found = [load_patchset(p.parent) for p in sorted(patches_dir.glob(f"*/{PATCHSET_FILE}"))]
    ordered = dependency_order(found, where=str(patches_dir))
    known = {ps.id for ps in ordered}
    for branch, entry in catalogue.branches.items():
        unknown = [i for i in entry.carries if i != "*" and i not in known]
        if unknown:
            raise ConfigError(
                f"branches.{branch}.carries: unknown patch-set(s) {', '.join(unknown)}",
                where=str(cat_path),
                fix=f"known ids: {', '.join(sorted(known)) or '(none)'}",
            )
    return catalogue, ordered


def dependency_order(patchsets: Sequence[PatchSet], *, where: str = "patches") -> list[PatchSet]:
    """Patch-sets sorted so each comes after those it ``depends_on`` (ties: by id).

    Raises:
        ConfigError: an unknown dependency, or a cycle (named in full, e.g. ``a -> b -> a``).
    """
    by_id: dict[str, PatchSet] = {}
    for ps in patchsets:
        if ps.id in by_id:
            raise ConfigError(f"two patch-sets have the id '{ps.id}'", where=where)
        by_id[ps.id] = ps
    for ps in patchsets:
        for dep in ps.depends_on:
            if dep not in by_id:
                raise ConfigError(
                    f"depends_on: unknown patch-set '{dep}'",
                    where=_source(ps),
                    fix=f"known ids: {', '.join(sorted(by_id)) or '(none)'}",
                )
    ordered: list[PatchSet] = []
    state: dict[str, str] = {}

    def visit(ps: PatchSet, path: list[str]) -> None:
        if state.get(ps.id) == "done":
            return
        if state.get(ps.id) == "open":
            cycle = [*path[path.index(ps.id) :], ps.id]
            raise ConfigError(
                f"depends_on forms a cycle: {' -> '.join(cycle)}", where=where, fix="remove one of these dependencies"
            )
        state[ps.id] = "open"
        for dep in sorted(ps.depends_on):
            visit(by_id[dep], [*path, ps.id])
        state[ps.id] = "done"
        ordered.append(ps)

    for ps in sorted(patchsets, key=lambda p: p.id):
        visit(ps, [])
    return ordered


def _source(ps: PatchSet) -> str:
    return str(ps.folder / PATCHSET_FILE) if ps.folder else ps.id
