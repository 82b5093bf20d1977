"""Provenance of conflict hunks, read from git: the upstream PRs (first-parent) and fork commits that changed
each hunk's lines since the merge-base, and the patch-set that owns the fork side. Real git repos in tmp_path.
"""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from ds4sync.core.git import GitRepo
from ds4sync.merge.plan import plan_merge
from ds4sync.patchsets.model import PatchSet, load_patchset
from tests.scenarios import BRANCH, lines

BODY = [f"line {i}" for i in range(30)]
OTHER = [f"other {i}" for i in range(30)]


def body(**changes: str) -> str:
    """BODY with line ``N`` (key ``lN``) replaced."""
    out = list(BODY)
    for key, text in changes.items():
        out[int(key[1:])] = text
    return lines(*out)


def patchset(root: Path, *, ident: str, files: str, pattern: str, patch: str | None = None) -> PatchSet:
    folder = root / ident
    folder.mkdir(parents=True)
    text = (
        f"id: {ident}\ntitle: {ident} title\nkind: fork-feature\nrationale: why {ident} exists\n"
        f"invariants:\n  - {{kind: contains, files: {files}, pattern: '{pattern}'}}\n"
    )
    if patch is not None:
        (folder / "0001.patch").write_text(patch)
        text += "patches: [0001.patch]\n"
    (folder / "patchset.yaml").write_text(text)
    return load_patchset(folder)


def upstream_history(builder_root: Path, *, rename_to: str | None = None):
    """Upstream: base, PR #101 (squash, edits lines 10-11), PR #102 (a merge commit; edits line 12), an
    unrelated PR #103 far away; optionally a rename of mod.py. The fork: a branch at base editing 10-12."""
    from ds4sync.demo.repobuild import RepoBuilder

    up = RepoBuilder(builder_root / "repo")
    base = up.commit({"mod.py": body(), "far.py": lines(*OTHER)}, "base")
    up.commit({"mod.py": body(l10="up a", l11="up b")}, "Speed up things (#101)")
    up.branch("pr102")
    up.commit({"mod.py": body(l10="up a", l11="up b", l12="up c")}, "inner commit of the PR")
    up.checkout("main")
    git.Repo(up.path).git.merge("--no-ff", "-q", "-m", "Merge the cache fix (#102)", "pr102")
    up.commit({"far.py": lines(*OTHER[:-1], "other changed")}, "Unrelated (#103)")
    if rename_to:
        up.rename("mod.py", rename_to, "Move the module (#104)")
    upstream = up.head()
    up.branch(BRANCH, base)
    fork_sha = up.commit({"mod.py": body(l10="fork a", l11="fork b", l12="fork c")}, "ds4: the fork's feature")
    return up, base, upstream, fork_sha


@pytest.mark.parametrize("rename", [None, "upstream", "fork"])
def test_a_hunk_names_two_upstream_prs_and_the_fork_patchset(tmp_path: Path, rename: str | None) -> None:
    from ds4sync.demo.repobuild import RepoBuilder

    up, base, upstream, fork_sha = upstream_history(tmp_path, rename_to="pkg/mod.py" if rename == "upstream" else None)
    if rename == "fork":
        up.checkout(BRANCH)
        fork_sha = up.rename("mod.py", "fork/mod.py", "ds4: move the module")
    assert isinstance(up, RepoBuilder)
    fork_path = "fork/mod.py" if rename == "fork" else "mod.py"
    owner = patchset(tmp_path / "patches", ident="the-feature", files=fork_path, pattern="fork a")
    stranger = patchset(tmp_path / "patches", ident="elsewhere", files="far.py", pattern="other")
    repo = GitRepo(up.path)
    summary = plan_merge(repo, fork_sha=fork_sha, upstream_sha=upstream, merge_base=base, patchsets=[stranger, owner])

    [conflict] = summary.conflicts
    assert conflict.kind == "content"
    [hunk] = conflict.hunks
    assert hunk.upstream_prs == (102, 101)  # newest first; #103 touched other lines, #104 only moved it
    subjects = [c.subject for c in hunk.upstream_commits]
    assert "inner commit of the PR" not in subjects  # first-parent: the PR, not the commits inside it
    assert [c.subject for c in hunk.fork_commits] == ["ds4: the fork's feature"]
    assert [o.patchset for o in hunk.owners] == ["the-feature"]
    assert hunk.owners[0].rationale == "why the-feature exists"
    assert (hunk.fork, hunk.upstream, hunk.base) == (
        lines("fork a", "fork b", "fork c"),
        lines("up a", "up b", "up c"),
        lines("line 10", "line 11", "line 12"),
    )
    assert (hunk.base_start, hunk.base_count, hunk.fork_start, hunk.upstream_start) == (11, 3, 11, 11)
    assert hunk.fork_path == fork_path
    assert hunk.upstream_path == ("pkg/mod.py" if rename == "upstream" else "mod.py")
    brief = summary.brief()["conflicts"][0]["hunks"][0]
    assert brief["upstream_prs"] == [102, 101] and brief["patchsets"] == ["the-feature"]


