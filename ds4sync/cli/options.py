"""The options many commands share, as typer ``Annotated`` types: ``json_out: opt.Json = False``.

Imported as a module (``from ds4sync.cli import options as opt``), so that a command names the options it takes
in its signature and nowhere else. The workspace options (``--repo --config --branch --state-dir --profile``)
come as one :class:`Where`, from the :func:`workspace` decorator.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

if TYPE_CHECKING:
    from ds4sync.runner import Workspace

Command = TypeVar("Command", bound=Callable[..., Any])

Repo = Annotated[
    Path,
    typer.Option(
        "--repo", help="The fork checkout or any folder inside it (default: current directory).", file_okay=False
    ),
]
Config = Annotated[
    Path | None, typer.Option("--config", help="ds4sync.yaml to use (default: <repo>/ds4sync.yaml).", dir_okay=False)
]
Branch = Annotated[
    str | None,
    typer.Option("--branch", help="The fork branch (default: fork.branch in config, else the checked-out branch)."),
]
StateDir = Annotated[
    Path | None, typer.Option("--state-dir", help="Where runs live (default: <git-common-dir>/ds4sync).")
]
Profile = Annotated[
    Path | None, typer.Option("--profile", help="Profile folder (patches/, gates/, reports/, kernels/).")
]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object (the ds4sync envelope) instead of text.")]
ServingConfig = Annotated[
    Path | None,
    typer.Option("--serving-config", dir_okay=False, help="YAML with the serving section (default: ds4sync.yaml)."),
]
Fetch = Annotated[bool, typer.Option("--fetch", help="Fetch the ref from the upstream remote first.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask; answer yes.")]
Run = Annotated[str | None, typer.Option("--run", help="Run id (default: the active run, else the latest).")]

#: The workspace options, in the order a command lists them: name, type, default.
_WORKSPACE_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("repo", Repo, Path(".")),
    ("config", Config, None),
    ("branch", Branch, None),
    ("state_dir", StateDir, None),
    ("profile", Profile, None),
)


@dataclass(frozen=True)
class Where:
    """The workspace options a command was given: the fork checkout, its config, branch, state folder, profile.

    An option the command does not take stays None (its default in ds4sync.yaml, or found from the checkout).
    """

    repo: Path = Path(".")
    config: Path | None = None
    branch: str | None = None
    state_dir: Path | None = None
    profile: Path | None = None

    def open(self) -> Workspace:
        """The workspace these options name (:func:`ds4sync.runner.open_workspace`), its run log attached.

        Raises:
            ConfigError, GitError: as :func:`~ds4sync.runner.open_workspace` does.
        """
        from ds4sync.cli import logs
        from ds4sync.runner import open_workspace

        ws = open_workspace(
            self.repo, config_path=self.config, branch=self.branch, state_dir=self.state_dir, profile=self.profile
        )
        logs.attach_run_log(ws.state_dir)
        return ws


#: The default of a command's ``where`` parameter; typer never uses it (:func:`workspace` replaces it).
HERE = Where()


def workspace(*names: str) -> Callable[[Command], Command]:
    """Give a command the workspace options ``names`` (of repo, config, branch, state_dir, profile).

    They stand where the command's signature has ``where: opt.Where = opt.HERE``, in the order above, so
    ``--help`` lists them there; the command is called with them as one :class:`Where`.

    Raises:
        ValueError: a name that is no workspace option, or a command without a ``where`` parameter.
    """
    unknown = set(names) - {name for name, _, _ in _WORKSPACE_OPTIONS}
    if unknown:
        raise ValueError(f"no workspace option {sorted(unknown)[0]!r}")
    options = [(name, kind, default) for name, kind, default in _WORKSPACE_OPTIONS if name in names]

    def give(command: Command) -> Command:
        signature = inspect.signature(command, eval_str=True)  # typer reads the types, not their names
        if "where" not in signature.parameters:
            raise ValueError(f"{command.__name__} has no 'where' parameter for its workspace options")
        parameters: list[inspect.Parameter] = []
        for parameter in signature.parameters.values():
            if parameter.name != "where":
                parameters.append(parameter)
                continue
            parameters += [
                inspect.Parameter(name, parameter.kind, default=default, annotation=kind)
                for name, kind, default in options
            ]

        @functools.wraps(command)
        def run(**kwargs: Any) -> Any:
            where = Where(**{name: kwargs.pop(name) for name, _, _ in options})
            return command(where=where, **kwargs)

        run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return give
