"""The CLI's shared parts: the typer app, consoles, the ``--json`` envelope, and the one error handler.

Core modules never print or exit; this module renders their results and maps errors
to exit codes (see :mod:`ds4sync.core.errors`).

Every ``--json`` output, success or error, is one object of the same shape (like ``gh``'s)::

    {"schema_version": 1, "command": "plan", "ok": true, "exit_code": 0, "data": {...}}
    {"schema_version": 1, "command": "plan", "ok": false, "exit_code": 2,
     "error": {"type": "GitError", "message": "...", "where": "...", "fix": "..."}}
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from ds4sync.core.errors import Ds4syncError, ExitCode
from ds4sync.core.redact import RedactedStream

if TYPE_CHECKING:
    from rich.console import Console

#: Version of the ``--json`` envelope; bumped when a top-level key changes meaning.
SCHEMA_VERSION = 1

app = typer.Typer(
    name="ds4sync",
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
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


#: Columns of output that goes to a pipe or file: tables size to their content (rich never pads them out).
_UNBOUNDED_WIDTH = 4096


class _LazyConsole:
    """A ``rich.console.Console`` writing to ``file``, made on first use.

    rich takes tens of milliseconds to import and a ``--json`` run needs none of it: the
    envelope is written to ``file`` directly.
    """

    def __init__(self, file: RedactedStream) -> None:
        self.file = file
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._made(), name)

    def __enter__(self) -> Console:  # rich's Live holds its console with ``with``: dunders skip __getattr__
        return self._made().__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._made().__exit__(*exc)

    def _made(self) -> Console:
        if self._console is None:
            from rich.console import Console

            # No markup: what is printed holds untrusted text (build tails, gate output, paths) where a
            # `[/usr/include/x.h]` would be a closing tag and `[redacted]` a style; styles go in as rich Text.
            self._console = Console(
                file=self.file,  # type: ignore[arg-type]
                highlight=False,
                soft_wrap=True,
                markup=False,
            )
        console = self._console
        if not console.is_terminal:
            # A pipe or a file has no width; rich would assume 80 and cut every table's cells to fit. Read at each
            # use (COLUMNS still wins), as the stream the console writes to is looked up at each write.
            columns = os.environ.get("COLUMNS", "")
            console.width = int(columns) if columns.isdigit() else _UNBOUNDED_WIDTH
        return console


# Every line the CLI prints goes through the one redaction (core/redact.py) on its way out.
out: Console = _LazyConsole(RedactedStream(lambda: sys.stdout))  # type: ignore[assignment]
err: Console = _LazyConsole(RedactedStream(lambda: sys.stderr))  # type: ignore[assignment]


class _State:
    """What the root options set for this invocation."""

    verbose = False
    command = "ds4sync"


state = _State()


def _progress(quiet: bool):
    if quiet:
        return lambda _message: None

    def say(message: str) -> None:
        from rich.text import Text  # at the first line printed: a --json run never loads rich

        err.print(Text(f"· {message}", style="dim"), highlight=False)

    return say


def envelope(command: str, *, exit_code: int, data: Any = None, error: dict[str, Any] | None = None) -> dict[str, Any]:
    """The one ``--json`` shape: ``schema_version``, ``command``, ``ok``, ``exit_code``, then ``data`` or ``error``.

    ``ok`` is ``exit_code == 0``. A command that ran and found a failure (a failed gate)
    carries ``data``; a command that could not run (bad input, a refused state) carries
    ``error`` with ``type``, ``message``, ``where`` and ``fix``.
    """
    body: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "ok": int(exit_code) == 0,
        "exit_code": int(exit_code),
    }
    if error is not None:
        body["error"] = error
    else:
        body["data"] = data
    return body


def _print_envelope(body: dict[str, Any]) -> None:
    import json

    from ds4sync.core.redact import redact_data

    out.file.write(json.dumps(redact_data(body, public=False), indent=2, default=str) + "\n")
    out.file.flush()


def emit(data: Any, *, exit_code: int = 0) -> None:
    """Print ``data`` in the envelope of the running command; exit with ``exit_code`` when it is not 0."""
    _print_envelope(envelope(state.command, exit_code=exit_code, data=data))
    if exit_code:
        raise typer.Exit(int(exit_code))


def done(json_out: bool, data: Any, *, exit_code: int = 0, text: Any = None) -> None:
    """End a command: the envelope with ``--json``, else ``text()`` (a callable rendering to the terminal).

    Raises ``typer.Exit(exit_code)`` when ``exit_code`` is not 0.
    """
    if json_out:
        emit(data() if callable(data) else data, exit_code=exit_code)
        return
    if text is not None:
        text()
    if exit_code:
        raise typer.Exit(int(exit_code))


def fail(message: str, *, exit_code: ExitCode = ExitCode.USAGE) -> NoReturn:
    """Stop a command with one line (usage errors of the CLI itself)."""
    from ds4sync.core.errors import StateError

    error = StateError(message)
    error.exit_code = exit_code
    raise error


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("ds4sync")
        except PackageNotFoundError:  # a source checkout that was never installed
            number = "unknown"
        out.print(f"ds4sync {number}", markup=False)
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Show every git and child command (they always go to the run's log). Works after the command too.",
        ),
    ] = False,
) -> None:
    """Keep a fork in sync with its upstream, and prove each sync."""


def _save_traceback() -> str:
    folder = Path(os.environ.get("DS4SYNC_CRASH_DIR", tempfile.gettempdir())) / "ds4sync-crashes"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"crash-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    from ds4sync.core.crash import crash_text

    path.write_text(crash_text(sys.argv, traceback.format_exc()))
    return str(path)


def _split_verbose(args: list[str]) -> tuple[list[str], bool]:
    """Take ``-v``/``--verbose`` from anywhere before ``--``: it means the same after any command."""
    end = args.index("--") if "--" in args else len(args)
    kept = [a for a in args[:end] if a not in ("-v", "--verbose")]
    return kept + args[end:], len(kept) != end


def _wants_json(args: list[str]) -> bool:
    end = args.index("--") if "--" in args else len(args)
    return "--json" in args[:end]


def _command_words(command: Any, args: list[str]) -> str:
    """The subcommand path that ``args`` name (``patches check``), for error envelopes."""
    words: list[str] = []
    for arg in args:
        commands = getattr(command, "commands", None)
        if commands is None:
            break
        if arg.startswith("-"):
            continue
        if arg not in commands:
            break
        words.append(arg)
        command = commands[arg]
    return " ".join(words) or "ds4sync"


def _tidy(command: Any) -> None:
    """gh's help conventions on the whole tree: flags show no ``<bool>``, arguments read as ``REF``.

    Typer ships its own copy of click, so parameters are told apart by ``param_type_name``.
    """
    for param in command.params:
        if param.param_type_name == "option" and getattr(param, "is_flag", False):
            param.display_type_rich = _no_type
        elif param.param_type_name == "argument" and param.metavar is None:
            param.metavar = (param.name or "arg").upper()
    original = command.get_help_option

    def help_option(ctx: Any) -> Any:
        option = original(ctx)
        if option is not None:
            option.display_type_rich = _no_type
        return option

    command.get_help_option = help_option
    for sub in getattr(command, "commands", {}).values():
        _tidy(sub)


def _no_type(ctx: Any) -> None:
    return None


def build_command(args: Sequence[str] = ()) -> Any:
    """The click command tree of the app, with the help conventions applied.

    When ``args`` begin with a command's name, the tree holds that command alone (typer
    builds every command's parameters up front, and a run needs only its own); anything
    else (no command, an option first, an unknown name) gets the whole tree, so that help,
    ``--version`` and "no such command" read as they always do.
    """
    wanted = args[0] if args else None
    commands = [c for c in app.registered_commands if _command_name(c) == wanted]
    groups = [g for g in app.registered_groups if g.name == wanted]
    if commands or groups:
        only = copy.copy(app)
        only.registered_commands, only.registered_groups = commands, groups
        command = typer.main.get_command(only)
    else:
        command = typer.main.get_command(app)
    _tidy(command)
    return command


def _command_name(info: Any) -> str:
    """The name typer gives a registered command (its own, else the function's, dashed)."""
    return info.name or info.callback.__name__.replace("_", "-")


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turn errors into one line (or the error envelope) and an exit code."""
    from ds4sync.cli import logs

    # pydantic scans every installed distribution's entry points for plugins before it builds
    # the first model (about 40 ms of each start); ds4sync's models are its own state, which no
    # plugin observes. A value set by the caller is kept (pydantic's own setting).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    args, verbose = _split_verbose(list(sys.argv[1:] if argv is None else argv))
    state.verbose = verbose
    logs.configure(verbose=verbose, argv=args)
    command = build_command(args)
    state.command = _command_words(command, args)
    try:
        return _run(command, args)
    finally:
        logs.close()


def _run(command: Any, args: list[str]) -> int:
    from typer.exceptions import TyperException

    try:
        result = command.main(args=args, prog_name="ds4sync", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        err.print("ds4sync: interrupted")
        return 130
    except TyperException as exc:
        return _usage_error(command, args, exc)
    except Ds4syncError as exc:
        return _error(command, args, exc)
    except KeyboardInterrupt:
        err.print("ds4sync: interrupted; `ds4sync status` shows where the run stands")
        return 130
    except Exception as exc:
        path = _save_traceback()
        err.print(f"ds4sync: internal error: {type(exc).__name__}: {exc} (traceback: {path})", markup=False)
        if _wants_json(args):
            info = {"type": type(exc).__name__, "message": str(exc), "where": path, "fix": "report this bug"}
            _print_envelope(envelope(state.command, exit_code=ExitCode.INTERNAL, error=info))
        return int(ExitCode.INTERNAL)
    return result if isinstance(result, int) else 0


def _usage_error(command: Any, args: list[str], exc: Any) -> int:
    ctx = getattr(exc, "ctx", None)
    where = f" (see `{ctx.command_path} -h`)" if ctx is not None else ""
    # click's "no arguments: show help" error has no message of its own (`ds4sync -v`, `ds4sync kernels`)
    message = exc.format_message() or "no command given: name one of the commands above"
    err.print(f"ds4sync: error: {message}{where}", markup=False)
    if _wants_json(args):
        info = {"type": "UsageError", "message": message, "where": None, "fix": "see --help"}
        _print_envelope(envelope(state.command, exit_code=ExitCode.USAGE, error=info))
    return int(ExitCode.USAGE)


def _error(command: Any, args: list[str], exc: Ds4syncError) -> int:
    from ds4sync.core.redact import redact_secrets

    err.print(f"ds4sync: error: {redact_secrets(exc.one_line())}", markup=False)
    if _wants_json(args):
        info = {"type": type(exc).__name__, "message": exc.what, "where": exc.where, "fix": exc.fix}
        _print_envelope(envelope(state.command, exit_code=exc.exit_code, error=info))
    return int(exc.exit_code)