def test_hunks_apart_in_one_file_each_have_their_own_history(tmp_path: Path) -> None:
    from ds4sync.demo.repobuild import RepoBuilder

    up = RepoBuilder(tmp_path / "repo")
    base = up.commit({"mod.py": body()}, "base")
    up.commit({"mod.py": body(l3="up top")}, "Top change (#7)")
    up.commit({"mod.py": body(l3="up top", l25="up bottom")}, "Bottom change (#8)")
    upstream = up.head()
    up.branch(BRANCH, base)
    up.commit({"mod.py": body(l3="fork top")}, "fork: top")
    fork_sha = up.commit({"mod.py": body(l3="fork top", l25="fork bottom")}, "fork: bottom")
    patch = "--- a/mod.py\n+++ b/mod.py\n@@ -26 +26 @@\n-line 25\n+fork bottom\n"
    owner = patchset(tmp_path / "patches", ident="bottom", files="other.py", pattern="x", patch=patch)
    summary = plan_merge(GitRepo(up.path), fork_sha=fork_sha, upstream_sha=upstream, merge_base=base, patchsets=[owner])
    top, bottom = summary.conflicts[0].hunks
    assert (top.upstream_prs, [c.subject for c in top.fork_commits]) == ((7,), ["fork: top"])
    assert (bottom.upstream_prs, [c.subject for c in bottom.fork_commits]) == ((8,), ["fork: bottom"])
    assert top.owners[0].matched_by == ("patch",)  # the patch touches the file, not these lines
    assert bottom.owners[0].matched_by == ("patch lines", "patch")
    assert (top.base_start, bottom.base_start) == (4, 26)


@pytest.mark.parametrize("gap", [3, 6])
def test_each_hunk_of_a_file_keeps_its_own_prs_when_one_pr_spans_two_hunks(tmp_path: Path, gap: int) -> None:
    """Three hunks in one file: PR #21 rewrites the lines of the first two and all between them (one diff run
    over both hunks), #22 puts the lines between back and changes the second hunk's line again, #23 changes the
    third. Each hunk names exactly the PRs that changed its lines, the oldest too."""
    from ds4sync.demo.repobuild import RepoBuilder

    a, b, c = 3, 3 + gap, 24
    up = RepoBuilder(tmp_path / "repo")
    base = up.commit({"mod.py": body()}, "base")
    span = {f"l{i}": f"pr21 {i}" for i in range(a, b + 1)}
    up.commit({"mod.py": body(**span)}, "Rewrite a block (#21)")
    kept = {f"l{a}": span[f"l{a}"], f"l{b}": "pr22"}
    up.commit({"mod.py": body(**kept)}, "Second again (#22)")
    upstream = up.commit({"mod.py": body(**kept, **{f"l{c}": "pr23"})}, "Third (#23)")
    up.branch(BRANCH, base)
    fork_sha = up.commit({"mod.py": body(**{f"l{a}": "fork a", f"l{b}": "fork b", f"l{c}": "fork c"})}, "fork: three")
    summary = plan_merge(GitRepo(up.path), fork_sha=fork_sha, upstream_sha=upstream, merge_base=base, patchsets=[])
    hunks = summary.conflicts[0].hunks
    assert [h.upstream_prs for h in hunks] == [(21,), (22, 21), (23,)]
    assert all([x.subject for x in h.fork_commits] == ["fork: three"] for h in hunks)


def test_a_deletion_on_one_side_still_finds_the_commit_that_deleted(tmp_path: Path) -> None:
    from ds4sync.demo.repobuild import RepoBuilder

    up = RepoBuilder(tmp_path / "repo")
    base = up.commit({"mod.py": body()}, "base")
    gone = list(BODY)
    del gone[10:13]
    upstream = up.commit({"mod.py": lines(*gone)}, "Drop the old path (#55)")
    up.branch(BRANCH, base)
    fork_sha = up.commit({"mod.py": body(l11="fork keeps it")}, "fork: keep it")
    summary = plan_merge(GitRepo(up.path), fork_sha=fork_sha, upstream_sha=upstream, merge_base=base)
    [hunk] = summary.conflicts[0].hunks
    assert hunk.upstream == "" and hunk.upstream_count == 0
    assert hunk.upstream_start == 11  # the deletion sits before upstream's line 11
    assert hunk.upstream_prs == (55,)


