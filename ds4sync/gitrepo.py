"""The one module that talks to git, through GitPython.

Small verbs that turn git's failures into messages a person can act on. Everything
else in ds4sync asks this module; nothing else runs git.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import git

from ds4sync.errors import GitError

SHA_RE = re.compile(r"^[0-9a-f]{7,40}$")
CONFLICT_KINDS = ("content", "add/add", "modify/delete", "delete/modify", "rename/delete",
                  "rename/rename", "binary", "file/directory", "mode", "other")
CONFLICT_MARKER_RE = re.compile(r"^(<{7} |={7}$|>{7} )", re.MULTILINE)
# Precedence when one path appears in several merge messages: the most specific wins.
_KIND_ORDER = {kind: i for i, kind in enumerate(
    ("binary", "rename/rename", "rename/delete", "modify/delete", "delete/modify",
     "file/directory", "add/add", "mode", "content", "other"))}


@dataclass(frozen=True)
class Conflict:
    """One conflicted path of a merge, with git's conflict kind.

    ``kind`` is one of :data:`CONFLICT_KINDS`, named from the fork's side: a
    ``modify/delete`` is modified in the fork and deleted upstream, a
    ``delete/modify`` the reverse. ``related`` holds the other paths of the same
    conflict (the two new names of a rename/rename).
    """

    path: str
    kind: str
    message: str = ""
    related: tuple[str, ...] = ()


@dataclass(frozen=True)
class MergeTreeResult:
    """What ``git merge-tree --write-tree`` predicts for merging two commits."""

    tree: str
    conflicts: tuple[Conflict, ...]

    @property
    def clean(self) -> bool:
        """Whether the merge has no conflict."""
        return not self.conflicts


@dataclass(frozen=True)
class FileChange:
    """Lines added and deleted in one file between two commits (None for binary files)."""

    path: str
    added: int | None
    deleted: int | None

    @property
    def lines(self) -> int:
        """Lines touched (added + deleted; 0 for binary files)."""
        return (self.added or 0) + (self.deleted or 0)


class GitRepo:
    """A git repository or worktree, opened through GitPython.

    Raises:
        GitError: ``path`` is not inside a git repository.
    """

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if not path.exists():
            raise GitError("folder does not exist", where=str(path), fix="check --repo")
        try:
            self._repo = git.Repo(path, search_parent_directories=False)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
            raise GitError("not a git repository", where=str(path),
                           fix="pass --repo with the fork checkout's root") from exc
        if self._repo.bare:
            raise GitError("bare repositories are not supported", where=str(path),
                           fix="point --repo at a checkout")
        self.path = Path(self._repo.working_tree_dir or path).resolve()
        self.git = self._repo.git
        self._ident_env: dict[str, str] | None = None

    def _identity_env(self) -> dict[str, str]:
        """The environment for commands that write commits or reflogs.

        The user's configured identity wins; a checkout without one (a fresh CI or
        cron clone) commits as ``ds4sync``.
        """
        if self._ident_env is None:
            configured = self.run("config", "user.email", ok_codes=(0, 1))[0] == 0
            fallback = {} if configured else {
                "GIT_AUTHOR_NAME": "ds4sync", "GIT_AUTHOR_EMAIL": "ds4sync@localhost",
                "GIT_COMMITTER_NAME": "ds4sync", "GIT_COMMITTER_EMAIL": "ds4sync@localhost"}
            self._ident_env = {**os.environ, **fallback}
        return self._ident_env

    # -- plumbing ---------------------------------------------------------------------------
    def run(self, *args: str, ok_codes: Iterable[int] = (0,), strip: bool = True,
            env: dict[str, str] | None = None) -> tuple[int, str, str]:
        """Run ``git <args>`` here; return (status, stdout, stderr) for the accepted codes.

        Raises:
            GitError: git exited with a code outside ``ok_codes``.
        """
        status, out, err = self.git.execute(["git", *args], with_extended_output=True,
                                            with_exceptions=False, strip_newline_in_stdout=strip,
                                            env=env)
        if status not in tuple(ok_codes):
            first = (err or out).strip().splitlines()
            raise GitError(f"`git {' '.join(args[:4])}` failed: {first[0] if first else f'exit {status}'}",
                           where=str(self.path))
        return status, out, err

    def out(self, *args: str) -> str:
        """Stdout of ``git <args>``, which must succeed."""
        return self.run(*args)[1]

    @property
    def git_dir(self) -> Path:
        """This checkout's own git dir (per-worktree)."""
        return Path(self._repo.git_dir).resolve()

    @property
    def common_dir(self) -> Path:
        """The git dir shared by all worktrees (where rr-cache and refs live)."""
        return Path(self._repo.common_dir).resolve()

    # -- refs -------------------------------------------------------------------------------
    def resolve_commit(self, ref: str) -> str | None:
        """The full SHA that ``ref`` names, or None when it names no commit here."""
        status, out, _ = self.run("rev-parse", "--verify", "--quiet", "--end-of-options",
                                  f"{ref}^{{commit}}", ok_codes=(0, 1, 128))
        return out.strip() if status == 0 and out.strip() else None

    def branch_head(self, branch: str) -> str:
        """The SHA at the tip of local branch ``branch``.

        Raises:
            GitError: no such local branch.
        """
        sha = self.resolve_commit(f"refs/heads/{branch}")
        if sha is None:
            raise GitError(f"no local branch named '{branch}'", where=str(self.path),
                           fix="pass --branch with an existing branch (see `git branch`)")
        return sha

    def current_branch(self) -> str | None:
        """The checked-out branch name, or None on a detached HEAD."""
        status, out, _ = self.run("symbolic-ref", "--quiet", "--short", "HEAD", ok_codes=(0, 1, 128))
        return out.strip() if status == 0 else None

    def head(self) -> str:
        """The SHA of HEAD."""
        return self.out("rev-parse", "HEAD")

    def ref_exists(self, ref: str) -> bool:
        """Whether the full ref name exists."""
        return self.run("show-ref", "--verify", "--quiet", ref, ok_codes=(0, 1))[0] == 0

    def update_ref(self, ref: str, sha: str, *, message: str = "ds4sync") -> None:
        """Point ``ref`` at ``sha`` (creating it)."""
        self.run("update-ref", "-m", message, ref, sha)

    def delete_ref(self, ref: str) -> None:
        """Delete ``ref`` if it exists."""
        if self.ref_exists(ref):
            self.run("update-ref", "-d", ref)

    def refs(self, prefix: str) -> dict[str, str]:
        """Refs under ``prefix`` mapped to their SHAs."""
        out = self.out("for-each-ref", "--format=%(refname) %(objectname)", prefix)
        return dict(line.split(" ", 1) for line in out.splitlines() if line)

    # -- remotes ----------------------------------------------------------------------------
    def remote_url(self, name: str) -> str | None:
        """The fetch URL of remote ``name``, or None when there is no such remote."""
        status, out, _ = self.run("remote", "get-url", name, ok_codes=(0, 2, 128))
        return out.strip() if status == 0 else None

    def fetch(self, source: str, ref: str) -> None:
        """Fetch ``ref`` from ``source`` (remote name or URL) into FETCH_HEAD.

        Raises:
            GitError: the remote cannot be reached or has no such ref.
        """
        status, _, err = self.run("fetch", "--quiet", "--no-tags", source, ref, ok_codes=(0, 1, 128))
        if status != 0:
            last = (err.strip().splitlines() or ["fetch failed"])[-1]
            raise GitError(f"cannot fetch '{ref}' from {source} ({last})", where=str(self.path),
                           fix="check the upstream remote/URL in ds4sync.yaml and that the ref exists")

    # -- history ----------------------------------------------------------------------------
    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of two commits, or None for unrelated histories."""
        status, out, _ = self.run("merge-base", a, b, ok_codes=(0, 1))
        return out.strip() if status == 0 else None

    def count_commits(self, include: str, exclude: str) -> int:
        """Commits reachable from ``include`` and not from ``exclude``."""
        return int(self.out("rev-list", "--count", include, f"^{exclude}"))

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether ``ancestor`` is reachable from ``descendant``."""
        return self.run("merge-base", "--is-ancestor", ancestor, descendant, ok_codes=(0, 1))[0] == 0

    def changed_names(self, base: str, head: str) -> list[str]:
        """Paths that differ between two commits (tree diff only: no blob is read)."""
        out = self.run("diff", "--name-only", "-z", "--no-renames", base, head, strip=False)[1]
        return [p for p in out.split("\0") if p]

    def changes(self, base: str, head: str, paths: Iterable[str] | None = None) -> dict[str, FileChange]:
        """Files changed from ``base`` to ``head`` with line counts (renames not followed).

        ``paths`` limits the diff (line counting reads blobs, so ask only for what you need).
        """
        limit = list(paths) if paths is not None else []
        if paths is not None and not limit:
            return {}
        out = self.run("diff", "--numstat", "-z", "--no-renames", base, head, "--", *limit, strip=False)[1]
        changes: dict[str, FileChange] = {}
        for entry in out.split("\0"):
            if not entry:
                continue
            added, deleted, path = entry.split("\t", 2)
            changes[path] = FileChange(path, None if added == "-" else int(added),
                                       None if deleted == "-" else int(deleted))
        return changes

    def tree_of(self, rev: str, paths: Iterable[str] = ()) -> str:
        """A SHA-1 over the tree entries of ``paths`` (the whole tree when empty) at ``rev``.

        Stable across clones; used as a cache key for what a gate depends on.
        """
        out = self.run("ls-tree", "-r", "--full-tree", rev, "--", *paths, strip=False)[1]
        return hashlib.sha1(out.encode("utf-8", "surrogateescape")).hexdigest()

    def changed_paths(self, base: str, head: str) -> list[str]:
        """Paths added, copied, modified, deleted or renamed from ``base`` to ``head`` (vLLM CI's filter)."""
        out = self.out("diff", "--name-only", "--diff-filter=ACMDR", base, head)
        return [line for line in out.splitlines() if line]

    def tree_paths(self, rev: str) -> list[str]:
        """Every file path in the tree of ``rev``."""
        out = self.run("ls-tree", "-r", "--name-only", "-z", "--full-tree", rev, strip=False)[1]
        return [p for p in out.split("\0") if p]

    def blob_bytes(self, rev: str, path: str) -> bytes | None:
        """The content of ``path`` at ``rev``, or None when it is not a file there."""
        try:
            obj = self._repo.commit(rev).tree / path
        except (KeyError, ValueError, git.BadName):
            return None
        return obj.data_stream.read() if obj.type == "blob" else None

    # -- merge prediction -------------------------------------------------------------------
    def merge_tree(self, ours: str, theirs: str) -> MergeTreeResult:
        """Predict the merge of ``theirs`` into ``ours`` without touching any work tree.

        Uses ``git merge-tree --write-tree -z`` (git >= 2.38) and names each conflict's
        kind from git's own messages.
        """
        status, out, err = self.run("merge-tree", "--write-tree", "-z", "--messages", ours, theirs,
                                    ok_codes=(0, 1, 128), strip=False)
        if status == 128:
            raise GitError(f"git merge-tree failed ({err.strip() or out.strip()})", where=str(self.path),
                           fix="git >= 2.38 is required")
        return parse_merge_tree(out, ours=ours, theirs=theirs)

    # -- worktrees --------------------------------------------------------------------------
    def worktree_add(self, path: Path, branch: str, start: str) -> GitRepo:
        """Create ``branch`` at ``start`` and check it out in a new worktree at ``path``.

        Raises:
            GitError: the branch already exists or the folder is taken.
        """
        if self.ref_exists(f"refs/heads/{branch}"):
            raise GitError(f"branch '{branch}' already exists", where=str(self.path),
                           fix="abort the earlier run or set merge.sync_branch to a new name")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.run("worktree", "add", "--quiet", "-b", branch, str(path), start)
        return GitRepo(path)

    def worktree_remove(self, path: Path) -> None:
        """Remove the worktree at ``path`` (forcefully: its changes are thrown away) and prune."""
        if path.exists():
            self.run("worktree", "remove", "--force", "--force", str(path), ok_codes=(0, 128))
        self.run("worktree", "prune")

    def checked_out_in(self, branch: str) -> str | None:
        """The worktree path where local ``branch`` is checked out, or None."""
        out = self.out("worktree", "list", "--porcelain")
        path = None
        for line in out.splitlines():
            if line.startswith("worktree "):
                path = line.split(" ", 1)[1]
            elif line == f"branch refs/heads/{branch}":
                return path
        return None

    def delete_branch(self, branch: str) -> None:
        """Delete local branch ``branch`` if it exists."""
        if self.ref_exists(f"refs/heads/{branch}"):
            self.run("branch", "-D", branch)

    # -- merging in a worktree --------------------------------------------------------------
    def merge_no_commit(self, sha: str, *, rerere: bool = True) -> bool:
        """``git merge --no-ff --no-commit`` of ``sha`` into HEAD, rerere on; True when clean."""
        args = ["-c", f"rerere.enabled={'true' if rerere else 'false'}", "-c", "rerere.autoupdate=true",
                "-c", "merge.conflictStyle=merge",
                "merge", "--no-ff", "--no-commit", "--no-edit", "--quiet", sha]
        status, out, err = self.run(*args, ok_codes=(0, 1, 2, 128), env=self._identity_env())
        if status in (2, 128):
            raise GitError(f"git merge could not start ({(err or out).strip().splitlines()[-1]})",
                           where=str(self.path), fix="look at the worktree's state")
        return status == 0

    def merge_head(self) -> str | None:
        """The commit being merged (MERGE_HEAD), or None when no merge is in progress."""
        path = self.git_dir / "MERGE_HEAD"
        return path.read_text().split()[0] if path.is_file() else None

    def unmerged_paths(self) -> list[str]:
        """Paths with conflict stages in the index."""
        out = self.run("diff", "--name-only", "-z", "--diff-filter=U", strip=False)[1]
        return sorted({p for p in out.split("\0") if p})

    def stages(self, path: str) -> set[int]:
        """Which index stages (1 base, 2 ours, 3 theirs) ``path`` has."""
        out = self.out("ls-files", "-u", "-z", "--", path)
        return {int(e.split("\t", 1)[0].split()[2]) for e in out.split("\0") if e}

    def take_side(self, path: str, side: str) -> None:
        """Resolve ``path`` with one side: ``ours`` or ``theirs`` (deleting it when that side did)."""
        stage = 2 if side == "ours" else 3
        if stage in self.stages(path):
            self.run("checkout", f"--{side}", "--", path)
            self.run("add", "--", path)
        else:
            self.run("rm", "--quiet", "--cached", "--ignore-unmatch", "--", path)
            with contextlib.suppress(FileNotFoundError):
                (self.path / path).unlink()

    def union_merge(self, path: str) -> bool:
        """Resolve ``path`` keeping the lines of both sides; False when it has no three stages."""
        if self.stages(path) != {1, 2, 3}:
            return False
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for stage, name in ((2, "ours"), (1, "base"), (3, "theirs")):
                target = Path(tmp) / name
                target.write_bytes(self.blob(f":{stage}:{path}"))
                files.append(str(target))
            _status, merged, _ = self.run("merge-file", "-p", "--union", *files, ok_codes=range(0, 127),
                                         strip=False)
        (self.path / path).write_text(merged)
        self.run("add", "--", path)
        return True

    def blob(self, spec: str) -> bytes:
        """The exact bytes of a blob (``<rev>:<path>`` or ``:<stage>:<path>``)."""
        data = self.git.execute(["git", "cat-file", "blob", spec], stdout_as_string=False,
                                strip_newline_in_stdout=False)
        return data if isinstance(data, bytes) else str(data).encode()

    def stage_resolved(self, path: str) -> None:
        """Stage a path a person resolved: add it, or record its deletion when it is gone."""
        if (self.path / path).exists():
            self.run("add", "--", path)
        else:
            self.run("rm", "--quiet", "--cached", "--ignore-unmatch", "--", path)

    def has_markers(self, path: str) -> bool:
        """Whether the work-tree file still holds conflict markers."""
        file = self.path / path
        if not file.is_file():
            return False
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        return CONFLICT_MARKER_RE.search(text) is not None

    def rerere(self) -> None:
        """Record the current resolutions into rr-cache (``git rerere``)."""
        self.run("-c", "rerere.enabled=true", "rerere")

    def merge_rr(self) -> dict[str, str]:
        """This merge's rerere entries: path -> conflict hash (from MERGE_RR)."""
        path = self.git_dir / "MERGE_RR"
        if not path.is_file():
            return {}
        entries = {}
        for entry in path.read_bytes().decode("utf-8", "replace").split("\0"):
            if "\t" in entry:
                digest, name = entry.split("\t", 1)
                entries[name] = digest.split(".")[0]
        return entries

    def commit(self, message: str) -> str:
        """Commit the index with ``message`` (hooks skipped, rerere on) and return the new SHA."""
        with tempfile.NamedTemporaryFile("w", suffix=".msg", delete=False, encoding="utf-8") as handle:
            handle.write(message)
        try:
            self.run("-c", "rerere.enabled=true", "commit", "--quiet", "--no-verify", "-F", handle.name,
                     env=self._identity_env())
        finally:
            os.unlink(handle.name)
        return self.head()

    def remerge_diff_paths(self, commit: str) -> list[str]:
        """Paths where merge ``commit`` differs from git's automatic merge of its parents."""
        out = self.out("show", "--remerge-diff", "--format=", "--name-only", commit)
        return sorted({line for line in out.splitlines() if line})

    def status_porcelain(self) -> list[str]:
        """``git status --porcelain`` lines (empty for a clean checkout)."""
        return [line for line in self.out("status", "--porcelain").splitlines() if line]


    # -- patches (patch-sets) ---------------------------------------------------------------
    def apply_check(self, patch: Path, *, reverse: bool = False) -> bool:
        """Whether ``patch`` would apply to the work tree and index (``git apply --check``)."""
        args = ["apply", "--check", *(["--reverse"] if reverse else []), str(patch)]
        return self.run(*args, ok_codes=(0, 1, 128))[0] == 0

    def apply_3way(self, patch: Path) -> ApplyOutcome:
        """``git apply --3way`` of ``patch`` to the work tree and index.

        When the three-way fallback cannot run (the preimage blobs are unknown here),
        ``git apply --reject`` applies the hunks that fit and leaves ``.rej`` files for
        the rest. The work tree is left as git left it, for a person to adapt.
        """
        before = set(self.untracked())
        status, out, err = self.run("apply", "--3way", str(patch), ok_codes=(0, 1, 128))
        if status == 0:
            return ApplyOutcome(True, messages=tuple(_lines(err)))
        conflicted = tuple(self.unmerged_paths())
        if conflicted:
            return ApplyOutcome(False, conflicted=conflicted, messages=tuple(_lines(err or out)))
        _, out2, err2 = self.run("apply", "--reject", str(patch), ok_codes=(0, 1, 128))
        rejects = tuple(sorted(p for p in set(self.untracked()) - before if p.endswith(".rej")))
        return ApplyOutcome(False, rejects=rejects, messages=tuple(_lines(err) + _lines(err2 or out2)))

    def untracked(self) -> list[str]:
        """Untracked files (not ignored)."""
        out = self.run("ls-files", "--others", "--exclude-standard", "-z", strip=False)[1]
        return [p for p in out.split("\0") if p]

    def add_all(self) -> None:
        """Stage every change of the work tree (``git add -A``)."""
        self.run("add", "-A")

    def has_staged_changes(self) -> bool:
        """Whether the index differs from HEAD."""
        return self.run("diff", "--cached", "--quiet", ok_codes=(0, 1))[0] == 1

    def format_patch(self, rev_range: str, out_dir: Path) -> list[Path]:
        """``git format-patch`` of ``rev_range`` into ``out_dir``; the files written, in order.

        Raises:
            GitError: the range names no commit.
        """
        out_dir.mkdir(parents=True, exist_ok=True)
        out = self.out("format-patch", "--no-signature", "--full-index", "--binary", "-o", str(out_dir), rev_range)
        files = [Path(line) for line in out.splitlines() if line.strip()]
        if not files:
            raise GitError(f"'{rev_range}' names no commit to capture", where=str(self.path),
                           fix="give a range such as BASE..HEAD (see `git log BASE..HEAD`)")
        return files

    def commits_in(self, rev_range: str) -> list[tuple[str, str, str, str]]:
        """(sha, subject, author, body) of each commit in ``rev_range``, oldest first."""
        out = self.run("log", "--reverse", "--format=%H%x1f%s%x1f%an <%ae>%x1f%b%x1e", rev_range, strip=False)[1]
        rows = []
        for entry in out.split("\x1e"):
            if entry.strip():
                sha, subject, author, body = entry.strip("\n").split("\x1f", 3)
                rows.append((sha, subject, author, body.strip()))
        return rows

    def commits_with_trailer(self, rev_range: str, key: str, value: str) -> list[str]:
        """SHAs in ``rev_range`` (oldest first) whose message has the trailer ``key: value``."""
        fmt = f"%H%x1f%(trailers:key={key},valueonly,separator=%x1d)%x1e"
        out = self.run("log", "--reverse", f"--format={fmt}", rev_range, strip=False)[1]
        found = []
        for entry in out.split("\x1e"):
            if "\x1f" in entry:
                sha, values = entry.strip("\n").split("\x1f", 1)
                if value in [v.strip() for v in values.split("\x1d")]:
                    found.append(sha)
        return found

    def cherry_pick(self, commit: str) -> tuple[bool, list[str]]:
        """``git cherry-pick -x`` of ``commit``; on conflict it is aborted and the paths returned.

        Returns (picked, conflicted paths).
        """
        status, _, _ = self.run("-c", "rerere.enabled=false", "cherry-pick", "-x", "--allow-empty", commit,
                                ok_codes=(0, 1))
        if status == 0:
            return True, []
        conflicted = self.unmerged_paths()
        self.run("cherry-pick", "--abort", ok_codes=(0, 128))
        return False, conflicted

    def amend_message(self, message: str) -> str:
        """Replace HEAD's message (content unchanged); the new SHA."""
        with tempfile.NamedTemporaryFile("w", suffix=".msg", delete=False, encoding="utf-8") as handle:
            handle.write(message)
        try:
            self.run("commit", "--quiet", "--amend", "--no-verify", "-F", handle.name)
        finally:
            os.unlink(handle.name)
        return self.head()

    def message(self, rev: str) -> str:
        """The full commit message of ``rev``."""
        return self.run("log", "-1", "--format=%B", rev)[1]


