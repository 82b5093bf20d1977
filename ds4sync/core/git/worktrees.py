"""Worktrees and the checkout: adding and removing worktrees, HEAD moves, the work tree's state, commits."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from ds4sync.core.errors import GitError
from ds4sync.core.git.env import check_user_ref
from ds4sync.core.git.merge import MergeVerbs
from ds4sync.core.git.patch import PatchVerbs
from ds4sync.core.git.refs import RefVerbs


class WorktreeVerbs(PatchVerbs, MergeVerbs, RefVerbs):
    """Worktree and checkout verbs of :class:`~ds4sync.core.git.GitRepo`."""

    def worktree_add(self, path: Path, branch: str, start: str) -> Self:
        """Create ``branch`` at ``start`` and check it out in a new worktree at ``path``.

        The user's hooks (post-checkout...) do not run.

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
        self.run("worktree", "add", "--quiet", "-b", branch, "--end-of-options", str(path), start)
        return type(self)(path)

    def worktree_add_detached(self, path: Path, start: str) -> Self:
        """Check out ``start`` (detached, no branch) in a new worktree at ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.run("worktree", "add", "--quiet", "--detach", "--end-of-options", str(path), start)
        return type(self)(path)

    def worktrees(self) -> dict[str, dict[str, str]]:
        """Every worktree of this repository: path -> its ``git worktree list --porcelain`` fields."""
        out = self.run("worktree", "list", "--porcelain", "-z", strip=False)[1]
        found: dict[str, dict[str, str]] = {}
        current: dict[str, str] | None = None
        for field in out.split("\0"):
            if not field:
                current = None
                continue
            key, _, value = field.partition(" ")
            if key == "worktree":
                current = found.setdefault(value, {})
            elif current is not None:
                current[key] = value
        return found

    def main_worktree(self) -> Self:
        """The repository's main worktree (first in ``git worktree list``); this checkout when that one is
        bare or its folder is gone."""
        main = next(iter(self.worktrees()), None)
        if main is None or Path(main).resolve() == self.path.resolve() or not (Path(main) / ".git").exists():
            return self
        return type(self)(Path(main))

    def worktree_remove(self, path: Path) -> None:
        """Remove the worktree at ``path``, even when locked or its folder is gone; its changes are lost.

        Only that worktree is touched: other worktrees (the user's own, missing or not) are
        never pruned.
        """
        from ds4sync.core.fault import point

        # git deletes the folder first and its own entry last: a kill in between (or a half-deleted folder)
        # leaves an entry whose folder lacks .git, which `git worktree remove` then refuses ("validation
        # failed ... '.git' does not exist") for good. So the folder moves aside first (one rename: every kill
        # leaves it whole, or gone from ``path``); git then drops only its entry; the moved folder goes last.
        aside = path.with_name(f".{path.name}.removing")
        if aside.exists():  # left by an earlier, killed removal
            shutil.rmtree(aside, ignore_errors=True)
        registered = str(path) in self.worktrees() or str(path.resolve()) in self.worktrees()
        if path.is_dir() and not path.is_symlink():
            os.rename(path, aside)
        point("worktree-remove.moved-aside")
        if registered:
            self.run("worktree", "remove", "--force", "--force", "--end-of-options", str(path), ok_codes=(0, 128))
        if str(path) in self.worktrees() or str(path.resolve()) in self.worktrees():
            raise GitError(
                "git could not remove this worktree's entry",
                where=str(path),
                fix=f"`git worktree remove --force --force {path}` (its folder is gone: git drops only the entry)",
            )
        point("worktree-remove.entry-removed")
        shutil.rmtree(aside, ignore_errors=True)
        if path.exists() and not (path / ".git").exists():
            shutil.rmtree(path, ignore_errors=True)

    def checked_out_in(self, branch: str) -> str | None:
        """The worktree path where local ``branch`` is checked out, or None."""
        for path, fields in self.worktrees().items():
            if fields.get("branch") == f"refs/heads/{branch}":
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

    def detach_at(self, commit: str) -> None:
        """Check out ``commit`` detached here: files, index and HEAD move in one git command.

        Raises:
            GitError: git refused (an untracked file would be overwritten, local changes); nothing changed.
        """
        check_user_ref(commit, what="commit", where=str(self.path))  # checkout takes no --end-of-options here
        self.run("checkout", "--quiet", "--no-recurse-submodules", "--detach", commit)

    def attach_to(self, branch: str) -> None:
        """Point this checkout's HEAD at local ``branch`` without touching index or files (``symbolic-ref``)."""
        check_user_ref(branch, what="branch", where=str(self.path))
        self.run("symbolic-ref", "-m", "ds4sync", "HEAD", f"refs/heads/{branch}")

    def delete_branch(self, branch: str) -> None:
        """Delete local branch ``branch`` if it exists."""
        if self.ref_exists(f"refs/heads/{branch}"):
            self.run("branch", "-D", "--", branch)

    def untracked_paths(self, *, exclude: Sequence[Path] = ()) -> list[str]:
        """Files git does not track and does not ignore (``git ls-files --others --exclude-standard``),
        sorted; those under a folder of ``exclude`` (resolved paths) are left out."""
        out = self.run("ls-files", "-z", "--others", "--exclude-standard", strip=False)[1]
        found = sorted(filter(None, out.split("\0")))
        if not exclude:
            return found
        return [rel for rel in found if not any((self.path / rel).resolve().is_relative_to(x) for x in exclude)]

    def worktree_tree(self, *, exclude: Sequence[Path] = (), untracked: bool = True) -> tuple[str, list[str]]:
        """The tree id of the work tree as it is, and the untracked files in it.

        The tree holds the tracked files with their changes (staged or not, deletions and
        ``git add -N`` entries included) and, with ``untracked``, the files git neither tracks nor
        ignores (those under ``exclude`` left out): what a command run here sees, minus ignored files.
        Without ``untracked`` it is the tree of the tracked files alone and the list is empty.
        Written through a private copy of the index (``git add --update``, then the untracked paths,
        literally); no ref, no commit, no real index and no work tree file is touched, so it needs no
        identity and works where ``git stash create`` refuses (an intent-to-add entry).
        """
        untracked_paths = self.untracked_paths(exclude=exclude) if untracked else []
        real = Path(self.out("rev-parse", "--path-format=absolute", "--git-path", "index"))
        with tempfile.TemporaryDirectory(prefix="ds4sync-index-") as folder:
            index = Path(folder) / "index"
            if real.is_file():
                shutil.copyfile(real, index)  # its stat data spares git re-reading unchanged files
            env = {"GIT_INDEX_FILE": str(index), "GIT_LITERAL_PATHSPECS": "1"}
            self.run("add", "--update", env=env)
            if untracked_paths:
                paths = "\0".join(untracked_paths).encode()
                self.run_bytes("add", "--pathspec-from-file=-", "--pathspec-file-nul", env=env, stdin=paths)
            return self.run("write-tree", env=env)[1].strip(), untracked_paths

    def unstaged_paths(self) -> list[str]:
        """Tracked files whose work-tree content differs from the index, and untracked files (not ignored)."""
        out = self.run("diff", "--name-only", "-z", strip=False)[1]
        changed = {p for p in out.split("\0") if p}
        unmerged = set(self.unmerged_paths())
        return sorted((changed - unmerged) | set(self.untracked()))

    def clear_stale_index_lock(self) -> str | None:
        """Remove this checkout's ``index.lock`` when no live process holds it open: the one rule for stale
        locks. A git killed while it held the lock (inside ``git commit``'s rename of ``index.lock`` to
        ``index``, or mid-merge) leaves it, and every later git command that writes the index fails
        ("Unable to create '.../index.lock': File exists", git never removes it itself). A git still at
        work (``git commit`` waiting for its editor) holds the file open and is left alone.

        Returns a line saying what was removed, or None when there was no lock.

        Raises:
            GitError: a live process holds the lock (its pid): wait for it, ds4sync does not break it.
        """
        from ds4sync.core.fault import point
        from ds4sync.core.proc import open_by

        lock = self.git_dir / "index.lock"
        if not lock.exists():
            return None
        holders = [pid for pid in open_by(lock) if pid != os.getpid()]
        if holders:
            raise GitError(
                f"index.lock is held by a running process (pid {', '.join(map(str, holders))})",
                where=str(lock),
                fix="let that git command finish (or end it), then run ds4sync again",
            )
        point("stale-lock.before-unlink")
        lock.unlink(missing_ok=True)
        return f"removed a stale {lock} (no live process held it: a git command was killed holding it)"

    def commit(self, message: str, *, point: str = "commit") -> str:
        """Commit the index with ``message`` (no hooks, no rerere) and return the new SHA.

        ``point`` names the commit for fault injection inside git (:func:`ds4sync.core.fault.inside_git`).
        """
        from ds4sync.core.fault import inside_git

        with tempfile.NamedTemporaryFile("w", suffix=".msg", delete=False, encoding="utf-8") as handle:
            handle.write(message)
        try:
            self.run(
                *inside_git(point),
                "-c",
                "rerere.enabled=false",
                "commit",
                "--quiet",
                "--no-verify",
                "--cleanup=verbatim",
                "-F",
                handle.name,
                env=self._identity_env(),
            )
        finally:
            os.unlink(handle.name)
        return self.head()

    def status_porcelain(self) -> list[str]:
        """``git status --porcelain`` lines (empty for a clean checkout)."""
        return [line for line in self.out("status", "--porcelain").splitlines() if line]

    def reset_hard(self, rev: str) -> None:
        """Index and tracked files back to commit ``rev``, and HEAD's branch (or HEAD) moved there; local
        changes to tracked files are lost (``git reset --hard``). Untracked files stay: :meth:`clean_untracked`."""
        self.run("reset", "--quiet", "--hard", rev, "--")

    def clean_untracked(self, *, ignored: bool = False) -> None:
        """Delete the untracked files and folders of the work tree (``git clean -fd``); with ``ignored``,
        the ignored ones too (``-x``: build output, caches)."""
        self.run("clean", "-fdxq" if ignored else "-fdq")

    def checkout_branch(self, branch: str) -> None:
        """Check out local ``branch`` here: files, index and HEAD move in one git command.

        Raises:
            GitError: no such branch, or git refused (an untracked file would be overwritten, local changes).
        """
        check_user_ref(branch, what="branch", where=str(self.path))
        self.run("checkout", "--quiet", "--no-recurse-submodules", branch, "--")

    def checkout_new_branch(self, branch: str, start: str) -> None:
        """Create local ``branch`` at ``start`` and check it out here.

        Raises:
            GitError: the branch exists, ``start`` names no commit, or git refused.
        """
        check_user_ref(branch, what="branch", where=str(self.path))
        check_user_ref(start, what="start", where=str(self.path))
        self.run("checkout", "--quiet", "--no-recurse-submodules", "-b", branch, start, "--")

    def check_out_tree_unstaged(self, tree: str) -> None:
        """Make the work tree's files exactly those of ``tree`` (``git read-tree --reset -u``), then reset the
        index to HEAD: the files ``tree`` differs in show as unstaged changes against HEAD."""
        self.run("read-tree", "--reset", "-u", "--end-of-options", tree)
        self.run("reset", "--quiet")

    def has_uncommitted(self, pathspecs: Sequence[str] = ()) -> bool:
        """Whether anything under ``pathspecs`` (git pathspecs; the whole work tree when empty) differs from
        HEAD: staged or unstaged changes, or untracked files that are not ignored (``git status --porcelain``)."""
        args = ("status", "--porcelain", "--untracked-files=normal", "--", *(pathspecs or ["."]))
        return bool(self.out(*args))

    def add_paths(self, paths: Sequence[str]) -> None:
        """Stage the work-tree content of ``paths`` (``git add``; a folder: every file under it).

        Raises:
            GitError: a path matches no file.
        """
        self.run("add", "--", *paths)

    def remove_paths(self, paths: Sequence[str]) -> None:
        """Delete ``paths`` from the work tree and the index (``git rm``).

        Raises:
            GitError: a path is not tracked.
        """
        self.run("rm", "--quiet", "--", *paths)

    def move_path(self, old: str, new: str) -> None:
        """Rename the tracked ``old`` to ``new`` in the work tree and the index (``git mv``)."""
        self.run("mv", "--", old, new)

    def set_config(self, key: str, value: str) -> None:
        """Set ``key`` to ``value`` in this repository's own config (``git config``, never the user's)."""
        self.run("config", "--local", "--", key, value)

    def add_remote(self, name: str, url: str) -> None:
        """Add the remote ``name`` fetching from ``url`` (a URL or a folder).

        Raises:
            GitError: the remote exists, or the name is no valid remote name.
        """
        self.run("remote", "add", "--", name, url)

    def commit_as(self, message: str, *, identity: Mapping[str, str], date: str | None = None) -> str:
        """Commit the index with ``message`` as ``identity`` (``GIT_AUTHOR_*``/``GIT_COMMITTER_*`` values),
        even when nothing changed; ``date`` (ISO 8601) is both the author and the committer date. Returns
        the new SHA. For building sample histories: no hooks, and the message is cleaned up as git does."""
        env = dict(identity)
        if date:
            env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
        self.run("commit", "--quiet", "--allow-empty", "--no-verify", "-m", message, env=env)
        return self.head()

    def diff_check(self, base: str) -> DiffCheck:
        """``git diff --check`` of the work tree against ``base``: whitespace errors and conflict markers
        in what changed since ``base``, as git reports them."""
        status, out, err = self.run("diff", "--check", "--end-of-options", base, "--", ok_codes=(0, 1, 2), strip=False)
        return DiffCheck(status=status, out=out, err=err, command=("git", "diff", "--check", base))


@dataclass(frozen=True)
class DiffCheck:
    """What ``git diff --check`` said: its exit status (0 clean, 2 problems), stdout (one problem a line, then
    the offending line), stderr, and the command line a person would type to see it again."""

    status: int
    out: str
    err: str
    command: tuple[str, ...]