def test_the_conflicts_command_shows_texts_provenance_and_known_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from ds4sync.cli import main
    from tests.cli_json import data as cli_data
    from tests.scenarios import make_pair

    pair = make_pair(
        tmp_path,
        {"a.py": body(), "docs/b.md": lines("x")},
        [{"a.py": body(l5="up five"), "docs/b.md": lines("up")}],
        [{"a.py": body(l5="fork five"), "docs/b.md": lines("fork")}],
    )
    config = tmp_path / "ds4sync.yaml"
    rules = [{"glob": "docs/**", "strategy": "theirs"}]
    config.write_text(yaml.safe_dump({"fork": {"branch": BRANCH}, "merge": {"rules": rules}}))
    args = ["--repo", str(pair.repo), "--config", str(config)]
    assert main(["conflicts", "upstream/main", *args, "--json"]) == 0
    rows = {row["path"]: row for row in cli_data(capsys.readouterr().out)["conflicts"]}
    [a] = rows["a.py"]["hunks"]
    assert (a["base"], a["fork"], a["upstream"]) == (lines("line 5"), lines("fork five"), lines("up five"))
    assert [c["subject"] for c in a["upstream_commits"]] == ["upstream change 0"]
    assert [c["subject"] for c in a["fork_commits"]] == ["fork change 0"]
    assert a["answers"] == {"store": None, "rule": None}
    assert rows["docs/b.md"]["hunks"][0]["answers"] == {"store": None, "rule": "docs/** -> theirs"}
    assert main(["conflicts", "upstream/main", *args]) == 0
    text = capsys.readouterr().out
    assert "a.py hunk 1" in text and "fork five" in text and "rule: docs/** -> theirs" in text


