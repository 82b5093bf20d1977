"""Where a gate runs: the environment each tier (or gate) names, resolved to one interpreter.

- ``build``: the venv this run's build made (the tree's own code and its native libraries); a run
  without a passed build, or a gate outside a run, is an ``error`` naming that, never another python.
- ``tools``: a venv of pinned tools the tier file describes (``tools: {requirements: [ruff==0.14.0]}``),
  made once under the state folder and checked against its pins before any gate uses it.
- ``ds4sync``: the interpreter running ds4sync.
- ``target`` (the default): ``gates.python``, else the build's venv, else the checkout's ``.venv``,
  else the fork checkout's, else ds4sync's own (:func:`ds4sync.gates.runner.resolve_python`).

``--python`` on the command line overrides every tier's choice; ``gates.environments`` in ds4sync.yaml
overrides a tier file's ``environment``, and a gate's own ``environment`` overrides its tier's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import Field, field_validator

from ds4sync.core.errors import ToolMissingError
from ds4sync.core.files import write_json_atomic
from ds4sync.core.model import FrozenModel
from ds4sync.core.names import EnvironmentName
from ds4sync.core.proc import run
from ds4sync.core.venv import inherit_packages

__all__ = ["EnvironmentName", "ToolsEnv", "build_python", "tools_python"]
_READY = "ds4sync-tools.json"
_VERSIONS = (
    "import importlib.metadata as m, json, sys\n"
    "out = {}\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        out[name] = m.version(name)\n"
    "    except m.PackageNotFoundError:\n"
    "        out[name] = None\n"
    "print(json.dumps(out))\n"
)


class ToolsEnv(FrozenModel):
    """The ``tools:`` section of a tier file: a venv of pinned tools, made by ds4sync.

    ``requirements``: pip requirement lines, each pinned with ``==`` (``ruff==0.14.0``: the version the
    fork's own lint pins); ``python``: the interpreter that makes the venv (default: ds4sync's);
    ``inherit``: the venv also imports that interpreter's packages (an offline host whose ds4sync
    environment already has the pinned tools); ``pip_args``: extra ``pip install`` arguments
    (``[--no-index, --find-links, DIR]``).
    """

    requirements: tuple[str, ...] = Field(min_length=1)
    python: str | None = None
    inherit: bool = False
    pip_args: tuple[str, ...] = ()

    @field_validator("requirements")
    @classmethod
    def _pinned(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for line in value:
            try:
                req = Requirement(line)
            except InvalidRequirement as exc:
                raise ValueError(f"{line!r} is no requirement ({exc})") from exc
            specs = list(req.specifier)
            if len(specs) != 1 or specs[0].operator != "==":
                raise ValueError(f"{line!r} is not pinned: write {req.name}==VERSION")
        return value

    def pins(self) -> dict[str, str]:
        """``{distribution name: pinned version}``."""
        return {Requirement(r).name: next(iter(Requirement(r).specifier)).version for r in self.requirements}


def tools_python(spec: ToolsEnv, root: Path, *, where: str) -> str:
    """The interpreter of the tools venv ``spec`` describes, under ``root/<digest>/``, made when missing.

    The venv is made with ``<python> -m venv --without-pip``, its requirements installed with ds4sync's pip
    (``pip --python VENV install``), then every pin is read back from the venv's own metadata; a venv is
    reused only when that check passed. ``where`` names the tier file in messages.

    Raises:
        ToolMissingError: the venv cannot be made, the install fails, or a tool is not at its pinned version.
    """
    base = spec.python or sys.executable
    digest = hashlib.sha256(json.dumps([spec.model_dump(mode="json"), base]).encode()).hexdigest()[:16]
    venv = root / digest
    python = venv / "bin" / "python"
    if (venv / _READY).is_file() and python.exists():
        return str(python)
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    log = venv.parent / f"{digest}.log"
    _step([base, "-m", "venv", "--without-pip", str(venv)], log, spec, where=where, what="making the tools venv")
    if spec.inherit:
        inherit_packages(base, str(python))
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--disable-pip-version-check"]
    _step([*pip, *spec.pip_args, *spec.requirements], log, spec, where=where, what="installing the tools")
    found = _versions(str(python), tuple(spec.pins()), log)
    wrong = {name: (pin, found.get(name)) for name, pin in spec.pins().items() if found.get(name) != pin}
    if wrong:
        said = ", ".join(f"{n} {have or 'missing'} (pinned {pin})" for n, (pin, have) in wrong.items())
        raise ToolMissingError(f"the tools venv does not have its pins: {said}", where=where, fix=f"see {log}")
    write_json_atomic(venv / _READY, {"requirements": list(spec.requirements), "versions": found})
    return str(python)


def _step(argv: list[str], log: Path, spec: ToolsEnv, *, where: str, what: str) -> None:
    res = run(argv, cwd=log.parent, timeout_s=900, log_path=log)
    if res.returncode != 0 or res.timed_out:
        last = (res.output.strip().splitlines() or [f"exit {res.returncode}"])[-1][-200:]
        raise ToolMissingError(
            f"{what} ({', '.join(spec.requirements)}) failed: {last}",
            where=where,
            fix=f"see {log}; offline, give tools.pip_args (--no-index --find-links DIR) or tools.inherit: true",
        )


def _versions(python: str, names: tuple[str, ...], log: Path) -> dict[str, str | None]:
    res = run([python, "-c", _VERSIONS, *names], cwd=log.parent, timeout_s=120)
    try:
        data = json.loads(res.output.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def build_python(built: str | None, *, in_run: bool, why_not: str) -> str:
    """The build's venv interpreter, or an error saying why there is none (never another python).

    Raises:
        ToolMissingError: outside a run, no passed build in the run, or its interpreter is gone.
    """
    if built and os.path.exists(built):
        return built
    what = why_not if in_run else "not inside a sync run, so there is no build's venv"
    raise ToolMissingError(
        f"the tier runs in the build's venv, but {what}",
        where="environment: build",
        fix="build it (`ds4sync build` in the run, or `ds4sync resume`), or pass --python PATH",
    )
