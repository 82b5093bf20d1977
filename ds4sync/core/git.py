"""The one module that talks to git, through GitPython.

Small verbs that turn git's failures into messages a person can act on. Everything
else in ds4sync asks this module; nothing else runs git.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from ds4sync.core.errors import GitError
from ds4sync.core.gitpatch import ApplyOutcome, PatchVerbs
from ds4sync.core.mergetree import CONFLICT_KINDS, Conflict, MergeTreeResult, parse_merge_tree
from ds4sync.core.redact import redact_secrets

__all__ = ["CONFLICT_KINDS", "ApplyOutcome", "Conflict", "FileChange", "GitRepo", "MergeTreeResult", "parse_merge_tree"]

SHA_RE = re.compile(r"^[0-9a-f]{7,40}$")
CONFLICT_MARKER_RE = re.compile(r"^(<{7} |={7}$|>{7} )", re.MULTILINE)
_log = logging.getLogger("ds4sync.git")


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


class GitRepo(PatchVerbs):
    """A git repository or worktree, opened through GitPython.

    With ``search_parents``, ``path`` may be any folder inside the checkout and the
    checkout's top level is opened (as git itself does); otherwise ``path`` must be it.

    Raises:
        GitError: ``path`` is not inside a git repository.
    """

    def __init__(self, path: str | Path, *, search_parents: bool = False) -> None:
        path = Path(path)
        if not path.exists():
            raise GitError("folder does not exist", where=str(path), fix="check --repo")
        try:
            self._repo = git.Repo(path, search_parent_directories=search_parents)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
            raise GitError(
                "not a git repository", where=str(path), fix="pass --repo with the fork checkout's root"
            ) from exc
        if self._repo.bare:
            raise GitError("bare repositories are not supported", where=str(path), fix="point --repo at a checkout")
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
            fallback = (
                {}
                if configured
                else {
                    "GIT_AUTHOR_NAME": "ds4sync",
                    "GIT_AUTHOR_EMAIL": "ds4sync@localhost",
                    "GIT_COMMITTER_NAME": "ds4sync",
                    "GIT_COMMITTER_EMAIL": "ds4sync@localhost",
                }
            )
            self._ident_env = {**os.environ, **fallback}
        return self._ident_env

    # -- plumbing ---------------------------------------------------------------------------
    def run(
        self, *args: str, ok_codes: Iterable[int] = (0,), strip: bool = True, env: dict[str, str] | None = None
    ) -> tuple[int, str, str]:
        """Run ``git <args>`` here; return (status, stdout, stderr) for the accepted codes.

        Raises:
            GitError: git exited with a code outside ``ok_codes``.
        """
        _log.debug("git %s  (in %s)", redact_secrets(" ".join(args)), self.path)
        status, out, err = self.git.execute(
            ["git", *args], with_extended_output=True, with_exceptions=False, strip_newline_in_stdout=strip, env=env
        )
        if status not in tuple(ok_codes):
            first = (err or out).strip().splitlines()
            raise GitError(
                f"`git {' '.join(args[:4])}` failed: {first[0] if first else f'exit {status}'}", where=str(self.path)
            )
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
        status, out, _ = self.run(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", ok_codes=(0, 1, 128)
        )
        return out.strip() if status == 0 and out.strip() else None

    def branch_head(self, branch: str) -> str:
        """The SHA at the tip of local branch ``branch``.

        Raises:
            GitError: no such local branch.
        """
        sha = self.resolve_commit(f"refs/heads/{branch}")
        if sha is None:
            raise GitError(
                f"no local branch named '{branch}'",
                where=str(self.path),
                fix="pass --branch with an existing branch (see `git branch`)",
            )
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
            raise GitError(
                f"cannot fetch '{ref}' from {source} ({last})",
                where=str(self.path),
                fix="check the upstream remote/URL in ds4sync.yaml and that the ref exists",
            )

    def remote_head(self, source: str, ref: str) -> str | None:
        """The SHA that ``ref`` (a full ref, e.g. ``refs/heads/main``) names on ``source``, or None when absent.

        Asks the remote (``git ls-remote``), fetching no objects.

        Raises:
            GitError: the remote cannot be reached.
        """
        status, out, err = self.run("ls-remote", "--end-of-options", source, ref, ok_codes=(0, 2, 128))
        if status == 128:
            last = (err.strip().splitlines() or ["ls-remote failed"])[-1]
            raise GitError(f"cannot reach {source} ({last})", where=str(self.path), fix="check the remote's URL")
        for line in out.splitlines():
            sha, _, name = line.partition("\t")
            if name == ref:
                return sha
        return None

    def push(self, remote: str, local: str, remote_ref: str, *, expect: str | None) -> tuple[bool, str]:
        """Push commit ``local`` to ``remote_ref`` on ``remote``, only if that ref is at ``expect``.

        ``expect`` is the SHA the remote ref must still have (``--force-with-lease``), or None when
        it must not exist yet. Hooks of the user are not run. Returns (pushed, git's last line).
        """
        lease = f"--force-with-lease={remote_ref}:{expect or ''}"
        status, out, err = self.run(
            "-c",
            "core.hooksPath=/dev/null",
            "push",
            "--porcelain",
            lease,
            "--end-of-options",
            remote,
            f"{local}:{remote_ref}",
            ok_codes=(0, 1, 128),
        )
        lines = (err.strip() or out.strip()).splitlines()
        return status == 0, (lines[-1] if lines else f"exit {status}")

    def rev_list(self, include: str, exclude: str, *, limit: int = 100_000) -> list[str]:
        """SHAs of the commits reachable from ``include`` and not from ``exclude`` (newest first)."""
        out = self.out("rev-list", f"--max-count={limit}", include, f"^{exclude}", "--")
        return out.split()

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
            changes[path] = FileChange(
                path, None if added == "-" else int(added), None if deleted == "-" else int(deleted)
            )
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
        status, out, err = self.run(
            "merge-tree", "--write-tree", "-z", "--messages", ours, theirs, ok_codes=(0, 1, 128), strip=False
        )
        if status == 128:
            raise GitError(
                f"git merge-tree failed ({err.strip() or out.strip()})",
                where=str(self.path),
                fix="git >= 2.38 is required",
            )
        return parse_merge_tree(out, ours=ours, theirs=theirs)

    def commit_tree(self, tree: str, *, parents: Sequence[str], message: str) -> str:
        """A commit object of ``tree`` with ``parents`` (no ref, no work tree); returns its SHA."""
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return self.run(*args, "-m", message, env=self._identity_env())[1].strip()

    def apply_to_tree(self, tree: str, patches: Sequence[Path]) -> str | None:
        """Apply ``patches`` in order to ``tree`` in a temporary index; the new tree, or None if one fails.

        No work tree and no real index are touched (``GIT_INDEX_FILE`` names a private file).
        """
        with tempfile.TemporaryDirectory(prefix="ds4sync-index-") as folder:
            env = {**self._identity_env(), "GIT_INDEX_FILE": str(Path(folder) / "index")}
            self.run("read-tree", tree, env=env)
            for patch in patches:
                if self.run("apply", "--cached", str(patch), ok_codes=(0, 1, 128), env=env)[0] != 0:
                    return None
            return self.run("write-tree", env=env)[1].strip()

    # -- worktrees --------------------------------------------------------------------------
    def worktree_add(self, path: Path, branch: str, start: str) -> GitRepo:
        """Create ``branch`` at ``start`` and check it out in a new worktree at ``path``.

        Raises:
            GitError: the branch already exists or the folder is taken.
        """
        if self.ref_exists(f"refs/heads/{branch}"):
            raise GitError(
                f"branch '{branch}' already exists",
                where=str(self.path),
                fix="abort the earlier run or set merge.sync_branch to a new name",
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        self.run("worktree", "add", "--quiet", "-b", branch, str(path), start)
        return GitRepo(path)

    def worktree_add_detached(self, path: Path, start: str) -> GitRepo:
        """Check out ``start`` (detached, no branch) in a new worktree at ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.run("worktree", "add", "--quiet", "--detach", str(path), start)
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

    def tracked_changes(self) -> list[str]:
        """Paths whose index or work-tree content differs from HEAD (untracked files are not counted).

        The check git's ``receive.denyCurrentBranch=updateInstead`` makes before it moves a
        checked-out branch (``update-index --refresh``, then ``diff-index HEAD``).
        """
        self.run("update-index", "-q", "--ignore-submodules", "--refresh", ok_codes=(0, 1))
        out = self.run("diff-index", "--name-only", "-z", "--ignore-submodules", "HEAD", "--", strip=False)[1]
        return [name for name in out.split("\0") if name]

    def update_checkout(self, old: str, new: str) -> None:
        """Move this checkout's index and files from commit ``old`` to ``new`` (``git read-tree -u -m``).

        Raises:
            GitError: git refused, e.g. an untracked file would be overwritten; nothing changed.
        """
        self.run("read-tree", "-u", "-m", "--end-of-options", old, new)

    def delete_branch(self, branch: str) -> None:
        """Delete local branch ``branch`` if it exists."""
        if self.ref_exists(f"refs/heads/{branch}"):
            self.run("branch", "-D", branch)

    # -- merging in a worktree --------------------------------------------------------------
    def merge_no_commit(self, sha: str, *, rerere: bool = True) -> bool:
        """``git merge --no-ff --no-commit`` of ``sha`` into HEAD, rerere on; True when clean."""
        args = [
            "-c",
            f"rerere.enabled={'true' if rerere else 'false'}",
            "-c",
            "rerere.autoupdate=true",
            "-c",
            "merge.conflictStyle=merge",
            "merge",
            "--no-ff",
            "--no-commit",
            "--no-edit",
            "--quiet",
            sha,
        ]
        status, out, err = self.run(*args, ok_codes=(0, 1, 2, 128), env=self._identity_env())
        if status in (2, 128):
            raise GitError(
                f"git merge could not start ({(err or out).strip().splitlines()[-1]})",
                where=str(self.path),
                fix="look at the worktree's state",
            )
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
            _status, merged, _ = self.run("merge-file", "-p", "--union", *files, ok_codes=range(0, 127), strip=False)
        (self.path / path).write_text(merged)
        self.run("add", "--", path)
        return True

    def blob(self, spec: str) -> bytes:
        """The exact bytes of a blob (``<rev>:<path>`` or ``:<stage>:<path>``)."""
        data = self.git.execute(
            ["git", "cat-file", "blob", spec], stdout_as_string=False, strip_newline_in_stdout=False
        )
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
            self.run(
                "-c",
                "rerere.enabled=true",
                "commit",
                "--quiet",
                "--no-verify",
                "-F",
                handle.name,
                env=self._identity_env(),
            )
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
