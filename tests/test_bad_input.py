"""Bad input: one clear line on stderr, the right exit code, nothing changed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import git
import pytest

from ds4sync.cli import main
from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair


@pytest.fixture
def pair(tmp_path: Path):
    return make_pair(tmp_path, {"f.py": lines("a")}, [{"f.py": lines("up")}], [{"g.py": lines("fork")}])


def one_error_line(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("ds4sync: error: ")
    return code, err


def refs_and_worktrees(repo: Path) -> tuple[str, str]:
    run = lambda *a: subprocess.run(["git", "-C", str(repo), *a], capture_output=True, text=True).stdout  # noqa: E731
    return run("for-each-ref"), run("worktree", "list")


def test_unknown_sha(pair, capsys: pytest.CaptureFixture[str]) -> None:
    before = refs_and_worktrees(pair.repo)
    code, err = one_error_line(capsys, "merge", "deadbeefdeadbeef", "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 2 and "deadbeefdeadbeef" in err
    assert refs_and_worktrees(pair.repo) == before


def test_unknown_sha_without_remote(pair, capsys: pytest.CaptureFixture[str]) -> None:
    git.Repo(pair.fork.path).git.remote("remove", "upstream")
    code, err = one_error_line(capsys, "plan", "0123456789abcdef", "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 2 and "no remote 'upstream'" in err and "git remote add" in err


def test_missing_branch(pair, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = one_error_line(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", "nope")
    assert code == 2 and "no local branch named 'nope'" in err


def test_no_branch_given_on_a_detached_head(pair, capsys: pytest.CaptureFixture[str]) -> None:
    git.Repo(pair.fork.path).git.checkout("--detach")
    code, err = one_error_line(capsys, "merge", "upstream/main", "--repo", str(pair.repo))
    assert code == 2 and "--branch" in err and "detached" in err


def test_not_a_repo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = one_error_line(capsys, "plan", "main", "--repo", str(tmp_path))
    assert code == 2 and "not a git repository" in err


def test_unrelated_remote_url_fetch_fails(pair, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    git.Repo(pair.fork.path).git.remote("set-url", "upstream", str(tmp_path / "missing"))
    code, err = one_error_line(capsys, "plan", "0123456789abcdef", "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 2 and "cannot fetch" in err


def test_upstream_sha_fetched_when_absent(pair, capsys: pytest.CaptureFixture[str]) -> None:
    newer = pair.upstream.commit({"h.py": lines("new")}, "upstream moves on")
    code = main(["plan", newer, "--repo", str(pair.repo), "--branch", BRANCH, "--json"])
    assert code == 0
    assert cli_data(capsys.readouterr().out)["upstream_sha"] == newer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("upstream: [unclosed\n", "malformed YAML"),
        ("upstream:\n  remote: up\n  colour: blue\n", "upstream.colour: unknown key"),
        ("merge:\n  rules:\n    - glob: 'docs/*'\n      strategy: mine\n", "merge.rules.0.strategy"),
        ("merge:\n  sync_branch: main\n", "merge.sync_branch"),
        ("- a\n- b\n", "expected a mapping"),
    ],
)
def test_bad_config(pair, capsys: pytest.CaptureFixture[str], text: str, expected: str) -> None:
    (pair.repo / "ds4sync.yaml").write_text(text)
    code, err = one_error_line(capsys, "config", "check", "--repo", str(pair.repo))
    assert code == 2 and expected in err and "ds4sync.yaml" in err


def test_config_check_ok(pair, capsys: pytest.CaptureFixture[str]) -> None:
    (pair.repo / "ds4sync.yaml").write_text(
        textwrap.dedent("""\
        upstream: {remote: upstream, url: https://example.invalid/up.git, ref: main}
        fork: {branch: fork}
        merge:
          rules: [{glob: "docs/*", strategy: theirs}]
        """)
    )
    assert main(["config", "check", "--repo", str(pair.repo)]) == 0
    out = capsys.readouterr().out
    assert "ok" in out and "fork branch: fork" in out and "resolution rules: 1" in out


def test_second_concurrent_run_is_refused(pair, capsys: pytest.CaptureFixture[str]) -> None:
    state = pair.repo / ".git" / "ds4sync"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from ds4sync.models.record import RecordStore
            with RecordStore(Path({str(state)!r})).lock("merge elsewhere"):
                print("held", flush=True)
                time.sleep(60)
            """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        code, err = one_error_line(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH)
        assert code == 2 and "another ds4sync command holds" in err and str(holder.pid) in err
    finally:
        holder.kill()
        holder.wait()
    # The lock dies with its holder: the repository is usable again.
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) == 0