@dataclass(frozen=True)
class ApplyOutcome:
    """What applying one patch did: ok, or the conflicted paths / ``.rej`` files left behind."""

    ok: bool
    conflicted: tuple[str, ...] = ()
    rejects: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()


def _lines(text: str) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def parse_merge_tree(out: str, *, ours: str, theirs: str) -> MergeTreeResult:
    """Parse ``git merge-tree --write-tree -z --messages`` output into conflicts with kinds.

    The format (git-merge-tree(1), "-z"): the tree OID, NUL; per conflicted index entry
    ``<mode> <oid> <stage>\\t<path>`` NUL; an empty entry; then messages as
    ``<n>`` NUL ``<path>`` x n NUL ``<type>`` NUL ``<message>`` NUL.
    """
    head, _, rest = out.partition("\0")
    tree = head.strip()
    parts = rest.split("\0")
    unmerged: list[str] = []
    i = 0
    while i < len(parts) and parts[i] != "":
        unmerged.append(parts[i].split("\t", 1)[1])
        i += 1
    i += 1
    kinds: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    while i < len(parts) and parts[i].isdigit():
        count = int(parts[i])
        paths = tuple(parts[i + 1: i + 1 + count])
        kind_type, message = parts[i + 1 + count], parts[i + 2 + count]
        i += 3 + count
        kind = _kind_of(kind_type, message, ours=ours)
        if kind is None:
            continue
        for path in paths:
            known = kinds.get(path)
            if known is None or _KIND_ORDER[kind] < _KIND_ORDER[known[0]]:
                kinds[path] = (kind, message.strip(), tuple(p for p in paths if p != path))
    conflicts = []
    for path in dict.fromkeys(unmerged):
        kind, message, related = kinds.get(path, ("other", "", ()))
        conflicts.append(Conflict(path, kind, message, related))
    return MergeTreeResult(tree, tuple(conflicts))


def _kind_of(kind_type: str, message: str, *, ours: str) -> str | None:
    if not kind_type.startswith("CONFLICT"):
        return None
    label = kind_type[len("CONFLICT ("):-1]
    if label == "contents":
        return "add/add" if "(add/add)" in message else "content"
    if label in ("modify/delete", "rename/delete"):
        if label == "modify/delete" and f"deleted in {ours} " in message:
            return "delete/modify"
        return label
    simple = {"binary": "binary", "rename/rename": "rename/rename", "file/directory": "file/directory",
              "distinct modes": "mode"}
    return simple.get(label, "other")


def open_repo(path: str | Path) -> GitRepo:
    """Open the repository at ``path``: its root must be ``path`` or contain it."""
    return GitRepo(path)
