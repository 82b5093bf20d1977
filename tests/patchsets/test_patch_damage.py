"""A patch-set never loses a file silently: damaged patches are refused at load, a failed apply names every
file it left out with git's own reason, resume does not call such a patch-set adapted, and refresh does not
shrink a patch-set without saying so.

Patches are made by real git (format-patch with and without --binary/--full-index), applied by real git.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.core.errors import ConfigError
from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.patchsets.model import load_patchset
from ds4sync.patchsets.replay import _apply, accept_adaptation
from tests.cli_json import data as cli_data

from .scenario import SOFTCAP_V2, SPARSE, Scenario, add_patchsets, attention, build_repos

BLOB = bytes(range(256)) * 4


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> RepoBuilder:
    """A text file and a binary; one commit edits the text, adds a binary and changes the other."""
    builder = RepoBuilder(tmp_path / "repo")
    builder.commit({"a.py": "x = 1\n", "old.bin": BLOB}, "base")
    builder.commit({"a.py": "x = 2\n", "new.bin": BLOB[::-1], "old.bin": BLOB[:300]}, "carry: text and binaries")
    return builder


def patchset(folder: Path, patch: bytes, name: str = "0001-carry.patch") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(patch)
    (folder / "patchset.yaml").write_text(
        yaml.safe_dump({"id": folder.name, "title": "carry", "kind": "fork-feature", "patches": [name]})
    )
    return folder


def format_patch(repo: RepoBuilder, *flags: str) -> bytes:
    return subprocess.run(
        ["git", "format-patch", "--stdout", *flags, "HEAD^..HEAD"], cwd=repo.path, check=True, capture_output=True
    ).stdout


@pytest.mark.parametrize(
    ("flags", "damage", "expected"),
    [
        (("--no-binary",), None, "new.bin: a binary change without its data"),
        (("--no-binary",), None, "old.bin: a binary change without its data"),
        (("--binary",), "abbrev", "old.bin: a binary patch without full object names on its index line"),
        (("--binary", "--full-index"), "crlf", "CRLF line endings in its diff headers"),
    ],
)
def test_damaged_patches_are_refused_at_load_in_one_line(
    repo: RepoBuilder, tmp_path: Path, flags: tuple[str, ...], damage: str | None, expected: str
) -> None:
    patch = format_patch(repo, *flags)
    if damage == "crlf":
        patch = patch.replace(b"\n", b"\r\n")
    if damage == "abbrev":  # what a tool that shortens object names (or a hand edit) leaves
        patch = re.sub(rb"(?m)^index ([0-9a-f]{7})[0-9a-f]+\.\.([0-9a-f]{7})[0-9a-f]+", rb"index \1..\2", patch)
    folder = patchset(tmp_path / "patches" / "carry", patch)
    with pytest.raises(ConfigError) as caught:
        load_patchset(folder)
    line = caught.value.one_line()
    assert expected in line and "\n" not in line and str(folder / "0001-carry.patch") in line


def test_a_crlf_damaged_patch_that_only_adds_a_file_is_refused(tmp_path: Path) -> None:
    builder = RepoBuilder(tmp_path / "repo")
    builder.commit({"a.py": "x = 1\n"}, "base")
    builder.commit({"added.py": "def f():\n    return 1\n"}, "carry: a new file")
    patch = format_patch(builder, "--full-index").replace(b"\n", b"\r\n")
    folder = patchset(tmp_path / "patches" / "carry", patch)
    with pytest.raises(ConfigError, match="CRLF"):
        load_patchset(folder)


@pytest.mark.parametrize("content", [b"one\r\ntwo\r\n", b"plain\n"])
def test_whole_patches_load_including_crlf_file_content(tmp_path: Path, repo: RepoBuilder, content: bytes) -> None:
    """Only damage is refused: a full binary patch, and a text file whose own lines end in CRLF."""
    assert load_patchset(patchset(tmp_path / "patches" / "bin", format_patch(repo, "--binary", "--full-index")))
    builder = RepoBuilder(tmp_path / "crlf")
    builder.commit({"a.txt": b"base\r\n"}, "base")
    builder.commit({"a.txt": content}, "carry")
    assert load_patchset(patchset(tmp_path / "patches" / "crlf", format_patch(builder, "--full-index")))


def test_a_failed_apply_names_every_file_left_out_with_gits_reason_and_resume_refuses(
    repo: RepoBuilder, tmp_path: Path
) -> None:
    patch = format_patch(repo, "--binary", "--full-index")
    ps = load_patchset(patchset(tmp_path / "patches" / "carry", patch))
    # the tree to replay onto: the base, where someone else changed old.bin (its preimage is gone)
    git(repo.path, "reset", "-q", "--hard", "HEAD^")
    repo.commit({"old.bin": BLOB[::2]}, "someone else's binary")
    wt = GitRepo(repo.path)
    entry = _apply(wt, ps, {"id": ps.id, "title": ps.title, "invariants": ()})
    assert entry.status == "needs-adaptation"
    assert "old.bin" in entry.not_applied and "old.bin" in entry.detail
    assert entry.git_said and any("old.bin" in line for line in entry.git_said)
    assert "git said:" in entry.detail
    ctx = SimpleNamespace(record=SimpleNamespace(run_id="r1"))  # the run context's only use: the commit message
    refused = accept_adaptation(ctx, wt, ps, entry)  # type: ignore[arg-type]
    assert refused.status == "needs-adaptation" and "still not applied" in refused.detail
    assert "old.bin" in refused.detail and "Cannot merge binary files: old.bin" in refused.detail
    for path in entry.not_applied:  # the person brings each file in
        (repo.path / path).write_bytes(b"brought in by hand\x00" + path.encode())
    accepted = accept_adaptation(ctx, wt, ps, entry)  # type: ignore[arg-type]
    assert accepted.status == "adapted"


@pytest.fixture
def sc(tmp_path: Path) -> Scenario:
    scenario = build_repos(tmp_path)
    add_patchsets(scenario)
    return scenario


EXTRA = (
    "diff --git a/vllm/extra.py b/vllm/extra.py\nnew file mode 100644\n"
    "index 0000000000000000000000000000000000000000..ea5e0e4a9b4a2a1a5d8f1b0a9c5e7e2d0f3b6a11\n"
    "--- /dev/null\n+++ b/vllm/extra.py\n@@ -0,0 +1 @@\n+EXTRA = 1\n"
)


def test_refresh_never_shrinks_a_patch_set_without_saying_what_it_drops(sc: Scenario, capsys) -> None:
    code = main(["merge", sc.shas["upstream"], "--repo", str(sc.fork.path), "--json"])
    worktree = Path(cli_data(capsys.readouterr().out)["worktree"])
    assert code == 4
    (worktree / "vllm/attention.py").write_text(attention(SOFTCAP_V2, extra=SPARSE))
    assert main(["resume", "--repo", str(sc.fork.path)]) == 0
    folder = sc.patches / "softcap"
    (folder / "0002-extra.patch").write_text(EXTRA)  # the catalogue's patch-set also carries vllm/extra.py
    data = yaml.safe_load((folder / "patchset.yaml").read_text())
    data["patches"].append("0002-extra.patch")
    (folder / "patchset.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    before = sorted(p.name for p in folder.iterdir())
    capsys.readouterr()
    code = main(["patches", "refresh", "softcap", "--repo", str(sc.fork.path)])
    err = capsys.readouterr().err
    assert code == 4 and "would drop 1 file(s)" in err and "vllm/extra.py" in err
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written
    code = main(["patches", "refresh", "softcap", "--repo", str(sc.fork.path), "--allow-drop", "--json"])
    assert code == 0
    assert "dropped on purpose: vllm/extra.py" in cli_data(capsys.readouterr().out)["note"]
