"""The options many commands share, as typer ``Annotated`` types: ``repo: opt.Repo = Path(".")``.

Imported as a module (``from ds4sync.cli import options as opt``), so that a command names the options it takes
in its signature and nowhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