def test_internal_error_saves_traceback(
    pair, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ds4sync.loop import sync

    def broken(*_a, **_k):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(sync, "plan", broken)
    code = main(["plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH])
    err = capsys.readouterr().err
    assert code == 3 and "internal error" in err and len(err.strip().splitlines()) == 1
    saved = list((tmp_path / "crashes" / "ds4sync-crashes").iterdir())
    text = saved[0].read_text()
    assert len(saved) == 1 and "ZeroDivisionError" in text
    for line in ("argv: ", "python: 3.", "platform: ", "git: 2.", "ds4sync: ", "pydantic: 2."):  # enough to reproduce
        assert f"\n{line}" in f"\n{text}", text[:600]


def test_fetch_takes_the_remote_ref_over_a_stale_local_one(pair, capsys: pytest.CaptureFixture[str]) -> None:
    newer = pair.upstream.commit({"h.py": lines("new")}, "upstream moves on")
    assert main(["plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--json"]) == 0
    assert cli_data(capsys.readouterr().out)["upstream_sha"] != newer  # the local tracking ref is stale
    assert main(["plan", "main", "--fetch", "--repo", str(pair.repo), "--branch", BRANCH, "--json"]) == 0
    assert cli_data(capsys.readouterr().out)["upstream_sha"] == newer


# -- input that used to end in an internal error or a silent default: one line, exit 2 ---------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("merge:\n  sync_branch: 'sync/{branch}-{sha}'\n", "unknown placeholder {sha}"),
        ("merge:\n  sync_branch: 'sync/{branch'\n", "merge.sync_branch"),
        ("merge:\n  backup_branch: 'backup/{when}'\n", "unknown placeholder {when}"),
        ("gates:\n  tiers: [unit]\nprofile: no-such-profile\n", "profile folder does not exist"),
        # a tier name that is none, in either list: at load, not after the merge when the gate phase reads it
        ("gates:\n  tiers: [static, unti]\n", "gates.tiers.1: Input should be 'static'"),
        ("gates:\n  tiers: [unit]\n  promote_tiers: [Unit]\n", "gates.promote_tiers.0: Input should be"),
        # a key given twice, at the top and deeper: PyYAML would let the last one win, silently
        (
            "upstream:\n  remote: a\nupstream:\n  remote: b\n",
            "ds4sync.yaml:3:1: malformed YAML (key 'upstream' given twice (first on line 1))",
        ),
        (
            "fork:\n  branch: x\n  branch: y\n",
            "ds4sync.yaml:3:3: malformed YAML (key 'branch' given twice (first on line 2))",
        ),
        (  # both on one line, in a flow mapping
            "fork: {branch: x, branch: y}\n",
            "ds4sync.yaml:1:19: malformed YAML (key 'branch' given twice (first on line 1))",
        ),
    ],
)
def test_bad_config_values(pair, capsys: pytest.CaptureFixture[str], text: str, expected: str) -> None:
    (pair.repo / "ds4sync.yaml").write_text(text)
    before = refs_and_worktrees(pair.repo)
    code, err = one_error_line(capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 2 and expected in err
    assert refs_and_worktrees(pair.repo) == before


def test_non_utf8_config(pair, capsys: pytest.CaptureFixture[str]) -> None:
    (pair.repo / "ds4sync.yaml").write_bytes(b"fork:\n  branch: caf\xe9\n")
    code, err = one_error_line(capsys, "config", "check", "--repo", str(pair.repo))
    assert code == 2 and "not UTF-8" in err and "0xe9" in err and "ds4sync.yaml" in err


def test_state_dir_that_is_a_file(pair, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    state = tmp_path / "state-file"
    state.write_text("not a folder\n")
    code, err = one_error_line(capsys, "status", "--repo", str(pair.repo), "--state-dir", str(state))
    assert code == 2 and "state dir is not a folder" in err and state.read_text() == "not a folder\n"


def test_missing_profile_option(pair, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    code, err = one_error_line(
        capsys, "merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH, "--profile", str(missing)
    )
    assert code == 2 and "profile folder does not exist" in err and str(missing) in err


@pytest.mark.parametrize("ref", [""])
def test_empty_ref(pair, capsys: pytest.CaptureFixture[str], ref: str) -> None:
    code, err = one_error_line(capsys, "merge", ref, "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 2 and "empty upstream ref" in err


def test_ambiguous_short_sha_names_the_candidates(pair, capsys: pytest.CaptureFixture[str]) -> None:
    repo = pair.repo
    git = lambda *a: subprocess.run(  # noqa: E731
        ["git", "-C", str(repo), *a],
        capture_output=True,
        text=True,
        check=True,
        env={
            **__import__("os").environ,
            "GIT_AUTHOR_DATE": "2026-01-01T00:00:00",
            "GIT_COMMITTER_DATE": "2026-01-01T00:00:00",
        },
    ).stdout.strip()
    tree = git("rev-parse", "upstream/main^{tree}")
    parent = git("rev-parse", "upstream/main")
    seen: dict[str, str] = {}
    for i in range(5000):  # deterministic (fixed dates and messages): two commits share 4 hex digits
        sha = git("commit-tree", tree, "-p", parent, "-m", f"candidate {i}")
        if sha[:4] in seen:
            prefix, first = sha[:4], seen[sha[:4]]
            break
        seen[sha[:4]] = sha
    else:
        pytest.fail("no shared prefix")
    code, err = one_error_line(capsys, "merge", prefix, "--repo", str(repo), "--branch", BRANCH)
    assert code == 2 and "ambiguous" in err and first[:12] in err and sha[:12] in err


def test_record_that_is_not_utf8_or_a_folder(pair, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) in (0, 4)
    capsys.readouterr()
    (record,) = (pair.repo / ".git" / "ds4sync" / "runs").glob("*/record.json")
    record.with_name("record.prev.json").unlink()  # no copy to fall back on (see test_messages_lead_the_right_way)
    record.write_bytes(b'{"run_id": "\xff\xfe"}')
    code, err = one_error_line(capsys, "status", "--repo", str(pair.repo))
    assert code == 2 and "not UTF-8" in err and "record.json" in err
    record.unlink()
    record.mkdir()
    for command in (["status"], ["resume"], ["promote"]):
        code, err = one_error_line(capsys, *command, "--repo", str(pair.repo))
        assert code == 2 and "record is not a file" in err, command


@pytest.mark.parametrize("text", ["{not json", '{"pid": "abc"}', "[1, 2]", '{"pid": null}'])
def test_malformed_lock_json_is_a_stale_lock_not_a_crash(pair, capsys: pytest.CaptureFixture[str], text: str) -> None:
    state = pair.repo / ".git" / "ds4sync"
    state.mkdir(parents=True, exist_ok=True)
    (state / "lock.json").write_text(text)
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) in (0, 4)
    assert "internal error" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("folder", "name", "text"),
    [
        ("gates", "unit.yaml", "tier: unit\ngates:\n  - {name: a, kind: command, run: {argv: ['true']}}\ntier: unit\n"),
        ("patches/p", "patchset.yaml", "id: p\nkind: fork-feature\nid: q\n"),
    ],
    ids=["gate-file", "patch-set-file"],
)
def test_a_key_given_twice_in_a_profile_file(
    pair, capsys: pytest.CaptureFixture[str], tmp_path: Path, folder: str, name: str, text: str
) -> None:
    profile = tmp_path / "profile"
    for sub in ("gates", "patches", folder):
        (profile / sub).mkdir(parents=True, exist_ok=True)
    (profile / folder / name).write_text(text)
    command = ("gate", "--tier", "unit") if folder == "gates" else ("patches", "list")
    code, err = one_error_line(capsys, *command, "--repo", str(pair.repo), "--profile", str(profile))
    assert code == 2 and f"{name}:" in err and "given twice (first on line 1)" in err, err


def test_bad_regex_in_a_gate(pair, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    (profile / "gates" / "unit.yaml").write_text(
        "tier: unit\ngates:\n  - {name: a, kind: command, run: {argv: ['true'], must_match: ['(unclosed']}}\n"
    )
    code, err = one_error_line(capsys, "gate", "--tier", "unit", "--repo", str(pair.repo), "--profile", str(profile))
    assert code == 2 and "unit.yaml" in err and "(unclosed" in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("frok:\n  branch: x\n", "ds4sync.yaml:1: frok: unknown key (did you mean 'fork'?)"),
        ("fork:\n  brnach: x\n", "ds4sync.yaml:2: fork.brnach: unknown key (did you mean 'branch'?)"),
        ("gates:\n  tires: [unit]\n", "ds4sync.yaml:2: gates.tires: unknown key (did you mean 'tiers'?)"),
        (
            "merge:\n  rules:\n    - {glob: a, strategy: ours, reasn: y}\n",
            "ds4sync.yaml:3: merge.rules.0.reasn: unknown key (did you mean 'reason'?)",
        ),
        ("zzzz: 1\n", "ds4sync.yaml:1: zzzz: unknown key; fix that key in ds4sync.yaml"),  # nothing near: no guess
    ],
)
def test_an_unknown_key_names_the_nearest_known_one(
    pair, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    (pair.repo / "ds4sync.yaml").write_text(text)
    code, err = one_error_line(capsys, "config", "check", "--repo", str(pair.repo))
    assert code == 2 and expected in err, err
    assert "see `ds4sync config check`" not in err  # the fix does not point back at the command that printed it


@pytest.mark.parametrize("how", ["tree-sha", "peeled-tree", "blob-sha"])
@pytest.mark.parametrize("command", ["plan", "merge"])
def test_an_object_that_is_no_commit_is_named_for_what_it_is(
    pair, capsys: pytest.CaptureFixture[str], how: str, command: str
) -> None:
    git = lambda *a: subprocess.run(["git", "-C", str(pair.repo), *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    head = git("rev-parse", "upstream/main")
    ref = {"tree-sha": git("rev-parse", f"{head}^{{tree}}"), "peeled-tree": f"{head}^{{tree}}",
           "blob-sha": git("rev-parse", f"{head}:f.py")}[how]  # fmt: skip
    kind = "blob" if how == "blob-sha" else "tree"
    before = refs_and_worktrees(pair.repo)
    code, err = one_error_line(capsys, command, ref, "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 2 and f"'{ref}' is a {kind}, not a commit" in err, err
    assert refs_and_worktrees(pair.repo) == before


def test_a_fork_branch_only_on_a_remote_gets_the_command_that_makes_it(
    pair, capsys: pytest.CaptureFixture[str]
) -> None:
    subprocess.run(
        ["git", "-C", str(pair.repo), "update-ref", "refs/remotes/origin/topic", "upstream/main"], check=True
    )
    code, err = one_error_line(capsys, "plan", "upstream/main", "--repo", str(pair.repo), "--branch", "topic")
    assert code == 2 and "no local branch named 'topic'" in err
    assert "`git branch topic origin/topic`" in err


def test_status_all_shows_whole_run_ids_in_a_narrow_table(pair, capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(2):
        assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) == 0
        assert main(["abort", "--repo", str(pair.repo), "--yes"]) == 0
    capsys.readouterr()
    assert main(["status", "--all", "--repo", str(pair.repo), "--json"]) == 0
    ids = [row["run_id"] for row in cli_data(capsys.readouterr().out)["runs"]]
    assert len(ids) == 2
    assert main(["status", "--all", "--repo", str(pair.repo)]) == 0  # not a terminal: rich's 80 columns
    out = capsys.readouterr().out
    assert all(run_id in out for run_id in ids), out


# The line of the offending key or value, for every file ds4sync validates and at every depth: a top-level
# key, a nested one, an item of a list (block and flow style), a wrong value (the value's line, not its key's),
# a section under `serving:` and the same section as a whole file, and one gate's kind-specific `run:` mapping.
CONFIG_LINES = {
    "ds4sync.yaml": [
        ("# comment\n\nfork:\n  branch: x\n  brnach: y\n", ":5: fork.brnach: unknown key"),
        (
            "merge:\n  rules:\n    - glob: a\n      strategy: ours\n    - glob: b\n      strategy: mine\n",
            ":6: merge.rules.1.strategy",
        ),
        (
            "merge:\n  rules: [{glob: a, strategy: ours},\n    {glob: b, strategy: mine}]\n",
            ":3: merge.rules.1.strategy",
        ),
        ("fork:\n  branch:\n    - not\n    - a string\n", ":3: fork.branch"),
    ],
    "serving-section": [
        (
            "x: 1\nserving:\n  server:\n    model: m\n    base_url: http://h:1\n  probs: [health]\n",
            ":6: serving.probs: unknown key (did you mean 'probes'?)",
        ),
        (
            "serving:\n  server:\n    model: m\n    base_url: http://h:1\n    attach_timeout_s: soon\n",
            ":5: serving.server.attach_timeout_s",
        ),
    ],
    "serving-whole-file": [
        (
            "server:\n  model: m\n  base_url: http://h:1\nprobs: [health]\n",
            ":4: probs: unknown key (did you mean 'probes'?)",
        ),
        ("- server\n", "expected a mapping at the top level, got list"),
        ("serving: [a, b]\n", ":1: expected a mapping at serving, got list"),
    ],
    "gate-file": [
        (
            "tier: unit\ngates:\n  - name: a\n    kind: command\n    run:\n      argv: ['true']\n      agrv: x\n",
            ":7: gates.0.run.agrv: unknown key (did you mean 'argv'?)",
        ),
        (
            "tier: unit\ngates:\n  - name: a\n    kind: command\n    run: [x]\n",
            ":5: gates.0.run: Input should be a valid dictionary",
        ),
        (
            "tier: unit\ngates:\n  - {name: a, kind: command, run: {argv: ['true']}, timout_s: 3}\n",
            ":3: gates.0.timout_s: unknown key",
        ),
    ],
    "patch-set-file": [  # an item of a tagged union: the line of the item whose kind rejects the key
        (
            "id: p\ntitle: t\nkind: fork-feature\npatches: []\ninvariants:\n  - {kind: file_exists, path: a, pth: z}\n",
            ":6: invariants.0.",
        ),
    ],
}


@pytest.mark.parametrize(
    ("where", "text", "expected"), [(where, text, exp) for where, cases in CONFIG_LINES.items() for text, exp in cases]
)
def test_a_config_error_names_the_line_of_the_key_or_value(
    pair, capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str, text: str, expected: str
) -> None:
    repo = str(pair.repo)
    if where == "ds4sync.yaml":
        file = pair.repo / "ds4sync.yaml"
        command: tuple[str, ...] = ("config", "check", "--repo", repo)
    elif where.startswith("serving"):
        file = tmp_path / "serving.yaml"
        command = ("serving", "gate", "--repo", repo, "--serving-config", str(file))
    else:
        folder = "gates" if where == "gate-file" else "patches/p"
        for sub in ("gates", "patches", folder):
            (tmp_path / "profile" / sub).mkdir(parents=True, exist_ok=True)
        file = tmp_path / "profile" / folder / ("unit.yaml" if where == "gate-file" else "patchset.yaml")
        verb = ("gate", "--tier", "unit") if where == "gate-file" else ("patches", "list")
        command = (*verb, "--repo", repo, "--profile", str(tmp_path / "profile"))
    file.write_text(text)
    before = refs_and_worktrees(pair.repo)
    code, err = one_error_line(capsys, *command)
    assert code == 2 and f"{file.name}{expected}" in err if expected.startswith(":") else expected in err, err
    assert refs_and_worktrees(pair.repo) == before


@pytest.mark.parametrize(
    "command",
    [
        ("report", "--out", "{bad}/pr.md"),
        ("report", "--trend", "--out", "{bad}/trend.html"),
        ("ci", "export", "--github-actions", "--tier", "unit", "--install", "ds4sync", "--out", "{bad}/ci.yml"),
        ("nightly", "install", "--systemd", "--write", "{bad}"),
    ],
    ids=["report", "trend", "ci-export", "nightly-install"],
)
def test_an_output_path_that_cannot_be_written_is_one_line(
    pair, capsys: pytest.CaptureFixture[str], tmp_path: Path, command: tuple[str, ...]
) -> None:
    """Every option that names a file ds4sync writes: a path under a regular file (no folder can be made there,
    whoever runs it) is one error line naming the path and the option, exit 2, and nothing is left behind."""
    if command[0] == "report":
        assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) in (0, 4)
        capsys.readouterr()
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    (profile / "gates" / "unit.yaml").write_text("tier: unit\ngates:\n  - {name: a, kind: command, run: {argv: [x]}}\n")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    args = [part.replace("{bad}", str(blocker / "sub")) for part in command]
    extra = ["--profile", str(profile)] if command[0] == "ci" else []
    code, err = one_error_line(capsys, *args, *extra, "--repo", str(pair.repo))
    option = "--write" if "--write" in command else "--out"
    assert code == 2 and str(blocker / "sub") in err and "cannot write" in err and f"pass {option}" in err, err
    assert "internal error" not in err and blocker.read_text() == "not a folder\n"


@pytest.mark.parametrize("gpus", ["abc", "0,x1", "0,,gpu-1"])
def test_gpu_ids_that_cuda_would_not_take_are_one_line(
    pair, capsys: pytest.CaptureFixture[str], tmp_path: Path, gpus: str
) -> None:
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    (profile / "gates" / "unit.yaml").write_text(
        "tier: unit\ngates:\n  - {name: a, kind: command, run: {argv: ['true']}}\n"
    )
    args = ("gate", "--tier", "unit", "--gpus", gpus, "--repo", str(pair.repo), "--profile", str(profile))
    code, err = one_error_line(capsys, *args)
    assert code == 2 and "--gpus: not a GPU id" in err and "nvidia-smi -L" in err, err


def test_gpu_ids_as_indices_and_uuids_are_taken(pair, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    (profile / "gates" / "unit.yaml").write_text(
        "tier: unit\ngates:\n  - {name: a, kind: command, run: {argv: ['true']}}\n"
    )
    args = [
        "gate",
        "--tier",
        "unit",
        "--gpus",
        "0, GPU-8a1b,MIG-3c",
        "--repo",
        str(pair.repo),
        "--profile",
        str(profile),
    ]
    assert main(args) == 0, capsys.readouterr().err


@pytest.mark.parametrize("args", [["-v"], ["kernels"], []])
def test_no_command_is_one_line_that_says_so(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    code = main(args)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "no command given" in err, err


# -- inputs that once cost a traceback, gigabytes, minutes or a silent default: one line, exit 2 -------------------

_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)
_GATE = "tier: unit\ngates:\n  - name: a\n    kind: command\n    run: {argv: ['true']}\n    env:\n"


@pytest.mark.parametrize(
    ("where", "text", "expected"),
    [
        ("ds4sync.yaml", "fork:\n  branch: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested more than 64 deep"),
        ("ds4sync.yaml", "x: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", "nested more than 64 deep"),
        ("ds4sync.yaml", _LAUGHS, "more than 64 aliases"),
        ("ds4sync.yaml", "a: &a [1, 2]\n" + "".join(f"k{i}: *a\n" for i in range(65)), "more than 64 aliases"),
        (
            "ds4sync.yaml",
            "a: &a [" + ", ".join(["1"] * 5000) + "]\nb: [" + ", ".join(["*a"] * 30) + "]\n",
            "more than 100000 values once its aliases are expanded",
        ),
        ("ds4sync.yaml", "a: &a [1, *a]\n", "refers to the collection that contains it"),
        ("ds4sync.yaml", "fork: {branch: x}\n#" + "x" * (1024 * 1024) + "\n", "larger than 1024 KiB"),
        ("gate-file", _GATE + "".join("      " + line + "\n" for line in _LAUGHS.splitlines()), "more than 64 aliases"),
        ("gate-file", _GATE + "      A: " + "[" * 80 + "]" * 80 + "\n", "nested more than 64 deep"),
        (
            "gate-file",
            "tier: unit\ngates:\n  - {name: a, kind: command, run: {argv: ['true']}, env: {A: {b: 1}}}\n",
            "env.A is a mapping",
        ),
        (
            "gate-file",
            "tier: unit\ngates:\n  - {name: a, kind: command, run: {argv: ['true']}, env: {A: [1, 2]}}\n",
            "env.A is a list",
        ),
        (
            "gate-file",
            "tier: unit\ngates:\n  - {name: a, kind: command, run: {argv: ['true']}, env: {A: }}\n",
            "env.A is nothing",
        ),
        ("ds4sync.yaml", "upstream: {remote: -x}\n", "not a git remote name: '-x' starts with '-'"),
        ("ds4sync.yaml", "upstream: {remote: 'a b'}\n", "not a git remote name: 'a b' holds ' '"),
        ("ds4sync.yaml", "upstream: {remote: a..b}\n", "not a git remote name: 'a..b'"),
        ("ds4sync.yaml", "upstream: {remote: ''}\n", "not a git remote name: '' is empty"),
        ("ds4sync.yaml", "publish: {repo: o/n, remote: --force}\n", "not a git remote name: '--force'"),
    ],
    ids=[
        "deep-list",
        "deep-map",
        "laughs",
        "many-aliases",
        "expanded",
        "recursive",
        "16MiB",
        "gate-env-laughs",
        "gate-env-deep",
        "env-mapping",
        "env-list",
        "env-null",
        "remote-dash",
        "remote-space",
        "remote-dots",
        "remote-empty",
        "publish-remote",
    ],
)
def test_a_config_past_a_limit_or_of_a_wrong_shape_is_one_line(
    pair, capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str, text: str, expected: str
) -> None:
    if where == "ds4sync.yaml":
        file = pair.repo / "ds4sync.yaml"
        command: tuple[str, ...] = ("config", "check", "--repo", str(pair.repo))
    else:
        (tmp_path / "profile" / "patches").mkdir(parents=True)
        (tmp_path / "profile" / "gates").mkdir()
        file = tmp_path / "profile" / "gates" / "unit.yaml"
        command = ("gate", "--tier", "unit", "--repo", str(pair.repo), "--profile", str(tmp_path / "profile"))
    file.write_text(text)
    before = refs_and_worktrees(pair.repo)
    code, err = one_error_line(capsys, *command)
    assert code == 2 and expected in err and file.name in err, err
    assert refs_and_worktrees(pair.repo) == before


def test_a_good_remote_name_and_a_few_aliases_still_load(pair, capsys: pytest.CaptureFixture[str]) -> None:
    (pair.repo / "ds4sync.yaml").write_text(
        "upstream: {remote: up-stream.v2, ref: &r main}\nfork: {branch: fork}\nmerge:\n  rules:\n"
        + "".join(f"    - {{glob: 'd{i}/*', strategy: ours, reason: *r}}\n" for i in range(10))
    )
    assert main(["config", "check", "--repo", str(pair.repo)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("shape", ["folder", "symlink-loop", "dangling-symlink"])
@pytest.mark.parametrize("explicit", [False, True], ids=["found", "--config"])
def test_a_config_path_that_is_no_file_is_never_the_defaults(
    pair, capsys: pytest.CaptureFixture[str], shape: str, explicit: bool
) -> None:
    config = pair.repo / "ds4sync.yaml"
    if shape == "folder":
        config.mkdir()
    elif shape == "symlink-loop":
        config.symlink_to(config.name)
    else:
        config.symlink_to("missing.yaml")
    extra = ("--config", str(config)) if explicit else ()
    code, err = one_error_line(capsys, "config", "check", "--repo", str(pair.repo), *extra)
    said = {"folder": "is a folder", "symlink-loop": "is a symlink loop", "dangling-symlink": "symlink to nothing"}
    if explicit and shape == "folder":
        said[shape] = "is a directory"  # the option's own check says so first
    assert code == 2 and said[shape] in err and "ds4sync.yaml" in err, err


@pytest.mark.parametrize("budget", ["-5", "0", "nan", "-inf"])
def test_a_nightly_budget_that_is_no_time_is_one_line(pair, capsys: pytest.CaptureFixture[str], budget: str) -> None:
    before = refs_and_worktrees(pair.repo)
    code, err = one_error_line(capsys, "nightly", "--budget", budget, "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 2 and "--budget must be a number of seconds above 0" in err, err
    assert refs_and_worktrees(pair.repo) == before
    assert not (pair.repo / ".git" / "ds4sync" / "runs").exists()


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not UTF-8 text (byte 0x89 at offset 0)"),
        (b"notes\x00\x01\x02", "NUL byte (offset 5)"),
        (b"caf\xe9\n", "byte 0xe9 at offset 3"),
    ],
    ids=["png", "nul", "latin-1"],
)
def test_report_notes_that_are_no_text_are_one_line(
    pair, capsys: pytest.CaptureFixture[str], tmp_path: Path, shape: bytes, expected: str
) -> None:
    assert main(["merge", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH]) in (0, 4)
    capsys.readouterr()
    notes = tmp_path / "notes.md"
    notes.write_bytes(shape)
    code, err = one_error_line(capsys, "report", "--notes", str(notes), "--repo", str(pair.repo))
    assert code == 2 and expected in err and "notes.md" in err, err


@pytest.mark.parametrize("command", [("status",), ("plan", "upstream/main"), ("merge", "upstream/main")])
def test_a_state_dir_that_cannot_be_created_is_one_line(
    pair, capsys: pytest.CaptureFixture[str], tmp_path: Path, command: tuple[str, ...]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x\n")
    state = blocker / "state"
    before = refs_and_worktrees(pair.repo)
    branch = () if command[0] == "status" else ("--branch", BRANCH)
    code, err = one_error_line(capsys, *command, "--repo", str(pair.repo), *branch, "--state-dir", str(state))
    assert code == 2 and "state dir cannot be created" in err and str(state) in err, err
    assert refs_and_worktrees(pair.repo) == before and blocker.read_text() == "x\n"
