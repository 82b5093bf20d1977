"""The base of every config and result model, and the one way to read a YAML file into one.

A leaf module: it imports nothing else of ds4sync but its errors.
"""

from __future__ import annotations

import difflib
import errno
import functools
import os
import re
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from ds4sync.core.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class FrozenModel(BaseModel):
    """Immutable, and unknown keys are rejected (a typo in a file is an error, not a silent default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def updated(model: M, /, **changes: Any) -> M:
    """A copy of ``model`` with ``changes``, validated as a new model would be: the one way to change a result.

    ``model_copy(update=...)`` stores whatever it is given; a wrong value then makes a saved run record
    unreadable far from where it was stored. Here it fails at the update. Nested models that are not
    changed are kept as they are (not validated again).

    Raises:
        ValueError: a key that is no field of the model, or a value its field does not accept; the
            message reads ``<Model>.<field>: <what was expected> (got ...)``.
    """
    cls = type(model)
    unknown = sorted(set(changes) - set(cls.model_fields))
    if unknown:
        raise ValueError(f"{cls.__name__}.{unknown[0]}: no such field (fields: {', '.join(cls.model_fields)})")
    try:
        new = cls.model_validate({**model.__dict__, **changes})
    except ValidationError as exc:
        raise ValueError(f"{cls.__name__}.{describe_validation_error(exc, cls)}") from exc
    object.__setattr__(new, "__pydantic_fields_set__", model.model_fields_set | set(changes))
    return new


def from_attributes(cls: type[M], source: object, /, **given: Any) -> M:
    """A ``cls`` whose fields are read from ``source``'s attributes of the same names, ``given`` for the others.

    The one way a model repeats another's fields (a report view of a result): every field of ``cls`` that
    ``given`` does not set is read from ``source``, defaults included, so a field ``source`` lacks is an error,
    never a silent default.

    Raises:
        AttributeError: ``source`` has no attribute named like a field of ``cls`` that ``given`` does not set.
        pydantic.ValidationError: a value the field does not accept.
    """
    return cls(**{name: getattr(source, name) for name in cls.model_fields if name not in given}, **given)


def checked_regex(pattern: str) -> str:
    """``pattern`` as given, once it compiles as a Python regular expression.

    Raises:
        ValueError: it does not compile (``re.error`` is no ValueError: pydantic would let it escape).
    """
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression ({exc})") from exc
    return pattern


#: A field holding a regular expression: a pattern that does not compile fails when the file is read.
Regex = Annotated[str, AfterValidator(checked_regex)]


#: A dotted Python name: ``package.module``, or a qualified name within a module (``Class.method``).
DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def checked_module_name(name: str) -> str:
    """``name`` as given, once it is a dotted module name (``package.module``).

    Raises:
        ValueError: anything else, quoting it.
    """
    if not DOTTED_NAME.fullmatch(name):
        raise ValueError(f"'{name}' is not a dotted module name like 'package.module'")
    return name


#: A field naming a Python module by its dotted name.
ModuleName = Annotated[str, AfterValidator(checked_module_name)]


#: Limits on one YAML file ds4sync reads (a config or profile file is a few kilobytes): its size in bytes, how deep
#: its collections nest, how many aliases (``*name``) it uses, and how many values it holds with every alias
#: expanded. A billion-laughs file (a few hundred bytes of nested aliases) or a file nested 100,000 deep is an
#: error line, not gigabytes of memory or a RecursionError.
YAML_MAX_BYTES = 1024 * 1024
YAML_MAX_DEPTH = 64
YAML_MAX_ALIASES = 64
YAML_MAX_VALUES = 100_000


def read_yaml(path: Path) -> Any:
    """Parse a YAML file, the one way ds4sync reads YAML; a syntax error or a key given twice in one mapping
    (which PyYAML would let the last one win) becomes a ConfigError with line and column, and so does a file
    past the limits above (size, nesting, aliases, expanded values), what it is and where."""
    text = _read_text(path)
    import yaml  # start-up stays light for commands without a config file

    try:
        try:
            data = yaml.load(text, Loader=_unique_keys_loader(libyaml=True))
        except (yaml.YAMLError, _LimitError):
            # Bad input is described by PyYAML's own parser: its words and marks, and libyaml's nesting limit
            # (1000) never stands in for ours.
            data = yaml.load(text, Loader=_unique_keys_loader())
        _check_expanded_size(data, path)
    except _LimitError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(exc.problem, where=where, fix=exc.fix) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"malformed YAML ({problem})", where=where, fix="fix the syntax at that line") from exc
    return {} if data is None else data


def _read_text(path: Path) -> str:
    """The file's UTF-8 text, refused past :data:`YAML_MAX_BYTES` (read at most one byte more: a FIFO or a
    device reads no further) or when it is no regular file."""
    try:
        if not path.is_file():
            raise ConfigError(not_a_file(path), where=str(path), fix="point it at a YAML file")
        with open(path, "rb") as handle:
            raw = handle.read(YAML_MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read file ({exc.strerror})", where=str(path)) from exc
    if len(raw) > YAML_MAX_BYTES:
        raise ConfigError(
            f"file is larger than {YAML_MAX_BYTES // 1024} KiB, the most ds4sync reads as YAML",
            where=str(path),
            fix="check that this is the file you meant (a config or profile file is a few KiB)",
        )
    return decode_utf8(raw, where=str(path))


def decode_utf8(raw: bytes, *, where: str, what: str = "not UTF-8 text", fix: str = "save the file as UTF-8") -> str:
    """``raw`` decoded as UTF-8, the one way a file ds4sync reads as text is refused when it is none.

    Raises:
        ConfigError: ``what``, then the first byte that is no UTF-8 and its offset (``byte 0xff at offset 12``).
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} (byte {exc.object[exc.start]:#04x} at offset {exc.start})", where=where, fix=fix
        ) from exc


def not_a_file(path: Path) -> str:
    """What is at ``path`` instead of a regular file: a folder, a symlink loop, a dangling symlink, nothing."""
    if path.is_dir():
        return "is a folder, not a file"
    if path.is_symlink():
        try:
            path.resolve(strict=True)
        except RuntimeError:
            return "is a symlink loop, not a file"
        except OSError as exc:
            return "is a symlink loop, not a file" if exc.errno == errno.ELOOP else "is a symlink to nothing"
    if os.path.lexists(path):
        return "is not a regular file"
    return "does not exist"


def _check_expanded_size(data: Any, path: Path) -> None:
    """Refuse data that holds more than :data:`YAML_MAX_VALUES` values once every alias is expanded (what a
    validator or a JSON dump walks), or that contains itself (a recursive alias)."""
    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def size(value: Any) -> int:
        if not isinstance(value, dict | list):
            return 1
        key = id(value)
        if key in sizes:
            return sizes[key]
        if key in busy:
            raise _LimitError("a YAML alias refers to the collection that contains it", None, fix=_ALIAS_FIX)
        busy.add(key)
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        total = 1
        for item in items:
            total += size(item)
            if total > YAML_MAX_VALUES:
                raise _LimitError(
                    f"more than {YAML_MAX_VALUES} values once its aliases are expanded", None, fix=_ALIAS_FIX
                )
        busy.discard(key)
        sizes[key] = total
        return total

    size(data)


_ALIAS_FIX = "write the values out instead of nesting aliases (`&name`/`*name`)"


@functools.cache
def _unique_keys_loader(*, libyaml: bool = False) -> type:
    """PyYAML's SafeLoader, refusing a key that a mapping already has (its documented extension point), and
    collections nested deeper than :data:`YAML_MAX_DEPTH` or more than :data:`YAML_MAX_ALIASES` aliases
    (counted while composing, before anything is built).

    With ``libyaml`` (where PyYAML has it), libyaml's C parser reads the text (about 7x less CPU than the
    Python scanner and parser) under PyYAML's Python composer, so that the limits above are counted the
    same way."""
    import yaml

    base: type = yaml.SafeLoader
    if libyaml and yaml.__with_libyaml__:
        from yaml._yaml import CParser

        class _CParsedSafeLoader(
            yaml.composer.Composer, yaml.constructor.SafeConstructor, yaml.resolver.Resolver, CParser
        ):
            def __init__(self, stream: str) -> None:
                CParser.__init__(self, stream)
                yaml.composer.Composer.__init__(self)
                yaml.constructor.SafeConstructor.__init__(self)
                yaml.resolver.Resolver.__init__(self)

        base = _CParsedSafeLoader

    class UniqueKeyLoader(base):
        _depth = 0
        _aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self._aliases += 1
                if self._aliases > YAML_MAX_ALIASES:
                    mark = self.peek_event().start_mark
                    raise _LimitError(f"more than {YAML_MAX_ALIASES} aliases", mark, fix=_ALIAS_FIX)
            self._depth += 1
            try:
                if self._depth > YAML_MAX_DEPTH:
                    mark = self.peek_event().start_mark
                    raise _LimitError(
                        f"collections nested more than {YAML_MAX_DEPTH} deep",
                        mark,
                        fix="flatten the file: no ds4sync setting nests that deep",
                    )
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: SafeLoader's own error follows
                    continue
                if first is not None:  # by key, not by line: `{a: 1, a: 2}` repeats it on one line
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} given twice (first on line {first + 1})", key_node.start_mark
                    )
                seen[key] = key_node.start_mark.line
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


