"""Write patch-sets: capture fork commits (``new``), rewrite them from an adapted tree
(``refresh``), and make a backport from an upstream commit (``backport``).

Patch files come from ``git format-patch``; the yaml is scaffolded with invariants read
from the captured diff (files added must exist, a distinctive added line must stay).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from ds4sync.core.errors import ConfigError, NeedsPersonError, StateError
from ds4sync.core.files import write_atomic
from ds4sync.core.git import GitRepo
from ds4sync.core.model import FrozenModel, read_yaml
from ds4sync.core.names import PatchSetKind
from ds4sync.models.record import RunRecord
from ds4sync.patchsets.model import ID_RE, PATCHSET_FILE, load_catalogue, load_patchset
from ds4sync.patchsets.replay import TRAILER
from ds4sync.runner import Workspace, resolve_upstream

_PR_RE = re.compile(r"\(#(\d+)\)\s*$")


class AuthoringResult(FrozenModel):
    """A patch-set written to disk: its folder, yaml, patch files and the commits they hold."""

    id: str
    folder: str
    patches: tuple[str, ...]
    commits: tuple[str, ...]
    note: str = ""


def new_patchset(
    ws: Workspace, patchset_id: str, rev_range: str, *, repo: GitRepo | None = None, kind: PatchSetKind = "fork-feature"
) -> AuthoringResult:
    """Capture the commits of ``rev_range`` into ``<profile>/patches/<id>/`` with a scaffolded yaml.

    Raises:
        ConfigError: a bad id, or the patch-set exists.
        GitError: the range names no commit.
    """
    repo = repo or ws.repo
    if ".." not in rev_range:
        raise ConfigError(f"'{rev_range}' is not a range", where="--from", fix="give BASE..HEAD, e.g. main..my-feature")
    commits = repo.commits_in(rev_range)
    if not commits:
        raise ConfigError(
            f"'{rev_range}' names no commit",
            where=str(repo.path),
            fix="give a range such as BASE..HEAD (see `git log BASE..HEAD`)",
        )
    folder = _new_folder(ws, patchset_id)
    try:
        files = repo.format_patch(rev_range, folder)
        title = commits[0][1] if len(commits) == 1 else f"{commits[0][1]} (+{len(commits) - 1} more)"
        data: dict[str, Any] = {
            "id": patchset_id,
            "title": title,
            "kind": kind,
            "owner": commits[0][2],
            "rationale": "\n".join(c[3] for c in commits if c[3]) or "TODO",
            "depends_on": [],
            "invariants": scaffold_invariants(repo, commits[0][0] + "^", commits[-1][0]),
            "tests": [],
            "patches": [f.name for f in files],
        }
        _write_yaml(folder / PATCHSET_FILE, data)
        load_patchset(folder)
    except Exception:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return AuthoringResult(
        id=patchset_id,
        folder=str(folder),
        patches=tuple(f.name for f in files),
        commits=tuple(c[0] for c in commits),
        note="invariants scaffolded: review them",
    )


def scaffold_invariants(repo: GitRepo, base: str, head: str) -> list[dict[str, Any]]:
    """Invariants read from the diff ``base..head``: added files exist, deleted files stay
    absent, and the longest added line of each modified file stays (escaped regex)."""
    invariants: list[dict[str, Any]] = []
    for path, flag in repo.name_status(base, head).items():  # -z: a path is never C-quoted
        if flag == "A":
            invariants.append({"kind": "file_exists", "path": path})
        elif flag == "D":
            invariants.append({"kind": "file_absent", "path": path})
        elif flag == "M":
            added = [
                ln[1:].strip()
                for ln in repo.file_diff(base, head, path, context=0).splitlines()
                if ln.startswith("+") and not ln.startswith("+++")
            ]
            best = max(added, key=len, default="")
            if len(best) >= 8:
                invariants.append({"kind": "contains", "files": path, "pattern": re.escape(best)})
    return invariants


def refresh_patchset(ws: Workspace, patchset_id: str, *, allow_drop: bool = False) -> AuthoringResult:
    """Rewrite ``<id>``'s patches from the commits carrying ``Patch-set: <id>`` in the sync worktree.

    The patch-set never shrinks silently: a file its old patches change that the new ones do not
    (a binary git dropped on apply, a file the adaptation left out) is refused, unless
    ``allow_drop``; then the note names every file dropped. Old patches damaged in a way
    :mod:`ds4sync.patchsets.lint` refuses at load can be refreshed (that is how they are fixed).

    Raises:
        StateError: no run with a sync worktree, or no such commit in it.
        NeedsPersonError: the patch-set still waits for adaptation (resume first), or the new
            patches would drop files and ``allow_drop`` is not set (nothing is written then).
        ConfigError: no such patch-set.
    """
    folder = ws.profile / "patches" / patchset_id
    before = load_patchset(folder, lint=False)
    record = _run_with_worktree(ws)
    replayed = record.results.replay
    if replayed and replayed.pending == patchset_id:
        raise NeedsPersonError(
            f"patch-set {patchset_id} still waits for adaptation",
            where=record.worktree,
            fix="adapt the tree, run `ds4sync resume` (it commits with the trailer), then refresh",
        )
    wt = GitRepo(record.worktree)
    commits = wt.commits_with_trailer(f"{record.fork.head_before}..HEAD", TRAILER, patchset_id)
    if not commits:
        raise StateError(
            f"no commit with the trailer '{TRAILER}: {patchset_id}' in the sync worktree",
            where=record.worktree,
            fix="replay or adapt it first (`ds4sync resume`)",
        )
    staging = folder / ".refresh"
    shutil.rmtree(staging, ignore_errors=True)
    written: list[Path] = []
    for i, sha in enumerate(commits, 1):
        for path in wt.format_patch(f"{sha}^..{sha}", staging):
            target = staging / f"{i:04d}-{path.name[5:]}"
            path.rename(target)
            written.append(target)
    dropped = sorted(wt.patch_paths(before.patch_files()) - wt.patch_paths(written))
    if dropped and not allow_drop:
        shutil.rmtree(staging, ignore_errors=True)
        raise NeedsPersonError(
            f"refreshing patch-set {patchset_id} would drop {len(dropped)} file(s) its patches change now: "
            f"{', '.join(dropped)}",
            where=str(folder),
            fix="bring them into the sync worktree and commit with the trailer (`ds4sync resume`), or pass "
            "--allow-drop to drop them on purpose",
        )
    old_patches = list(read_yaml(folder / PATCHSET_FILE).get("patches") or [])
    for old in old_patches:
        (folder / old).unlink(missing_ok=True)
    for path in written:
        path.replace(folder / path.name)
    shutil.rmtree(staging, ignore_errors=True)
    set_yaml_field(folder / PATCHSET_FILE, "patches", [p.name for p in written])
    load_patchset(folder)
    return AuthoringResult(
        id=patchset_id,
        folder=str(folder),
        patches=tuple(p.name for p in written),
        commits=tuple(commits),
        note=f"from sync worktree {record.worktree}"
        + (f"; dropped on purpose: {', '.join(dropped)}" if dropped else ""),
    )


def backport(ws: Workspace, commit: str, patchset_id: str) -> AuthoringResult:
    """Cherry-pick upstream ``commit`` (``-x``) into the sync worktree and capture it as a backport patch-set.

    Provenance (repo, PR number from a ``(#N)`` subject, commit) goes in the yaml; the
    commit gets the ``Patch-set: <id>`` trailer.

    Raises:
        StateError: no run with a sync worktree, or its worktree is not clean.
        GitError: the commit cannot be found or fetched.
        NeedsPersonError: the cherry-pick conflicts (it is aborted; nothing changed).
    """
    record = _run_with_worktree(ws)
    wt = GitRepo(record.worktree)
    if wt.status_porcelain():
        raise StateError(
            "the sync worktree has uncommitted changes",
            where=record.worktree,
            fix="finish or `ds4sync resume` the run first",
        )
    sha = resolve_upstream(ws, commit)
    folder = _new_folder(ws, patchset_id)
    picked, conflicted = wt.cherry_pick(sha)
    if not picked:
        folder.rmdir()
        raise NeedsPersonError(
            f"cherry-pick of {sha[:12]} conflicts in {', '.join(conflicted) or 'the tree'}",
            where=record.worktree,
            fix="cherry-pick it by hand there, then `ds4sync patches new ID --from HEAD~1..HEAD`",
        )
    message = wt.message("HEAD").rstrip() + f"\n{TRAILER}: {patchset_id}\n"
    head = wt.amend_message(message)
    (subject, author, body) = wt.commits_in(f"{head}^..{head}")[0][1:]
    files = wt.format_patch(f"{head}^..{head}", folder)
    pr = _PR_RE.search(subject)
    data = {
        "id": patchset_id,
        "title": subject,
        "kind": "backport",
        "owner": author,
        "rationale": body.split("(cherry picked from")[0].strip() or "TODO: why this backport is carried",
        "upstream": {
            "repo": ws.config.upstream.name or ws.config.upstream.url or ws.config.upstream.remote,
            "pr": int(pr.group(1)) if pr else None,
            "commit": sha,
        },
        "drop_when": {"upstream_has_commit": sha},
        "invariants": scaffold_invariants(wt, f"{head}^", head),
        "tests": [],
        "patches": [f.name for f in files],
    }
    _write_yaml(folder / PATCHSET_FILE, data)
    load_patchset(folder)
    return AuthoringResult(
        id=patchset_id,
        folder=str(folder),
        patches=tuple(f.name for f in files),
        commits=(head,),
        note=f"cherry-picked {sha[:12]} into {record.sync_branch}",
    )


def _new_folder(ws: Workspace, patchset_id: str) -> Path:
    if not ID_RE.match(patchset_id):
        raise ConfigError(
            f"'{patchset_id}' is not a valid patch-set id",
            where="ID",
            fix="use lower case letters, digits, '.', '_' or '-'",
        )
    patches = ws.profile / "patches"
    load_catalogue(patches)  # a broken catalogue is reported before anything is written
    folder = patches / patchset_id
    if folder.exists():
        raise ConfigError(
            f"patch-set '{patchset_id}' already exists",
            where=str(folder),
            fix="pick another id, or `ds4sync patches refresh` it",
        )
    folder.mkdir(parents=True)
    return folder


def _run_with_worktree(ws: Workspace) -> RunRecord:
    record = ws.store.current() or ws.store.latest()
    if record is None or not Path(record.worktree).is_dir():
        raise StateError(
            "no sync run with a worktree", where=str(ws.store.root), fix="start one with `ds4sync merge <upstream-ref>`"
        )
    return record


def set_yaml_field(path: Path, key: str, value: list[str]) -> None:
    """Set one top-level key of a YAML file with a round-trip editor: comments, key order, quoting and
    the other fields stay byte for byte; only the lines of ``key`` change (written atomically).

    Raises:
        ConfigError: the file is not a YAML mapping.
    """
    import io

    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    yaml_rt = YAML(typ="rt")
    yaml_rt.preserve_quotes = True
    yaml_rt.width = 4096  # never re-wrap a long line the person wrote
    read_yaml(path)  # the one loader's checks (size, nesting, aliases, duplicate keys) before the round-trip parse
    text = path.read_text(encoding="utf-8")
    # ruamel applies one sequence indentation to the whole file: take the file's own
    # (`key:\n- item`, as PyYAML writes it, or `key:\n  - item`) so other lists keep theirs.
    flush = re.search(r":[ \t]*\n- ", text) is not None
    yaml_rt.indent(mapping=2, sequence=2 if flush else 4, offset=0 if flush else 2)
    data = yaml_rt.load(text)
    if not isinstance(data, CommentedMap):
        raise ConfigError("not a YAML mapping", where=str(path), fix="fix the file, then refresh again")
    if list(data.get(key) or []) == value:
        return  # nothing changes: the file stays byte for byte
    seq = CommentedSeq(value)
    if not value:
        seq.fa.set_flow_style()  # `patches: []`
    data[key] = seq
    out = io.StringIO()
    yaml_rt.dump(data, out)
    write_atomic(path, out.getvalue())


def _write_yaml(path: Path, data: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110))
