"""The ds4sync command line: thin adapters from options to one core function each.

Core modules never print or exit; these modules render their results and ``_app.main``
maps errors to exit codes (see :mod:`ds4sync.core.errors`). Each module registers its commands
on the one typer app; the import order below is the order of ``ds4sync --help``.
"""
# ruff: noqa: I001 - the order of these imports is the order of the commands in --help

from ds4sync.cli import run, conflicts, loop, bisect, drift, patches, build, gates, report, serving, ci  # noqa: F401
from ds4sync.cli._app import app, main

__all__ = ["app", "main"]
