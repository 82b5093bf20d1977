"""ds4sync.yaml and profile folders, validated once into frozen typed models.

A bad file is reported as one line naming the file, the key path and what was expected.
After loading, nothing reads raw dicts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

import ds4sync
from ds4sync.core.errors import ConfigError
from ds4sync.core.model import FrozenModel, not_a_file, read_yaml, validate
from ds4sync.core.paths import path_matches
from ds4sync.models.gates_settings import GatesConfig
from ds4sync.models.loop_settings import DeployConfig, NightlyConfig
from ds4sync.models.merge_settings import EndpointConfig
from ds4sync.models.native_profile import BuildConfig
from ds4sync.models.publish_settings import NotifyConfig, PublishConfig, checked_remote_name
from ds4sync.models.serving_settings import ServingConfig

__all__ = ["Config", "ConfigError", "FrozenModel", "find_config", "load_config", "read_yaml", "validate"]

CONFIG_NAME = "ds4sync.yaml"


class UpstreamConfig(FrozenModel):
    """Where upstream lives: remote name, optional URL, the ref to sync to, and its display name."""

    remote: str = "upstream"
    url: str | None = None
    ref: str = "main"
    name: str | None = Field(default=None, description="display name, e.g. vllm-project/vllm")
    api_url: str | None = Field(default=None, description="upstream's forge REST API for drift (default: publish's)")

    @field_validator("remote")
    @classmethod
    def _remote_name(cls, value: str) -> str:
        return checked_remote_name(value)


class ForkConfig(FrozenModel):
    """The fork branch that syncs take in, and its display name."""

    branch: str | None = None
    name: str | None = Field(default=None, description="display name, e.g. jasl/vllm")


class ResolutionRule(FrozenModel):
    """Resolve every conflicted path matching ``glob`` with ``strategy``.

    Globs are ds4sync's one path dialect (:mod:`ds4sync.core.paths`): ``*`` within one folder,
    ``**`` across folders, ``{a,b}`` alternatives. ``ours`` keeps the fork's side, ``theirs``
    upstream's, ``union`` keeps the lines of both (git's union merge driver).
    """

    glob: str
    strategy: Literal["ours", "theirs", "union"]
    reason: str = ""

    def matches(self, path: str) -> bool:
        """Whether ``path`` (repository-relative, POSIX) falls under this rule."""
        return path_matches(self.glob, path)


def _check_placeholders(template: str, known: tuple[str, ...]) -> None:
    """Raise ValueError naming an unknown ``{placeholder}`` (or a stray brace) in ``template``."""
    import string

    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ValueError(f"{exc} (placeholders: {', '.join('{' + k + '}' for k in known)})") from exc
    unknown = [name for name in fields if name not in known]
    if unknown:
        raise ValueError(f"unknown placeholder {{{unknown[0]}}} (known: {', '.join('{' + k + '}' for k in known)})")


class MergeConfig(FrozenModel):
    """How the merge phase names things and resolves conflicts."""

    sync_branch: str = "sync/{branch}-{upstream}"
    backup_branch: str | None = Field(
        default=None, description='e.g. "backup/{branch}-{date}-pre-sync"; none by default'
    )
    rules: tuple[ResolutionRule, ...] = ()
    resolutions_dir: str = "patches/resolutions"
    endpoint: EndpointConfig | None = None

    @field_validator("sync_branch")
    @classmethod
    def _sync_prefix(cls, value: str) -> str:
        if not value.startswith("sync/"):
            raise ValueError("must start with 'sync/'")
        _check_placeholders(value, ("branch", "upstream", "run"))
        return value

    @field_validator("backup_branch")
    @classmethod
    def _backup_placeholders(cls, value: str | None) -> str | None:
        if value is not None:
            _check_placeholders(value, ("branch", "date"))
        return value

    def rules_for(self, path: str) -> tuple[ResolutionRule, ...]:
        """The rules whose glob matches ``path``, in file order (the first that applies wins)."""
        return tuple(rule for rule in self.rules if rule.matches(path))


class RedactConfig(FrozenModel):
    """What else to keep out of every file and output: the values of these environment variables
    (on top of the names that look secret, ``*TOKEN*``, ``*PASSWORD*``...)."""

    env: tuple[str, ...] = ()


class Config(FrozenModel):
    """The whole of ds4sync.yaml.

    ``profile`` and ``state_dir`` are resolved against the config file's folder; when
    absent, the shipped DS4 profile and ``<git-common-dir>/ds4sync`` are used.
    """

    upstream: UpstreamConfig = UpstreamConfig()
    fork: ForkConfig = ForkConfig()
    profile: Path | None = None
    state_dir: Path | None = None
    merge: MergeConfig = MergeConfig()
    serving: ServingConfig | None = None
    gates: GatesConfig = GatesConfig()
    build: BuildConfig = BuildConfig()
    publish: PublishConfig | None = None
    notify: NotifyConfig | None = None
    nightly: NightlyConfig = NightlyConfig()
    deploy: DeployConfig | None = None
    redact: RedactConfig = RedactConfig()
    source: Path | None = Field(default=None, exclude=True, description="the file it came from")


def shipped_profile() -> Path:
    """The DS4 profile shipped with ds4sync (repository root in a checkout, the wheel's copy otherwise)."""
    package = Path(ds4sync.__file__).resolve().parent
    for candidate in (package.parent, package / "_profile"):
        if (candidate / "gates").is_dir() and (candidate / "patches").is_dir():
            return candidate
    return package.parent


def find_config(repo: Path, explicit: Path | None) -> Path | None:
    """The config file to load: ``explicit`` if given (must exist), else ``<repo>/ds4sync.yaml`` if present."""
    if explicit is not None:
        if not explicit.is_file():
            what = "config file not found" if not os.path.lexists(explicit) else f"config {not_a_file(explicit)}"
            raise ConfigError(what, where=str(explicit), fix="check --config")
        return explicit
    candidate = repo / CONFIG_NAME
    if os.path.lexists(candidate) and not candidate.is_file():  # never the defaults in place of a file that is there
        raise ConfigError(
            f"{CONFIG_NAME} {not_a_file(candidate)}",
            where=str(candidate),
            fix="make it the config file, or move it away to run with the defaults",
        )
    return candidate if candidate.is_file() else None


def load_config(path: Path | None) -> Config:
    """Load and validate ``path`` into a :class:`Config`; None gives the defaults.

    Raises:
        ConfigError: unreadable YAML, a wrong type, an unknown key; the message names
            the file, the key path and what was expected.
    """
    if path is None:
        return Config()
    data = read_yaml(path)
    config = validate(Config, data, source=path)
    base = path.parent
    return config.model_copy(
        update={
            "source": path,
            "profile": _absolute(config.profile, base),
            "state_dir": _absolute(config.state_dir, base),
        }
    )


def _absolute(path: Path | None, base: Path) -> Path | None:
    if path is None:
        return None
    return path if path.is_absolute() else (base / path).resolve()
