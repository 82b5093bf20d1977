"""The manifest of native extension modules and op schemas a build must expose.

``kernels/manifest.yaml`` in the profile folder; for the DS4 fork it is taken from the
fork's bindings (``csrc/libtorch_stable/torch_bindings.cpp``, ``csrc/moe/torch_bindings.cpp``,
``setup.py`` ``ext_modules``).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import ConfigDict, Field, field_validator

from ds4sync.core.model import FrozenModel, ModuleName, read_yaml, updated, validate

_OP_RE = re.compile(r"^[A-Za-z_]\w*::[A-Za-z_]\w*$")


class ModuleSpec(FrozenModel):
    """A native extension module to import (``vllm._C``); an optional one may be absent."""

    name: ModuleName
    optional: bool = False
    note: str = ""


class OpSpec(FrozenModel):
    """An op (``namespace::name``) and its expected schema, as written in its ``ops.def(...)``.

    ``schema`` (attribute ``signature``) may omit the ``namespace::`` prefix; comparison is whitespace-normalised
    and, failing that, done on torch's parsed form (``Tensor!`` prints as ``Tensor(a!)``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    op: str
    signature: str = Field(alias="schema", description="the schema string, YAML key 'schema'")
    optional: bool = False
    group: str = ""

    @field_validator("op")
    @classmethod
    def _qualified(cls, value: str) -> str:
        if not _OP_RE.match(value):
            raise ValueError(f"'{value}' is not 'namespace::op'")
        return value

    @property
    def namespace(self) -> str:
        """The torch.ops namespace (``_C``)."""
        return self.op.split("::", 1)[0]

    @property
    def name(self) -> str:
        """The op name without its namespace."""
        return self.op.split("::", 1)[1]

    @property
    def qualified_schema(self) -> str:
        """The schema with its ``namespace::`` prefix, as torch prints it."""
        head = self.signature.split("(", 1)[0]
        return self.signature if "::" in head else f"{self.namespace}::{self.signature}"


class Manifest(FrozenModel):
    """Modules to import and op schemas to compare after a build."""

    modules: tuple[ModuleSpec, ...] = ()
    ops: tuple[OpSpec, ...] = ()
    source: str | None = Field(default=None, exclude=True)


def normalize_schema(text: str) -> str:
    """Collapse whitespace and drop spaces inside brackets: ``f( Tensor  x )`` → ``f(Tensor x)``."""
    text = " ".join(text.split())
    text = re.sub(r"\s*([(),\[\]])\s*", r"\1", text)
    return text.replace(",", ", ")


def write_manifest(manifest: Manifest, path: Path) -> Path:
    """Write ``manifest`` as YAML (the shape :func:`load_manifest` reads) to ``path``."""
    data = manifest.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=200))
    return path


def load_manifest(path: Path) -> Manifest:
    """Load ``kernels/manifest.yaml``.

    Raises:
        ConfigError: unreadable, malformed, an unknown key, a bad module or op name.
    """
    manifest = validate(Manifest, read_yaml(path), source=path)
    return updated(manifest, source=str(path))
