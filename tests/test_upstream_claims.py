"""What a run says it merged: a SHA is called "upstream main" only when git finds it on upstream's main.

Asked by SHA, a run names the configured upstream branch when the commit is on it (the remote-tracking
branch, or the local branch where there is no upstream remote), and otherwise names the commit by its SHA
and says why. Real git in tmp_path repositories; nothing is mocked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli_json import data as cli_data
from tests.scenarios import BRANCH, lines, make_pair
from tests.test_merge_trust import git, run_cli


def pair_with_a_side_branch(tmp_path: Path, *, remote: bool) -> tuple[Path, str, str, Path]:
    """A fork and its upstream, where upstream also has a branch ``side`` whose tip is not on main.
    Returns (fork checkout, upstream main's tip, side's tip, config file)."""
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    main_tip = pair.upstream.head()
    pair.upstream.branch("side")
    side_tip = pair.upstream.commit({"c.py": lines("side")}, "a commit only on side")
    pair.upstream.checkout("main")
    git(pair.repo, "fetch", "-q", "upstream")
    if not remote:  # upstream's branches as local ones, and no upstream remote (a mirror clone)
        git(pair.repo, "checkout", "-q", "--detach")
        git(pair.repo, "branch", "-f", "main", main_tip)
        git(pair.repo, "branch", "side", side_tip)
        git(pair.repo, "remote", "remove", "upstream")
    profile = tmp_path / "profile"
    (profile / "patches").mkdir(parents=True)
    config = tmp_path / "ds4sync.yaml"
    config.write_text(yaml.safe_dump({"fork": {"branch": BRANCH}, "profile": str(profile)}))
    return pair.repo, main_tip, side_tip, config


@pytest.mark.parametrize("remote", [True, False], ids=["upstream-remote", "no-remote"])
def test_a_sha_on_upstream_main_is_named_main_and_one_off_it_by_its_sha(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], remote: bool
) -> None:
    repo, main_tip, side_tip, config = pair_with_a_side_branch(tmp_path, remote=remote)
    args = ("--repo", str(repo), "--config", str(config))
    code, out, err = run_cli(capsys, "merge", side_tip, *args)
    assert code == 0, err
    tip_ref = "refs/remotes/upstream/main" if remote else "refs/heads/main"
    assert f"note: {side_tip[:12]} is not on {tip_ref}" in err
    [path] = (repo / ".git" / "ds4sync" / "runs").glob("*/record.json")
    record = json.loads(path.read_text())
    assert record["upstream"]["branch"] is None and record["upstream"]["sha"] == side_tip
    code, report, _ = run_cli(capsys, "report", *args)
    assert code == 0
    title = report.splitlines()[0]
    assert side_tip in title and " main" not in title, title
    assert "upstream:main" not in report and ":main at" not in report
    assert run_cli(capsys, "abort", *args, "--yes")[0] == 0

    code, out, err = run_cli(capsys, "merge", main_tip, *args, "--json")
    assert code == 0, err
    data = cli_data(out)
    assert json.loads(Path(data["record"]).read_text())["upstream"]["branch"] == "main"
    assert run_cli(capsys, "report", *args)[1].splitlines()[0].endswith(" main")


def test_plan_counts_paths_and_says_a_rename_is_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = make_pair(
        tmp_path,
        {"a.py": lines("a"), "b.py": lines("b")},
        [],
        [{"c.py": lines("c")}],
        upstream_renames=(("b.py", "d.py"),),
    )
    code, out, err = run_cli(capsys, "plan", "upstream/main", "--repo", str(pair.repo), "--branch", BRANCH)
    assert code == 0, err
    assert "upstream 2, fork 1 (a rename counts two)" in " ".join(out.split())
    assert git(pair.repo, "diff", "--name-only", "--no-renames", pair.base, "upstream/main").split() == ["b.py", "d.py"]


def test_status_names_the_run_started_last_whatever_its_sha(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two real runs, the later one with the smaller SHA: status names the later. Whether the two fall in
    one second is up to the clock here; the next test plants that case."""
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "1")}, {"a.py": lines("a", "1", "2")}], [])
    first, second = git(pair.repo, "rev-parse", "upstream/main~1"), git(pair.repo, "rev-parse", "upstream/main")
    if first[:10] < second[:10]:  # the later run gets the smaller SHA, so that SHA order would pick the wrong one
        first, second = second, first
    args = ("--repo", str(pair.repo), "--branch", BRANCH)
    for sha in (first, second):
        code, out, err = run_cli(capsys, "merge", sha, *args, "--json")
        assert code == 0, err
        last = cli_data(out)["run_id"]
        if sha == first:
            assert run_cli(capsys, "abort", "--repo", str(pair.repo), "--yes")[0] == 0
    ids = sorted(p.name for p in (pair.repo / ".git" / "ds4sync" / "runs").iterdir())
    assert ids[-1] == last and last.endswith(second[:10])
    code, out, _ = run_cli(capsys, "status", "--repo", str(pair.repo), "--json")
    assert cli_data(out)["run_id"] == last


def test_a_new_run_id_sorts_after_a_run_started_in_the_same_second(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from ds4sync.loop import sync
    from ds4sync.runner import open_workspace

    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "1")}], [])
    ws = open_workspace(pair.repo, branch=BRANCH)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    newest = ws.store.root / "runs" / f"{stamp}-ffffffffff"  # this second, and a SHA that sorts last
    newest.mkdir(parents=True)
    (newest / "record.json").write_text("{}")
    made = sync._new_run_id(ws, "0" * 40)
    assert made[:15] > stamp and sorted([newest.name, made])[-1] == made


@pytest.mark.parametrize(
    ("ref", "extra", "read_from"),
    [
        ("main", (), "refs/remotes/upstream/main"),  # not the checkout's own, stale, local main
        ("upstream/main", (), "refs/remotes/upstream/main"),
        ("v1", (), "refs/tags/v1"),
        ("main", ("--fetch",), "main fetched from upstream"),
        ("SHA", (), "commit SHA"),
        ("refs/heads/main", (), "refs/heads/main"),
    ],
)
def test_plan_says_which_ref_it_read_upstream_from_and_which_branch_is_the_fork(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ref: str, extra: tuple[str, ...], read_from: str
) -> None:
    pair = make_pair(tmp_path, {"a.py": lines("a")}, [{"a.py": lines("a", "up")}], [{"b.py": lines("b")}])
    tip = pair.upstream.head()
    git(pair.upstream.path, "tag", "v1")
    git(pair.repo, "fetch", "-q", "--tags", "upstream")
    ref, read_from = ref.replace("SHA", tip), read_from.replace("SHA", tip)
    want = pair.base if ref == "refs/heads/main" else tip  # the local branch, taken as written
    args = (ref, "--repo", str(pair.repo), "--branch", BRANCH, *extra)
    code, out, err = run_cli(capsys, "plan", *args, "--json")
    assert code == 0, err
    data = cli_data(out)
    assert data["upstream_sha"] == want and data["upstream_resolved_from"] == read_from
    assert data["fork_branch"] == BRANCH and data["fork_sha"] == git(pair.repo, "rev-parse", BRANCH)
    code, out, err = run_cli(capsys, "plan", *args)
    assert code == 0, err
    text = " ".join(out.split())
    assert f"{want} (read from {read_from})" in text and f"(head of {BRANCH})" in text
