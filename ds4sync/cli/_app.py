"""The CLI's shared parts: the typer app, consoles, common options, and the one error handler.

Core modules never print or exit; this module renders their results and maps errors
to exit codes (see :mod:`ds4sync.core.errors`).
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ds4sync.core.errors import Ds4syncError, ExitCode

app = typer.Typer(
    name="ds4sync",
    no_args_is_help=True,
    add_completion=False,
    help="Keep a fork in sync with its upstream, and prove each sync.",
)
config_app = typer.Typer(no_args_is_help=True, help="Inspect ds4sync.yaml.")
app.add_typer(config_app, name="config")
serving_app = typer.Typer(no_args_is_help=True, help="Serving gates against an OpenAI-compatible server.")
app.add_typer(serving_app, name="serving")
kernels_app = typer.Typer(no_args_is_help=True, help="Kernel tier: DeepSeek op checks and benchmarks.")
app.add_typer(kernels_app, name="kernels")
patches_app = typer.Typer(no_args_is_help=True, help="Semantic patch-sets: list, check, capture, refresh.")
app.add_typer(patches_app, name="patches")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

RepoOpt = Annotated[
    Path, typer.Option("--repo", help="The fork checkout (default: current directory).", file_okay=False)
]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="ds4sync.yaml to use (default: <repo>/ds4sync.yaml).", dir_okay=False)
]
BranchOpt = Annotated[str | None, typer.Option("--branch", help="The fork branch (default: fork.branch in config).")]
StateOpt = Annotated[
    Path | None, typer.Option("--state-dir", help="Where runs live (default: <git-common-dir>/ds4sync).")
]
ProfileOpt = Annotated[
    Path | None, typer.Option("--profile", help="Profile folder (patches/, gates/, reports/, kernels/).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]
ServingConfigOpt = Annotated[
    Path | None,
    typer.Option("--serving-config", dir_okay=False, help="YAML with the serving section (default: ds4sync.yaml)."),
]
FetchOpt = Annotated[bool, typer.Option("--fetch", help="Fetch the ref from the upstream remote first.")]


def _workspace(
    repo: Path,
    config: Path | None,
    branch: str | None = None,
    state_dir: Path | None = None,
    profile: Path | None = None,
):
    from ds4sync.runner import open_workspace

    return open_workspace(repo, config_path=config, branch=branch, state_dir=state_dir, profile=profile)


def _progress(quiet: bool):
    if quiet:
        return lambda _message: None
    return lambda message: err.print(f"[dim]· {message}[/]")


def _save_traceback() -> str:
    folder = Path(os.environ.get("DS4SYNC_CRASH_DIR", tempfile.gettempdir())) / "ds4sync-crashes"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"crash-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    path.write_text(f"argv: {sys.argv}\n\n{traceback.format_exc()}")
    return str(path)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turn errors into one line and an exit code."""
    from typer.exceptions import TyperException

    try:
        result = app(args=argv, standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        err.print("ds4sync: interrupted")
        return 130
    except TyperException as exc:
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            err.print(f"ds4sync: error: {exc.format_message()}", markup=False)
        return int(ExitCode.USAGE)
    except Ds4syncError as exc:
        err.print(f"ds4sync: error: {exc.one_line()}", markup=False)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        err.print("ds4sync: interrupted; `ds4sync status` shows where the run stands")
        return 130
    except Exception as exc:
        path = _save_traceback()
        err.print(f"ds4sync: internal error: {type(exc).__name__}: {exc} (traceback: {path})", markup=False)
        return int(ExitCode.INTERNAL)
    return result if isinstance(result, int) else 0
