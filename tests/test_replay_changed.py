"""A replayed resolution that a person then changes (or deletes) is the person's: in the record, in the report and
in the shared store, so that the next sync brings back the person's decision, never the one it replaced.

Real git and real rerere in tmp_path repositories; nothing is mocked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli_json import data as cli_data
from tests.scenarios import lines, make_pair
from tests.test_merge_kinds import git, nightly_clone, run_cli, store_config


@pytest.mark.parametrize("change", ["edit", "delete"])
def test_a_replayed_resolution_a_person_changed_is_theirs_in_record_report_and_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str
) -> None:
    pair = make_pair(
        tmp_path,
        {"f.py": lines("f"), "g.py": lines("g"), "h.py": lines("h")},
        [{"f.py": lines("f up"), "g.py": lines("g up"), "h.py": None}],  # h.py: modify/delete, never recordable
        [{"f.py": lines("f fork"), "g.py": lines("g fork"), "h.py": lines("h fork")}],
    )
    config, store = store_config(tmp_path)

    def sync(repo: Path, sha: str, resolve: dict[str, str | None]) -> dict:
        """Merge ``sha``; the person writes (or with None, deletes) each path of ``resolve`` and stages it."""
        args = ("--repo", str(repo), "--config", str(config))
        code, out, err = run_cli(capsys, "merge", sha, *args, "--json")
        assert code == 4, err  # h.py always needs a person
        worktree = Path(cli_data(out)["worktree"])
        for path, text in resolve.items():
            if text is None:
                git(worktree, "rm", "-q", "-f", "--", path)
            else:
                (worktree / path).write_text(text)
                git(worktree, "add", "--", path)
        code, out, err = run_cli(capsys, "resume", *args, "--json")
        assert code == 0, err
        return json.loads(Path(cli_data(out)["record"]).read_text())

    first = sync(pair.repo, "upstream/main", {"f.py": lines("f fork", "f up"), "g.py": lines("g both"), "h.py": None})
    assert {c["path"]: c["resolution"] for c in first["results"]["merge"]["conflicts"]} == {
        "f.py": "person",
        "g.py": "person",
        "h.py": "person",
    }
    entries = sorted(p.name for p in store.iterdir())
    assert len(entries) == 2  # f.py and g.py; a modify/delete is no rerere conflict

    clone, sha = nightly_clone(tmp_path, pair, "second")
    changed = lines("f CHANGED MIND") if change == "edit" else None
    second = sync(clone, sha, {"h.py": None, "f.py": changed})
    conflicts = {c["path"]: c for c in second["results"]["merge"]["conflicts"]}
    assert conflicts["g.py"]["resolution"] == "recorded"  # replayed and left alone
    assert conflicts["f.py"]["resolution"] == "person" and conflicts["f.py"]["replay_changed"]
    merge_commit = second["results"]["merge"]["merge_commit"]
    listing = git(clone, "ls-tree", "--name-only", merge_commit)
    report = (Path(second["results"]["report"]["path"])).read_text()
    replayed_line = next(line for line in report.splitlines() if "recorded resolution" in line.lower())
    assert "`g.py`" in replayed_line and "`f.py`" not in replayed_line, replayed_line
    f_entry = Path(conflicts["f.py"]["store_entry"]).name
    if change == "edit":
        assert git(clone, "show", f"{merge_commit}:f.py") + "\n" == changed
        assert sorted(p.name for p in store.iterdir()) == entries  # replaced in place: no second variant
        assert (store / f_entry / "postimage").read_text() == changed
        assert "`f.py`: the replayed resolution was changed by a person" in report
    else:
        assert "f.py" not in listing.split()
        assert sorted(p.name for p in store.iterdir()) == [e for e in entries if e != f_entry]  # forgotten
        assert "`f.py`: the replayed resolution was deleted by a person" in report

    third_clone, sha = nightly_clone(tmp_path, pair, "third")
    args = ("--repo", str(third_clone), "--config", str(config))
    code, out, _ = run_cli(capsys, "merge", sha, *args, "--json")
    assert code == 4  # h.py again
    third = {c["path"]: c["resolution"] for c in cli_data(out)["conflicts"]}
    worktree = Path(cli_data(out)["worktree"])
    assert third["g.py"] == "recorded"
    if change == "edit":  # the person's latest decision comes back, not the one it replaced
        assert third["f.py"] == "recorded" and (worktree / "f.py").read_text() == changed
    else:  # nothing stale comes back: a person decides f.py again
        assert third["f.py"] == "unresolved" and "<<<<<<<" in (worktree / "f.py").read_text()


def test_a_partial_resolution_names_every_path_still_unmerged_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Conflicts of every kind git has; the person fixes one file with markers and one without, and resumes:
    the one refusal names every path git still lists as unmerged (and the marker files), whatever its kind,
    and status shows that same set, not the count the merge started with."""
    from tests.scenarios import BRANCH
    from tests.test_merge_kinds import every_kind_pair

    pair = every_kind_pair(tmp_path)
    args = ("--repo", str(pair.repo), "--branch", BRANCH)
    code, out, _ = run_cli(capsys, "merge", "upstream/main", *args, "--json")
    assert code == 4
    worktree = Path(cli_data(out)["worktree"])
    (worktree / "content.py").write_text(lines("a", "RESOLVED", "c"))  # no markers left: ds4sync stages it
    git(worktree, "rm", "-q", "--", "modified_in_fork.py")  # a modify/delete, decided and staged
    unmerged = set(git(worktree, "ls-files", "-u", "-z").replace("\0", "\n").split("\n"))
    git_left = {line.split("\t", 1)[1] for line in unmerged if "\t" in line} - {"content.py"}
    assert git_left and "modified_in_fork.py" not in git_left
    code, _, err = run_cli(capsys, "resume", "--repo", str(pair.repo))
    assert code == 4 and len(err.strip().splitlines()) == 1, err
    assert all(path in err for path in git_left), sorted(p for p in git_left if p not in err)
    assert not re.search(r"(?<![\w/.])content\.py\b", err) and "modified_in_fork.py" not in err  # resolved ones
    code, out, _ = run_cli(capsys, "status", "--repo", str(pair.repo), "--json")
    message = cli_data(out)["phases"]["resolve"]["message"]
    named = set(message.split(": ", 1)[1].split(", "))
    assert named == git_left, (named ^ git_left, message)
