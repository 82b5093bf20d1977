"""Loading a tier: ``<profile>/gates/<tier>.yaml`` into :class:`~ds4sync.gates.definition.Gate` values.

Apart from :mod:`ds4sync.gates.definition` because it needs the kind registry (each kind validates its
own ``run:`` section), and the kinds need the definitions.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from ds4sync.core.errors import ConfigError
from ds4sync.core.model import read_yaml, validate
from ds4sync.core.names import TIERS
from ds4sync.gates.definition import Gate, GateDef, GateFile
from ds4sync.gates.environments import ToolsEnv
from ds4sync.gates.kinds import KIND_MODULES, kind_module


def gates_dir(profile: Path) -> Path:
    """The folder holding ``<tier>.yaml`` files in a profile (``<profile>/gates``, or the folder itself)."""
    return profile / "gates" if (profile / "gates").is_dir() else profile


def load_tier(profile: Path, tier: str) -> tuple[Gate, ...]:
    """Load and validate ``<profile>/gates/<tier>.yaml`` (:func:`load_tier_file`) into its gates."""
    parsed, path = load_tier_file(profile, tier)
    return tuple(_load_gate(parsed, index, gate, path) for index, gate in enumerate(parsed.gates))


def tier_environment(profile: Path, tier: str) -> tuple[str | None, ToolsEnv | None, Path]:
    """The tier file's ``environment`` (None: not named), its ``tools:`` venv (None: none) and the file's path."""
    parsed, path = load_tier_file(profile, tier)
    return parsed.environment, parsed.tools, path


def load_tier_file(profile: Path, tier: str) -> tuple[GateFile, Path]:
    """Read and validate ``<profile>/gates/<tier>.yaml``; returns the file's model and its path.

    Raises:
        ConfigError: unknown tier, missing file, malformed YAML, a bad field, an unknown
            kind, or a ``run`` section the kind rejects; the line names file and key path.
    """
    if tier not in TIERS:
        raise ConfigError(f"unknown tier '{tier}'", where="--tier", fix=f"use one of {', '.join(TIERS)}")
    path = gates_dir(profile) / f"{tier}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"no gate file for tier '{tier}'",
            where=str(path),
            fix="create it or point --profile at a folder that has gates/<tier>.yaml",
        )
    data = read_yaml(path)
    if isinstance(data, dict) and "tier" not in data:
        data = {"tier": tier, **data}
    parsed = validate(GateFile, data, source=path)
    if parsed.tier != tier:
        raise ConfigError(f"tier: file says '{parsed.tier}', expected '{tier}'", where=str(path))
    return parsed, path


def _load_gate(parsed: GateFile, index: int, gate: GateDef, path: Path) -> Gate:
    if gate.kind not in KIND_MODULES:
        raise ConfigError(
            f"gates.{index}.kind: unknown kind '{gate.kind}' (known: {', '.join(sorted(KIND_MODULES))})",
            where=str(path),
        )
    spec_model: type[BaseModel] = kind_module(gate.kind).Spec
    spec = validate(spec_model, gate.run, source=path, at=("gates", index, "run"))
    return Gate(
        definition=gate,
        spec=spec,
        tier=parsed.tier,
        source=path,
        shared_rules=parsed.env_failures,
        environment=gate.environment,
    )
