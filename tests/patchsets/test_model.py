"""patchset.yaml validation (one clear line per mistake) and dependency order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.core.errors import ConfigError
from ds4sync.patchsets.model import dependency_order, load_catalogue, load_patchset


def _write(folder: Path, data: object, *, raw: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "patchset.yaml").write_text(raw if raw is not None else yaml.safe_dump(data, sort_keys=False))
    return folder


def _ps(pid: str, *deps: str) -> dict:
    return {
        "id": pid,
        "title": pid.upper(),
        "kind": "fork-feature",
        "depends_on": list(deps),
        "invariants": [{"kind": "file_exists", "path": "setup.py"}],
    }


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"id": "a", "title": "A", "kind": "feature"},
            "kind: Input should be 'fork-feature', 'backport', 'fixup' or 'removal' (got 'feature')",
        ),
        ({"id": "a", "title": "A", "kind": "fixup", "owners": "me"}, "owners: unknown key"),
        ({"id": "a", "kind": "fixup"}, "title: required key is missing"),
        (
            {
                "id": "a",
                "title": "A",
                "kind": "fixup",
                "invariants": [{"kind": "contains", "files": "x.py", "pattern": "("}],
            },
            "invariants.0.contains.pattern: Value error, not a valid regular expression",
        ),
        (
            {"id": "a", "title": "A", "kind": "fixup", "invariants": [{"kind": "symbol", "symbol": "pkg.mod.Name"}]},
            "invariants.0.symbol.symbol: Value error, expected 'package.module:Name'",
        ),
        (
            {"id": "a", "title": "A", "kind": "fixup", "invariants": [{"kind": "grep", "files": "x"}]},
            "invariants.0: Input tag 'grep'",
        ),
        (
            {
                "id": "a",
                "title": "A",
                "kind": "fixup",
                "invariants": [
                    {
                        "kind": "cross_ref",
                        "source": {"files": "a", "pattern": r"def (\w+)"},
                        "target": {"files": "b", "pattern": "no placeholder"},
                    }
                ],
            },
            "target.pattern must contain the {name} placeholder",
        ),
        (
            {
                "id": "a",
                "title": "A",
                "kind": "fixup",
                "invariants": [{"kind": "contains", "files": [], "pattern": "x"}],
            },
            "invariants.0.contains.files: Tuple should have at least 1 item",
        ),
    ],
)
def test_malformed_patchset_is_one_line_naming_file_and_key(tmp_path: Path, data: dict, expected: str) -> None:
    folder = _write(tmp_path / "a", data)
    with pytest.raises(ConfigError) as info:
        load_patchset(folder)
    line = info.value.one_line()
    assert "\n" not in line
    assert re.match(rf"{re.escape(str(folder / 'patchset.yaml'))}:\d+: ", line), line  # the file and the key's line
    assert expected in line


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    folder = _write(tmp_path / "a", None, raw="id: a\ntitle: [unclosed\nkind: fixup\n")
    with pytest.raises(ConfigError) as info:
        load_patchset(folder)
    assert info.value.one_line().startswith(f"{folder / 'patchset.yaml'}:3:5:")
    assert "malformed YAML" in info.value.one_line()


def test_id_must_match_folder_and_patch_files_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="id: 'b' differs from the folder name 'a'"):
        load_patchset(_write(tmp_path / "a", _ps("b")))
    with pytest.raises(ConfigError, match=r"patches: file '0001-x\.patch' does not exist"):
        load_patchset(_write(tmp_path / "c", {**_ps("c"), "patches": ["0001-x.patch"]}))


def test_dependency_order_puts_dependencies_first(tmp_path: Path) -> None:
    for pid, deps in {"alpha": ("zulu",), "zulu": ("mike",), "mike": (), "bravo": ()}.items():
        _write(tmp_path / pid, _ps(pid, *deps))
    _catalogue, ordered = load_catalogue(tmp_path)
    assert [ps.id for ps in ordered] == ["mike", "zulu", "alpha", "bravo"]


def test_cycle_is_one_clear_error(tmp_path: Path) -> None:
    for pid, deps in {"a": ("b",), "b": ("c",), "c": ("a",)}.items():
        _write(tmp_path / pid, _ps(pid, *deps))
    with pytest.raises(ConfigError, match=r"depends_on forms a cycle: a -> b -> c -> a"):
        load_catalogue(tmp_path)


def test_unknown_dependency(tmp_path: Path) -> None:
    _write(tmp_path / "a", _ps("a", "ghost"))
    with pytest.raises(ConfigError, match="depends_on: unknown patch-set 'ghost'"):
        load_catalogue(tmp_path)
    assert dependency_order([]) == []


def test_cli_reports_malformed_patchset_as_usage_error(builder, tmp_path: Path, capsys) -> None:
    builder.commit({"setup.py": ""}, "base")
    profile = tmp_path / "profile"
    _write(profile / "patches" / "a", {"id": "a", "title": "A", "kind": "fixup", "owners": "x"})
    code = main(["patches", "check", "--repo", str(builder.path), "--profile", str(profile)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "owners: unknown key" in err
