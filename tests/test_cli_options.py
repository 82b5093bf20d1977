"""``opt.workspace``: the workspace options stand where a command's ``where`` does, and arrive as one Where."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ds4sync.cli import options as opt

_app = typer.Typer()
_seen: list[tuple[str, opt.Where, bool]] = []


@_app.command()
@opt.workspace("repo", "config", "state_dir")
def first(target: str = typer.Argument("t"), where: opt.Where = opt.HERE, json_out: opt.Json = False) -> None:
    _seen.append((target, where, json_out))


@_app.command()
@opt.workspace("repo", "config", "branch", "state_dir", "profile")
def second(where: opt.Where = opt.HERE) -> None:
    _seen.append(("", where, False))


def _options(command: str) -> list[str]:
    text = CliRunner().invoke(_app, [command, "--help"], env={"COLUMNS": "200"}).output
    return [word for word in text.split() if word.startswith("--") and word != "--help"]


def test_the_options_stand_where_the_command_has_where_in_workspace_order() -> None:
    assert _options("first") == ["--repo", "--config", "--state-dir", "--json"]
    assert _options("second") == ["--repo", "--config", "--branch", "--state-dir", "--profile"]


def test_the_command_gets_what_was_given_as_one_where_and_its_other_options_as_they_were() -> None:
    _seen.clear()
    result = CliRunner().invoke(_app, ["first", "x", "--state-dir", "s", "--config", "c.yaml", "--repo", ".", "--json"])
    assert result.exit_code == 0, result.output
    assert _seen == [("x", opt.Where(repo=Path("."), config=Path("c.yaml"), state_dir=Path("s")), True)]
    result = CliRunner().invoke(_app, ["second", "--branch", "main", "--profile", "p"])
    assert result.exit_code == 0, result.output
    assert _seen[-1][1] == opt.Where(branch="main", profile=Path("p"))


def test_an_option_the_command_does_not_take_is_refused() -> None:
    result = CliRunner().invoke(_app, ["first", "--branch", "main"])
    assert result.exit_code == 2 and "--branch" in result.output


def test_a_wrong_name_or_a_command_without_where_fails_at_import() -> None:
    with pytest.raises(ValueError, match="no workspace option 'repos'"):
        opt.workspace("repos")

    def plain(json_out: opt.Json = False) -> None: ...

    with pytest.raises(ValueError, match="plain has no 'where' parameter"):
        opt.workspace("repo")(plain)