def test_conflicts_in_renamed_files_share_one_rename_search_per_side(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each content conflict in a file upstream moved asks where its paths are on each side; git's whole
    rename search of a side runs once per plan, and each conflict still finds its own old name."""
    from ds4sync.demo.repobuild import RepoBuilder

    names = [f"mod{i}.py" for i in range(4)]
    up = RepoBuilder(tmp_path / "repo")
    base = up.commit({name: body() for name in names}, "base")
    up.commit({name: body(l10=f"up {name}") for name in names}, "Change them (#101)")
    for name in names:
        up.rename(name, f"pkg/{name}", f"Move {name} (#102)")
    upstream = up.head()
    up.branch(BRANCH, base)
    fork_sha = up.commit({name: body(l10=f"fork {name}") for name in names}, "ds4: the fork's change")
    with caplog.at_level("DEBUG", logger="ds4sync.git"):
        summary = plan_merge(GitRepo(up.path), fork_sha=fork_sha, upstream_sha=upstream, merge_base=base)
    assert sorted(c.path for c in summary.conflicts) == [f"pkg/{name}" for name in names]
    for conflict in summary.conflicts:
        [hunk] = conflict.hunks
        assert (hunk.fork_path, hunk.upstream_path) == (conflict.path.removeprefix("pkg/"), conflict.path)
        assert hunk.upstream_prs == (101,)
    whole = [r.getMessage() for r in caplog.records if "--name-status -M -z" in r.getMessage()]
    searches = [m for m in whole if m.split("--end-of-options", 1)[1].split("(in")[0].strip().endswith("--")]
    assert 1 <= len(searches) <= 2, whole  # one whole search per side at most


def _history_repo(root: Path, *, merged_pr: bool = False) -> tuple[GitRepo, str, str, str]:
    """Upstream: PRs changing ranges of three files (with ``merged_pr``, #2 is a merge commit with an inner commit),
    ``g.py`` moved to ``h.py`` without a change and a new ``g.py`` made in its place; the fork: a merged branch."""
    from ds4sync.demo.repobuild import RepoBuilder

    up = RepoBuilder(root / "repo")
    files = {name: body() for name in ("a.py", "b.py", "c.py", "g.py")}
    base = up.commit(files, "base")
    up.commit({"a.py": body(l3="pr1 a"), "b.py": body(l20="pr1 b"), "g.py": body(l10="pr1 g")}, "Three files (#1)")
    second = {"a.py": body(l3="pr1 a", l20="pr2 a"), "c.py": body(l3="pr2 c")}
    if merged_pr:
        up.branch("pr2")
        up.commit(second, "inner commit of #2")
        up.checkout("main")
        git.Repo(up.path).git.merge("--no-ff", "-q", "-m", "The second (#2)", "pr2")
    else:
        up.commit(second, "The second (#2)")
    up.rename("g.py", "h.py", "Move g (#3)")
    up.commit({"g.py": body(l3="new g"), "h.py": body(l3="moved h", l10="pr1 g")}, "A new g, h changed (#4)")
    upstream = up.commit({"b.py": body(l20="pr1 b", l3="pr5 b")}, "Top of b (#5)")
    up.branch(BRANCH, base)
    up.commit({"a.py": body(l3="fork a")}, "fork: a")
    up.branch("side")
    up.commit({"b.py": body(l20="side b")}, "side: b")
    up.checkout(BRANCH)
    up.commit({"a.py": body(l3="fork a", l25="fork a again")}, "fork: a again")
    git.Repo(up.path).git.merge("--no-ff", "-q", "-m", "fork: merge the side", "side")
    return GitRepo(up.path), base, upstream, up.head()


@pytest.mark.parametrize("merged_pr", [False, True])
def test_ranges_of_many_files_asked_in_few_walks_answer_as_each_range_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, merged_pr: bool
) -> None:
    """Hunk histories are asked one range of each file per walk of a side: every range's commits are what its own
    ``git log -L`` finds, for files with several ranges, a file moved in the range whose old name is another
    file's (asked alone), and a side whose walk holds a merge (each range alone: git prints a merge's diff for
    no range)."""
    from ds4sync.merge.provenance import _line_histories

    repo, base, upstream, fork = _history_repo(tmp_path, merged_pr=merged_pr)
    spans = [(2, 5), (19, 22), (24, 26)]
    walks = {(upstream, True, path, span) for path in ("a.py", "b.py", "c.py", "g.py", "h.py") for span in spans}
    walks |= {(fork, False, path, span) for path in ("a.py", "b.py") for span in spans}
    with caplog.at_level("DEBUG", logger="ds4sync.git"):
        found = _line_histories(repo, base, walks, pool=None)
    walked = [r.getMessage() for r in caplog.records if " -L" in r.getMessage()]
    alone = {
        (head, fp, path, span): tuple(
            (c.sha, c.subject) for c in repo.line_log(base, head, path, *span, first_parent=fp)
        )
        for head, fp, path, span in walks
    }
    assert {walk: tuple((c.sha, c.subject) for c in commits) for walk, commits in found.items()} == alone
    subjects = {walk[2:]: [s for _, s in commits] for walk, commits in alone.items() if walk[0] == upstream}
    assert subjects[("a.py", (2, 5))] == ["Three files (#1)"] and subjects[("a.py", (19, 22))] == ["The second (#2)"]
    assert subjects[("h.py", (2, 5))] == ["A new g, h changed (#4)"] == subjects[("g.py", (2, 5))]
    assert subjects[("h.py", (19, 22))] == [] and len(subjects[("g.py", (19, 22))]) == 1  # g.py made at #4
    upstream_walks = [m for m in walked if "--first-parent" in m]
    # a.py, b.py and c.py together, one range of each per walk: 3 walks; g.py and h.py (added in the range): 6
    assert len(upstream_walks) == (15 if merged_pr else 3 + 6), upstream_walks
    assert len(walked) - len(upstream_walks) == 6  # the fork's range holds a merge: every range alone


def test_one_walk_of_many_files_is_refused_where_git_cannot_split_it(tmp_path: Path) -> None:
    repo, base, upstream, fork = _history_repo(tmp_path, merged_pr=True)
    with pytest.raises(ValueError):
        repo.line_logs(base, upstream, [("a.py", 1, 2), ("a.py", 5, 6)], first_parent=True)
    assert repo.line_logs(base, upstream, [("a.py", 1, 2), ("b.py", 500, 501)], first_parent=True) is None
    # a file moved in the walk prints its old name, which names no file asked; a merge prints no diff
    assert repo.line_logs(base, upstream, [("a.py", 1, 4), ("h.py", 9, 11)], first_parent=True) is None
    assert repo.line_logs(base, upstream, [("a.py", 19, 22), ("c.py", 2, 5)], first_parent=True) is None
    together = repo.line_logs(base, upstream, [("a.py", 2, 5), ("b.py", 2, 5)], first_parent=True)
    assert together is not None
    assert [c.subject for c in together["a.py"]] == ["Three files (#1)"]
    assert [c.subject for c in together["b.py"]] == ["Top of b (#5)"]
    assert repo.paths_added_or_deleted(base, upstream, ["a.py", "g.py", "h.py"], first_parent=True) == {"g.py", "h.py"}
    assert repo.has_merges(base, upstream, first_parent=True) and repo.has_merges(base, fork)
    assert not repo.has_merges(upstream, upstream)