class _LimitError(Exception):
    """A YAML file past one of the limits (``problem`` and the ``problem_mark`` where it was found, if known)."""

    def __init__(self, problem: str, mark: Any, *, fix: str) -> None:
        super().__init__(problem)
        self.problem, self.problem_mark, self.fix = problem, mark, fix


def validate(model: type[M], data: Any, *, source: Path | str, at: tuple[str | int, ...] = ()) -> M:
    """Validate ``data`` into ``model``; the first error becomes one ConfigError line.

    The line reads ``<file>:<line>: <key.path>: <what was expected>``. ``at`` is where ``data`` sits
    in the file (``("serving",)`` for a section, ``("gates", 0, "run")`` for one gate's settings) and
    leads the key path; the line is the offending key's (an unknown key) or value's, found by walking
    the file's YAML nodes, and is left out where the file is not YAML.
    """
    if not isinstance(data, dict):
        what = ".".join(map(str, at)) or "the top level"
        line = _line_of(source, at, key=False)
        raise ConfigError(
            f"expected a mapping at {what}, got {type(data).__name__}",
            where=f"{source}:{line}" if line and at else str(source),
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        line = _line_of(source, (*at, *err["loc"]), key=err["type"] == "extra_forbidden")
        raise ConfigError(
            describe_validation_error(exc, model, at=at),
            where=f"{source}:{line}" if line else str(source),
            fix=f"fix that key in {Path(str(source)).name} (its keys are the fields of {model.__name__})",
        ) from exc


def _line_of(source: Path | str, loc: tuple[Any, ...], *, key: bool) -> int | None:
    """The 1-based line of ``loc`` in the YAML file ``source``: the mapping key's line when ``key``,
    else its value's; the deepest node found where the path leaves the file; None for no YAML file."""
    path = Path(str(source))
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        return None
    import yaml

    try:
        node: Any = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for index, part in enumerate(loc):
        found = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
                    last = index == len(loc) - 1
                    found, line = value_node, (key_node if key and last else value_node).start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            found = node.value[part]
            line = found.start_mark.line + 1
        if found is None:
            break
        node = found
    return line


def describe_validation_error(
    exc: ValidationError, model: type[BaseModel] | None = None, *, at: tuple[str | int, ...] = ()
) -> str:
    """``key.path: expected ...`` for the first error of a pydantic ValidationError, the path led by ``at``;
    an unknown key of ``model`` (or of a model inside it) names the nearest known one, as difflib finds it."""
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in (*at, *err["loc"])) or "(top level)"
    if err["type"] == "extra_forbidden":
        known = _keys_at(model, err["loc"][:-1]) if model is not None else ()
        near = difflib.get_close_matches(str(err["loc"][-1]), known, n=1)
        return f"{loc}: unknown key" + (f" (did you mean '{near[0]}'?)" if near else "")
    if err["type"] == "missing":
        return f"{loc}: required key is missing"
    got = err.get("input")
    shown = repr(got) if isinstance(got, str | int | float | bool) or got is None else type(got).__name__
    return f"{loc}: {err['msg'].rstrip('.')} (got {shown})"


def _keys_at(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[str, ...]:
    """The field names (and aliases) of the model found at ``loc`` inside ``model``: through fields,
    optional and container types; () where the path leaves the models."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue  # an index into a list or tuple: the item type is found below
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return ()
        current = _model_in(fields[part].annotation)
        if current is None:
            return ()
    fields = getattr(current, "model_fields", {})
    return tuple(name for name, info in fields.items() for name in (name, info.alias) if name)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The first pydantic model in a field's type (``X``, ``X | None``, ``tuple[X, ...]``, ``dict[str, X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
