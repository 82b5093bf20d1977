"""The one module that talks to git.

Every git command ds4sync runs goes through :meth:`GitRepo.run` with :func:`git_env`: the
caller's ``GIT_*`` variables are dropped (a git alias or hook exports ``GIT_DIR``,
``GIT_INDEX_FILE``, ``GIT_WORK_TREE``), messages are in the C locale, and the user's hooks are
off (``core.hooksPath=/dev/null``). GitPython cannot remove variables from the environment it
passes on, so this module runs git itself; nothing else in ds4sync runs git.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ds4sync.core.errors import GitError
from ds4sync.core.gitlines import LineVerbs
from ds4sync.core.gitpatch import ApplyOutcome, PatchVerbs
from ds4sync.core.mergetree import CONFLICT_KINDS, Conflict, MergeTreeResult, parse_merge_tree
from ds4sync.core.proc import not_started, without_git_env
from ds4sync.core.redact import redact_secrets

__all__ = [
    "CONFLICT_KINDS",
    "ApplyOutcome",
    "Conflict",
    "FileChange",
    "GitRepo",
    "MergeTreeResult",
    "check_user_ref",
    "clone_repository",
    "git_env",
    "init_repository",
    "parse_merge_tree",
    "pinned_env",
]

SHA_RE = re.compile(r"^[0-9a-f]{7,40}$")
FULL_SHA_RE = re.compile(r"^[0-9a-f]{40}$")

#: ``-c`` options every ds4sync git command gets: the user's hooks never run for our commands.
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
DEFAULT_MARKER_SIZE = 7
_log = logging.getLogger("ds4sync.git")


def git_env(overrides: Mapping[str, str] | None = None, *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git command ds4sync runs.

    ``base`` (default: this process's environment) minus every ``GIT_*`` variable outside
    :data:`GIT_ENV_ALLOW`, with ``LC_ALL=C`` and no ``LANGUAGE`` (git's messages are parsed),
    then ``overrides`` (ds4sync's own ``GIT_*`` settings, e.g. an identity or a rerere dir).
    """
    env = without_git_env(os.environ if base is None else base)
    env.pop("LANGUAGE", None)
    env["LC_ALL"] = "C"
    env.update({k: str(v) for k, v in (overrides or {}).items()})
    return env


#: Variables by which a caller (a git alias or hook) points git at some repository.
_LOCATING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")


def _literal(paths: Iterable[str]) -> list[str]:
    """File paths as pathspecs that match only themselves (a ``[`` or ``*`` in a name is no glob)."""
    return [f":(literal){path}" for path in paths]


def pinned_env(work_tree: Path) -> dict[str, str]:
    """Environment overrides that pin a GitPython ``Repo`` of the plain checkout ``work_tree`` to itself.

    GitPython passes the whole process environment on and can only add to it, so a leaked
    ``GIT_DIR`` would redirect its commands; these values name this repository instead, and
    blank the variables that widen what git reads (alternates, namespace, prefix).
    """
    git_dir = work_tree / ".git"
    return {
        "GIT_DIR": str(git_dir),
        "GIT_WORK_TREE": str(work_tree),
        "GIT_INDEX_FILE": str(git_dir / "index"),
        "GIT_OBJECT_DIRECTORY": str(git_dir / "objects"),
        "GIT_COMMON_DIR": str(git_dir),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": "",
        "GIT_NAMESPACE": "",
        "GIT_PREFIX": "",
        "LC_ALL": "C",
    }


def git_version() -> str:
    """git's version (``2.43.0``), as ``git --version`` says in the clean environment.

    Raises:
        GitError: git is missing or did not answer.
    """
    status, out, err = _git(Path.cwd(), "--version")
    if status != 0:
        raise GitError(f"git --version failed: {err.decode('utf-8', 'replace').strip()}")
    return out.decode("utf-8", "replace").strip().removeprefix("git version ")


def init_repository(path: Path, *, branch: str = "main") -> None:
    """``git init`` a new repository at ``path`` in the clean environment (never a leaked ``GIT_DIR``).

    Raises:
        GitError: git refused (the folder is not writable...).
    """
    path.mkdir(parents=True, exist_ok=True)
    status, _, err = _git(path, "init", "--quiet", f"--initial-branch={branch}", "--end-of-options", str(path))
    if status != 0:
        raise GitError(f"git init failed: {err.decode('utf-8', 'replace').strip()}", where=str(path))


def clone_repository(source: Path, dest: Path, *, origin: str = "origin") -> None:
    """``git clone`` of the local repository ``source`` into ``dest`` in the clean environment.

    Raises:
        GitError: git refused.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    status, _, err = _git(
        dest.parent, "clone", "--quiet", "--origin", origin, "--end-of-options", str(source), str(dest)
    )
    if status != 0:
        raise GitError(f"git clone failed: {err.decode('utf-8', 'replace').strip()}", where=str(dest))


def check_user_ref(ref: str, *, what: str = "ref", where: str | None = None) -> str:
    """Refuse a user-supplied ref that git could read as an option or that names nothing.

    Returns ``ref`` unchanged.

    Raises:
        GitError: ``ref`` is empty, starts with ``-``, or holds whitespace or control characters.
    """
    if not ref or not ref.strip():
        raise GitError(f"empty {what}", where=where, fix=f"give the {what} by name or SHA")
    if ref.startswith("-"):
        raise GitError(
            f"{what} '{ref}' starts with '-' (git would read it as an option)",
            where=where,
            fix=f"give the {what} by name or SHA (use refs/heads/... for a branch whose name starts with '-')",
        )
    if any(ch.isspace() or ord(ch) < 32 or ch == "\x7f" for ch in ref):
        raise GitError(f"{what} '{ref!r}' holds whitespace or control characters", where=where, fix="check the name")
    return ref


def remote_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a git remote's name (one that git could read as an option, or that no
    ``refs/remotes/<name>/...`` ref can carry, git-check-ref-format(1)), or None for a good name (``.`` is the
    repository itself)."""
    if name == ".":
        return None
    if not name:
        return "is empty"
    if name.startswith("-"):
        return "starts with '-' (git would read it as an option)"
    bad = sorted({ch for ch in name if ch.isspace() or ord(ch) < 32 or ch in "\x7f~^:?*[\\"})
    if bad:
        return f"holds {', '.join(repr(ch) for ch in bad)}, which no ref name may hold"
    parts = name.split("/")
    if (
        ".." in name
        or "@{" in name
        or name == "@"
        or any(not p or p.startswith(".") or p.endswith(".lock") for p in parts)
    ):
        return "is not a valid ref name component (git check-ref-format)"
    if name.endswith("."):
        return "ends with '.', which no ref name may"
    return None


@dataclass(frozen=True)
class FileChange:
    """Lines added and deleted in one file between two commits (None for binary files).

    ``old_path`` is the path at the base when git detected a rename (else None).
    """

    path: str
    added: int | None
    deleted: int | None
    old_path: str | None = None

    @property
    def lines(self) -> int:
        """Lines touched (added + deleted; 0 for binary files)."""
        return (self.added or 0) + (self.deleted or 0)


class GitRepo(PatchVerbs, LineVerbs):
    """A git repository or worktree (its top-level folder).

    With ``search_parents``, ``path`` may be any folder inside the checkout and the
    checkout's top level is opened (as git itself does); otherwise ``path`` must be it.

    Raises:
        GitError: ``path`` is not the top of a git checkout (or inside one, with
            ``search_parents``), or it is bare.
    """

    def __init__(self, path: str | Path, *, search_parents: bool = False) -> None:
        path = Path(path)
        if not path.exists():
            raise GitError("folder does not exist", where=str(path), fix="check --repo")
        status, out, _ = _git(
            path, "rev-parse", "--is-bare-repository", "--absolute-git-dir", "--git-common-dir", "--show-toplevel"
        )
        lines = out.decode("utf-8", "surrogateescape").splitlines()
        if status == 0 and lines and lines[0] == "true":
            raise GitError("bare repositories are not supported", where=str(path), fix="point --repo at a checkout")
        if status != 0 or len(lines) < 4 or (not search_parents and Path(lines[3]).resolve() != path.resolve()):
            raise GitError("not a git repository", where=str(path), fix="pass --repo with the fork checkout's root")
        self.path = Path(lines[3]).resolve()
        self._git_dir = Path(lines[1]).resolve()
        common = Path(lines[2])
        self._common_dir = (common if common.is_absolute() else path.resolve() / common).resolve()  # relative to cwd
        self._ident_env: dict[str, str] | None = None
        self._merge_trees: dict[tuple[str, str], MergeTreeResult] = {}

    def _identity_env(self) -> dict[str, str]:
        """Environment overrides for commands that write commits or reflogs.

        The user's configured identity wins; a checkout without one (a fresh CI or
        cron clone) commits as ``ds4sync``.
        """
        if self._ident_env is None:
            configured = self.run("config", "user.email", ok_codes=(0, 1))[0] == 0
            self._ident_env = (
                {}
                if configured or "GIT_COMMITTER_EMAIL" in os.environ
                else {
                    "GIT_AUTHOR_NAME": "ds4sync",
                    "GIT_AUTHOR_EMAIL": "ds4sync@localhost",
                    "GIT_COMMITTER_NAME": "ds4sync",
                    "GIT_COMMITTER_EMAIL": "ds4sync@localhost",
                }
            )
        return self._ident_env

    # -- plumbing ---------------------------------------------------------------------------
    def run(
        self,
        *args: str,
        ok_codes: Iterable[int] = (0,),
        strip: bool = True,
        env: dict[str, str] | None = None,
    ) -> tuple[int, str, str]:
        """Run ``git <args>`` here with :func:`git_env`; return (status, stdout, stderr).

        ``env`` holds overrides on top of the clean environment. One trailing newline of
        stdout is dropped unless ``strip`` is False.

        Raises:
            GitError: git exited with a code outside ``ok_codes``.
        """
        _log.debug("git %s  (in %s)", redact_secrets(" ".join(args)), self.path)
        status, out_b, err_b = self.run_bytes(*args, ok_codes=ok_codes, env=env)
        out = out_b.decode("utf-8", "surrogateescape")
        if strip and out.endswith("\n"):
            out = out[:-1]
        return status, out, err_b.decode("utf-8", "replace")

    def run_bytes(
        self, *args: str, ok_codes: Iterable[int] = (0,), env: dict[str, str] | None = None, stdin: bytes | None = None
    ) -> tuple[int, bytes, bytes]:
        """Like :meth:`run`, with stdout and stderr as bytes (and optional ``stdin``)."""
        status, out, err = _git(self.path, *args, env=env, stdin=stdin)
        if status not in tuple(ok_codes):
            text = err.decode("utf-8", "replace") or out.decode("utf-8", "replace")
            first = text.strip().splitlines()
            shown = " ".join(a for a in args[:5] if not a.startswith("core.hooksPath"))
            raise GitError(f"`git {shown}` failed: {first[0] if first else f'exit {status}'}", where=str(self.path))
        return status, out, err

    def out(self, *args: str) -> str:
        """Stdout of ``git <args>``, which must succeed."""
        return self.run(*args)[1]

    @property
    def git_dir(self) -> Path:
        """This checkout's own git dir (per-worktree)."""
        return self._git_dir

    @property
    def common_dir(self) -> Path:
        """The git dir shared by all worktrees (where refs and objects live)."""
        return self._common_dir

    def is_shallow(self) -> bool:
        """Whether this is a shallow clone (history cut off)."""
        return self.out("rev-parse", "--is-shallow-repository").strip() == "true"

    def partial_clone_remote(self) -> str | None:
        """The promisor remote of a partial (e.g. blob-less) clone, or None for a full clone."""
        status, out, _ = self.run("config", "--get", "extensions.partialClone", ok_codes=(0, 1))
        if status == 0 and out.strip():
            return out.strip()
        status, out, _ = self.run("config", "--get-regexp", r"^remote\..*\.promisor$", ok_codes=(0, 1))
        for line in out.splitlines() if status == 0 else ():
            key, _, value = line.partition(" ")
            if value.strip().lower() in ("true", "yes", "on", "1"):
                return key[len("remote.") : -len(".promisor")]
        return None

    # -- refs -------------------------------------------------------------------------------
    def resolve_commit(self, ref: str) -> str | None:
        """The full SHA that ``ref`` names, or None when it names no commit here (or starts with ``-``)."""
        if not ref or ref.startswith("-"):
            return None
        status, out, _ = self.run(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", ok_codes=(0, 1, 128)
        )
        return out.strip() if status == 0 and out.strip() else None

    def branch_head(self, branch: str) -> str:
        """The SHA at the tip of local branch ``branch``.

        Raises:
            GitError: no such local branch.
        """
        check_user_ref(branch, what="branch", where=str(self.path))
        sha = self.resolve_commit(f"refs/heads/{branch}")
        if sha is None:
            tracking = sorted(
                ref.removeprefix("refs/remotes/")
                for ref in self.out("for-each-ref", "--format=%(refname)", "refs/remotes/").splitlines()
                if ref.endswith(f"/{branch}") and ref.count("/") == 3
            )
            fix = (
                f"make it from {tracking[0]}: `git branch {branch} {tracking[0]}` (or pass --branch with another)"
                if tracking
                else "pass --branch with an existing branch (see `git branch`)"
            )
            raise GitError(f"no local branch named '{branch}'", where=str(self.path), fix=fix)
        return sha

    def object_type(self, spec: str) -> str | None:
        """git's type of the object ``spec`` names (commit, tree, blob, tag), or None when there is none."""
        status, out, _ = self.run("cat-file", "-t", "--end-of-options", spec, ok_codes=(0, 1, 128))
        return out.strip() if status == 0 and out.strip() else None

    def current_branch(self) -> str | None:
        """The checked-out branch name, or None on a detached HEAD."""
        status, out, _ = self.run("symbolic-ref", "--quiet", "--short", "HEAD", ok_codes=(0, 1, 128))
        return out.strip() if status == 0 else None

    def head(self) -> str:
        """The SHA of HEAD."""
        return self.out("rev-parse", "HEAD")

    def commits_with_prefix(self, prefix: str) -> list[str]:
        """Every commit whose SHA starts with ``prefix`` (an abbreviated SHA, possibly ambiguous)."""
        status, out, _ = self.run("rev-parse", f"--disambiguate={prefix}", ok_codes=(0, 1, 128))
        shas = [line.strip() for line in out.splitlines() if line.strip()] if status == 0 else []
        return [sha for sha in shas if self.out("cat-file", "-t", sha) == "commit"]

    def is_ignored(self, path: str) -> bool:
        """Whether git ignores ``path`` (relative to the work tree) by the repository's ignore rules."""
        return self.run("check-ignore", "-q", "--no-index", "--", path, ok_codes=(0, 1))[0] == 0

    def ref_exists(self, ref: str) -> bool:
        """Whether the full ref name exists."""
        return self.run("show-ref", "--verify", "--quiet", "--", ref, ok_codes=(0, 1))[0] == 0

    def update_ref(self, ref: str, sha: str, *, message: str = "ds4sync") -> None:
        """Point ``ref`` at ``sha`` (creating it)."""
        self.run("update-ref", "-m", message, "--", ref, sha)

    def delete_ref(self, ref: str) -> None:
        """Delete ``ref`` if it exists."""
        if self.ref_exists(ref):
            self.run("update-ref", "-d", "--", ref)

    # -- remotes ----------------------------------------------------------------------------
    def remote_url(self, name: str) -> str | None:
        """The fetch URL of remote ``name``, or None when there is no such remote."""
        if not name or name.startswith("-"):
            return None
        status, out, _ = self.run("remote", "get-url", "--", name, ok_codes=(0, 2, 128))
        return out.strip() if status == 0 else None

    def fetch(self, source: str, ref: str) -> None:
        """Fetch ``ref`` from ``source`` (remote name or URL) into FETCH_HEAD.

        Both are passed after ``--end-of-options``: neither can act as an option.

        Raises:
            GitError: either starts with ``-``; the remote cannot be reached or has no such ref.
        """
        check_user_ref(ref, where=str(self.path))
        check_user_ref(source, what="remote", where=str(self.path))
        status, _, err = self.run(
            "fetch", "--quiet", "--no-tags", "--end-of-options", source, ref, ok_codes=(0, 1, 128)
        )
        if status != 0:
            last = (err.strip().splitlines() or ["fetch failed"])[-1]
            raise GitError(
                f"cannot fetch '{ref}' from {source} ({last})",
                where=str(self.path),
                fix="check the upstream remote/URL in ds4sync.yaml and that the ref exists",
            )

    def fetch_refspecs(self, source: str, refspecs: Sequence[str]) -> tuple[bool, str]:
        """Fetch ``refspecs`` (``+src:dst``) from ``source`` in one ``git fetch``; (all fetched, git's last line).

        git fetches all or nothing: one missing source ref fails the whole call, so a caller with refs
        that may be gone retries them one by one.
        """
        check_user_ref(source, what="remote", where=str(self.path))
        for spec in refspecs:
            check_user_ref(spec, where=str(self.path))
        status, _, err = self.run(
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--end-of-options",
            source,
            *refspecs,
            ok_codes=range(0, 256),
        )
        lines = err.strip().splitlines()
        return status == 0, (lines[-1] if lines else f"exit {status}")

    def existing_objects(self, oids: Iterable[str]) -> set[str]:
        """Which of ``oids`` this repository has (one ``git cat-file --batch-check``)."""
        wanted = [o for o in dict.fromkeys(oids) if o]
        if not wanted:
            return set()
        out = self.run_bytes("cat-file", "--batch-check", stdin=("\n".join(wanted) + "\n").encode())[1]
        return {line.split()[0] for line in out.decode().splitlines() if line and not line.endswith(" missing")}

    def refs_under(self, prefix: str) -> dict[str, str]:
        """Full ref name -> SHA of every ref under ``prefix`` (e.g. ``refs/ds4sync/``)."""
        out = self.out("for-each-ref", "--format=%(refname) %(objectname)", "--end-of-options", prefix)
        return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)

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
        status, out, _ = self.run("merge-base", "--end-of-options", a, b, ok_codes=(0, 1))
        return out.strip() if status == 0 else None

    def count_apart(self, left: str, right: str) -> tuple[int, int]:
        """Commits only ``left`` reaches and commits only ``right`` reaches (one walk of ``left...right``)."""
        only_left, only_right = self.out(
            "rev-list", "--count", "--left-right", "--end-of-options", f"{left}...{right}"
        ).split()
        return int(only_left), int(only_right)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether ``ancestor`` is reachable from ``descendant``."""
        status = self.run("merge-base", "--is-ancestor", "--end-of-options", ancestor, descendant, ok_codes=(0, 1))
        return status[0] == 0

    def changed_names(self, base: str, head: str) -> list[str]:
        """Paths that differ between two commits (tree diff only: no blob is read)."""
        out = self.run("diff", "--name-only", "-z", "--no-renames", "--end-of-options", base, head, "--", strip=False)
        return [p for p in out[1].split("\0") if p]

    def _tree_diff(self, base: str, head: str, options: Sequence[str], paths: Iterable[str] | None) -> str | None:
        """``git diff <options> -z base head -- <paths>``, the paths matching only themselves.

        ``paths`` None: every path; an empty ``paths``: None, and git is not run.
        """
        limit = list(paths) if paths is not None else []
        if paths is not None and not limit:
            return None
        args = ("diff", *options, "-z", "--end-of-options", base, head, "--", *_literal(limit))
        return self.run(*args, strip=False)[1]

    def changes(self, base: str, head: str, paths: Iterable[str] | None = None) -> dict[str, FileChange]:
        """Files changed from ``base`` to ``head`` with line counts (renames not followed).

        ``paths`` limits the diff (line counting reads blobs, so ask only for what you need).
        """
        out = self._tree_diff(base, head, ("--numstat", "--no-renames"), paths)
        if out is None:
            return {}
        changes: dict[str, FileChange] = {}
        for entry in out.split("\0"):
            if not entry:
                continue
            added, deleted, path = entry.split("\t", 2)
            changes[path] = FileChange(
                path, None if added == "-" else int(added), None if deleted == "-" else int(deleted)
            )
        return changes

    def name_status(self, base: str, head: str, *, from_merge_base: bool = False) -> dict[str, str]:
        """Paths that differ between two commits -> git's status letter (``A``, ``D``, ``M``, ``T``).

        Renames not followed (a renamed file is its old path ``D`` and its new path ``A``);
        a tree diff only, no blob is read. ``from_merge_base``: from the merge-base of ``base`` and
        ``head`` to ``head`` (``git diff base...head``: what ``head`` changed on its own), in the same call.
        """
        if from_merge_base:
            args = ("diff", "--name-status", "--no-renames", "-z", "--end-of-options", f"{base}...{head}", "--")
            out = self.run(*args, strip=False)[1]
        else:
            out = self._tree_diff(base, head, ("--name-status", "--no-renames"), None) or ""
        fields = out.split("\0")
        return {fields[i + 1]: fields[i][:1] for i in range(0, len(fields) - 1, 2)}

    def renamed_names(self, base: str, head: str, paths: Iterable[str] | None = None) -> dict[str, str | None]:
        """Paths changed from ``base`` to ``head`` -> their path at ``base`` when git detected a rename.

        Keys are paths at ``head`` (deleted files: their old path); values None unless renamed.
        ``paths`` limits the diff, and with it the rename search: only the deleted files among
        them are candidate sources and only the added ones candidate new names (what merge-ort
        does, which looks for the renames of the files the other side changed).
        """
        out = self._tree_diff(base, head, ("--name-status", "-M"), paths)
        if out is None:
            return {}
        fields = out.split("\0")
        moves: dict[str, str | None] = {}
        i = 0
        while i < len(fields) - 1:
            status, i = fields[i], i + 1
            if not status:
                continue
            if status[0] in "RC":
                old, new = fields[i], fields[i + 1]
                i += 2
                moves[new] = old if status[0] == "R" else None
            else:
                moves[fields[i]] = None
                i += 1
        return moves

    def changes_with_renames(self, base: str, head: str, paths: Iterable[str] | None = None) -> dict[str, FileChange]:
        """Files changed from ``base`` to ``head``, keyed by their path at ``head``, renames followed.

        git's rename detection (``diff -M --numstat``) pairs a deleted and an added file; the
        line counts are then those of the real change at the new path, and ``old_path`` names
        the path at ``base``. ``paths`` limits the diff (give both names of a rename).
        """
        out = self._tree_diff(base, head, ("--numstat", "-M"), paths)
        if out is None:
            return {}
        fields = out.split("\0")
        changes: dict[str, FileChange] = {}
        i = 0
        while i < len(fields):
            entry = fields[i]
            i += 1
            if not entry:
                continue
            added, deleted, path = entry.split("\t", 2)
            old = None
            if path == "":  # a rename: "<added>\t<deleted>\t" NUL <old> NUL <new>
                old, path = fields[i], fields[i + 1]
                i += 2
            changes[path] = FileChange(
                path, None if added == "-" else int(added), None if deleted == "-" else int(deleted), old
            )
        return changes

    def merge_file_clean(self, ours: bytes, base: bytes, theirs: bytes) -> bool:
        """Whether git's three-way file merge (``git merge-file``) of these contents has no conflict."""
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
                (Path(tmp) / name).write_bytes(data)
                files.append(str(Path(tmp) / name))
            status = self.run_bytes("merge-file", "-p", "--quiet", *files, ok_codes=range(0, 256))[0]
        return status == 0

    def tree_of(self, rev: str, paths: Iterable[str] = ()) -> str:
        """A SHA-1 over the tree entries of ``paths`` (the whole tree when empty) at ``rev``.

        Stable across clones; used as a cache key for what a gate depends on.
        """
        # ls-tree takes no "--": after --end-of-options every word past the tree is a path.
        out = self.run("ls-tree", "-r", "--full-tree", "--end-of-options", rev, *paths, strip=False)[1]
        return hashlib.sha1(out.encode("utf-8", "surrogateescape")).hexdigest()

    def changed_paths(self, base: str, head: str) -> list[str]:
        """Paths added, copied, modified, deleted or renamed from ``base`` to ``head`` (vLLM CI's filter)."""
        args = ("diff", "--name-only", "-z", "--diff-filter=ACMDR", "--end-of-options", base, head, "--")
        return [p for p in self.run(*args, strip=False)[1].split("\0") if p]

    def tree_paths(self, rev: str) -> list[str]:
        """Every file path in the tree of ``rev``."""
        out = self.run("ls-tree", "-r", "--name-only", "-z", "--full-tree", "--end-of-options", rev, strip=False)[1]
        return [p for p in out.split("\0") if p]

    def blob_bytes(self, rev: str, path: str) -> bytes | None:
        """The content of ``path`` at ``rev``, or None when it is not a file there."""
        spec = f"{rev}:{path}"
        status, kind, _ = self.run_bytes("cat-file", "-t", spec, ok_codes=(0, 1, 128))
        if status != 0 or kind.strip() != b"blob":
            return None
        return self.run_bytes("cat-file", "blob", spec)[1]

    # -- merge prediction -------------------------------------------------------------------
    def merge_tree(self, ours: str, theirs: str) -> MergeTreeResult:
        """Predict the merge of ``theirs`` into ``ours`` without touching any work tree.

        Uses ``git merge-tree --write-tree -z`` (git >= 2.38) and names each conflict's
        kind from git's own messages. Paths git writes beside a conflict are named as
        ``git merge`` names them in a worktree on ``ours`` (``path~HEAD``). Two full commit SHAs
        always merge alike: their result is kept on this object, so ``plan`` and its semantic check
        share one merge-tree.
        """
        key = (ours, theirs)
        if FULL_SHA_RE.match(ours) and FULL_SHA_RE.match(theirs) and key in self._merge_trees:
            return self._merge_trees[key]
        result = self._merge_tree(ours, theirs)
        if FULL_SHA_RE.match(ours) and FULL_SHA_RE.match(theirs):
            self._merge_trees[key] = result
        return result

    def _merge_tree(self, ours: str, theirs: str) -> MergeTreeResult:
        status, out, err = self.run(
            "merge-tree",
            "--write-tree",
            "-z",
            "--messages",
            "--end-of-options",
            ours,
            theirs,
            ok_codes=(0, 1, 128),
            strip=False,
        )
        if status == 128:
            raise GitError(
                f"git merge-tree failed ({err.strip() or out.strip()})",
                where=str(self.path),
                fix="git >= 2.38 is required",
            )
        return parse_merge_tree(out, ours=ours, theirs=theirs, ours_label="HEAD")

    def commit_tree(self, tree: str, *, parents: Sequence[str], message: str) -> str:
        """A commit object of ``tree`` with ``parents`` (no ref, no work tree); returns its SHA."""
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return self.run(*args, "-m", message, env=self._identity_env())[1].strip()

    def patch_paths(self, patches: Sequence[Path]) -> set[str]:
        """Every path the ``patches`` touch (``git apply --numstat``; both names of a rename)."""
        touched: set[str] = set()
        for patch in patches:
            out = self.run("apply", "--numstat", "-z", str(patch), strip=False)[1]
            for entry in out.split("\0"):
                name = entry.split("\t", 2)[-1] if "\t" in entry else entry
                if name:
                    touched.add(name)
        return touched

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
        return GitRepo(path)

    def worktree_add_detached(self, path: Path, start: str) -> GitRepo:
        """Check out ``start`` (detached, no branch) in a new worktree at ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.run("worktree", "add", "--quiet", "--detach", "--end-of-options", str(path), start)
        return GitRepo(path)

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

    def main_worktree(self) -> GitRepo:
        """The repository's main worktree (first in ``git worktree list``); this checkout when that one is
        bare or its folder is gone."""
        main = next(iter(self.worktrees()), None)
        if main is None or Path(main).resolve() == self.path.resolve() or not (Path(main) / ".git").exists():
            return self
        return GitRepo(Path(main))

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

    # -- merging in a worktree --------------------------------------------------------------
    def merge_no_commit(self, sha: str) -> tuple[bool, str]:
        """``git merge --no-ff --no-commit`` of ``sha`` into HEAD; (clean, git's messages).

        rerere is off here: ds4sync runs it against its own resolution cache
        (:meth:`rerere`), never the user's ``rr-cache``.
        """
        args = [
            "-c",
            "rerere.enabled=false",
            "-c",
            "merge.conflictStyle=merge",
            "merge",
            "--no-ff",
            "--no-commit",
            "--no-edit",
            "--no-verify",
            "--end-of-options",
            sha,
        ]
        status, out, err = self.run(*args, ok_codes=(0, 1, 2, 128), env=self._identity_env())
        if status in (2, 128) or self.merge_head() is None:
            lines = (err or out).strip().splitlines() or [f"exit {status}"]
            fatal = next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[-1])
            raise GitError(
                f"git merge could not start ({fatal})", where=str(self.path), fix="look at the worktree's state"
            )
        return status == 0, f"{out}\n{err}"

    def merge_head(self) -> str | None:
        """The commit being merged (MERGE_HEAD), or None when no merge is in progress."""
        path = self.git_dir / "MERGE_HEAD"
        return path.read_text().split()[0] if path.is_file() else None

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

    def staged_blob(self, path: str) -> str | None:
        """The blob id of ``path`` at stage 0 of the index (``git rev-parse :path``); None when not staged there."""
        status, out, _ = self.run("rev-parse", "--verify", "--quiet", f":{path}", ok_codes=(0, 1, 128))
        return (out.strip() or None) if status == 0 else None

    def unmerged_paths(self) -> list[str]:
        """Paths with conflict stages in the index (``git ls-files -u``)."""
        out = self.run("ls-files", "-u", "-z", strip=False)[1]
        return sorted({e.split("\t", 1)[1] for e in out.split("\0") if "\t" in e})

    def stage_entries(self, path: str) -> dict[int, tuple[str, str]]:
        """The index stages of ``path``: stage (1 base, 2 ours, 3 theirs) -> (mode, oid)."""
        out = self.run("ls-files", "-u", "-z", "--", path, strip=False)[1]
        entries = {}
        for entry in out.split("\0"):
            if "\t" in entry:
                meta, name = entry.split("\t", 1)
                if name == path:
                    mode, oid, stage = meta.split()
                    entries[int(stage)] = (mode, oid)
        return entries

    def stages(self, path: str) -> set[int]:
        """Which index stages (1 base, 2 ours, 3 theirs) ``path`` has."""
        return set(self.stage_entries(path))

    def take_side(self, path: str, side: str) -> None:
        """Resolve ``path`` with one side: ``ours`` or ``theirs``.

        The path is deleted only when that side deleted a path the merge-base had; a path
        only the other side added (a fork's new file moved by a directory rename) is kept.
        Submodules (gitlinks) get the commit of that side.
        """
        entries = self.stage_entries(path)
        stage = 2 if side == "ours" else 3
        if stage in entries:
            mode, oid = entries[stage]
            if mode == "160000":
                self.run("update-index", "--cacheinfo", f"{mode},{oid},{path}")
                return
            self.run("checkout", f"--{side}", "--", path)
            self.run("add", "--", path)
        elif 1 in entries:
            self.run("rm", "--quiet", "--cached", "--ignore-unmatch", "--", path)
            (self.path / path).unlink(missing_ok=True)
        else:
            self.run("add", "--", path)

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
            _status, merged, _ = self.run_bytes("merge-file", "-p", "--union", *files, ok_codes=range(0, 127))
        (self.path / path).write_bytes(merged)
        self.run("add", "--", path)
        return True

    def blob(self, spec: str) -> bytes:
        """The exact bytes of a blob (``<rev>:<path>`` or ``:<stage>:<path>``)."""
        return self.run_bytes("cat-file", "blob", spec)[1]

    def blobs(self, oids: Iterable[str]) -> dict[str, bytes]:
        """The bytes of many blobs in one ``git cat-file --batch``: oid -> content (missing ones left out)."""
        wanted = list(dict.fromkeys(oids))
        if not wanted:
            return {}
        out = self.run_bytes("cat-file", "--batch", stdin=("\n".join(wanted) + "\n").encode())[1]
        found: dict[str, bytes] = {}
        pos = 0
        for oid in wanted:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            pos = end + 1
            if len(header) < 3 or header[1] == b"missing":
                continue
            size = int(header[2])
            found[oid] = out[pos : pos + size]
            pos += size + 1
        return found

    def blob_ids(self, rev: str, paths: Iterable[str]) -> dict[str, str]:
        """``{path: blob oid}`` of ``paths`` in ``rev``'s tree (``ls-tree -z``); a path absent there is left out."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return {}
        out = self.run("ls-tree", "-z", "--full-tree", "--end-of-options", rev, *_literal(wanted), strip=False)[1]
        found: dict[str, str] = {}
        for entry in out.split("\0"):
            meta, _, path = entry.partition("\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == "blob" and path in wanted:
                found[path] = parts[2]
        return found

    def stage_resolved(self, path: str) -> None:
        """Stage a path a person resolved: add it, or record its deletion when it is gone."""
        if (self.path / path).exists() or (self.path / path).is_symlink():
            self.run("add", "--", path)
        else:
            self.run("rm", "--quiet", "--cached", "--ignore-unmatch", "--", path)

    def marker_sizes(self, paths: Iterable[str]) -> dict[str, int]:
        """The conflict-marker length git uses for each path (``conflict-marker-size`` attribute, else 7)."""
        wanted = list(paths)
        if not wanted:
            return {}
        out = self.run("check-attr", "-z", "conflict-marker-size", "--", *wanted, strip=False)[1]
        return marker_sizes_of(out, wanted)

    def paths_with_markers(self, paths: Iterable[str]) -> list[str]:
        """The work-tree files among ``paths`` that still hold a conflict hunk, as git finds them.

        A hunk is what git writes and rerere reads: a ``<<<<<<<`` line, a ``=======`` line
        and a ``>>>>>>>`` line, each exactly as long as the path's ``conflict-marker-size``
        attribute says. A lone ``=======`` (an RST heading) is not a marker.
        """
        found = []
        for path, size in self.marker_sizes(paths).items():
            file = self.path / path
            if file.is_file() and not file.is_symlink() and has_conflict_hunk(file.read_bytes(), size):
                found.append(path)
        return sorted(found)

    def has_markers(self, path: str) -> bool:
        """Whether the work-tree file still holds a conflict hunk (see :meth:`paths_with_markers`)."""
        return bool(self.paths_with_markers([path]))

    def unstaged_paths(self) -> list[str]:
        """Tracked files whose work-tree content differs from the index, and untracked files (not ignored)."""
        out = self.run("diff", "--name-only", "-z", strip=False)[1]
        changed = {p for p in out.split("\0") if p}
        unmerged = set(self.unmerged_paths())
        return sorted((changed - unmerged) | set(self.untracked()))

    # -- rerere against a ds4sync-owned cache ---------------------------------------------
    def rerere(self, cache: Path, *args: str, autoupdate: bool = False) -> str:
        """Run ``git rerere <args>`` in this worktree against the resolution cache ``cache``.

        git keeps ``rr-cache`` in the common git dir, shared with the user's checkouts. ds4sync
        points rerere at its own: a small common dir next to ``cache`` whose ``rr-cache`` is
        ``cache`` and whose objects, refs and config are links to the real ones. Only what
        ds4sync put in ``cache`` can be replayed. Returns git's messages (stderr).
        """
        shadow = cache.parent / "rerere-common"
        (shadow).mkdir(parents=True, exist_ok=True)
        cache.mkdir(parents=True, exist_ok=True)
        for name in ("objects", "refs", "packed-refs", "config", "info", "HEAD"):
            link, target = shadow / name, self.common_dir / name
            if target.exists() and not link.is_symlink():
                link.symlink_to(target)
        rr = shadow / "rr-cache"
        if not rr.is_symlink():
            rr.symlink_to(cache.resolve())
        env = {"GIT_DIR": str(self.git_dir), "GIT_COMMON_DIR": str(shadow), "GIT_WORK_TREE": str(self.path)}
        flags = ("-c", "rerere.enabled=true", "-c", f"rerere.autoupdate={'true' if autoupdate else 'false'}")
        return self.run(*flags, "rerere", *args, env=env)[2]

    def merge_rr(self) -> dict[str, str]:
        """This merge's rerere entries: path -> conflict id (``<hash>`` or ``<hash>.<variant>``, from MERGE_RR)."""
        path = self.git_dir / "MERGE_RR"
        if not path.is_file():
            return {}
        entries = {}
        for entry in path.read_bytes().decode("utf-8", "surrogateescape").split("\0"):
            if "\t" in entry:
                digest, name = entry.split("\t", 1)
                entries[name] = digest
        return entries

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

    def remerge_diff_paths(self, commit: str) -> list[str]:
        """Paths where merge ``commit`` differs from git's automatic merge of its parents."""
        args = ("show", "--remerge-diff", "--format=", "--name-only", "-z", "--end-of-options", commit, "--")
        return sorted({p.strip("\n") for p in self.run(*args, strip=False)[1].split("\0") if p.strip("\n")})

    def status_porcelain(self) -> list[str]:
        """``git status --porcelain`` lines (empty for a clean checkout)."""
        return [line for line in self.out("status", "--porcelain").splitlines() if line]


def marker_sizes_of(check_attr_z: str, wanted: Iterable[str]) -> dict[str, int]:
    """``{path: conflict-marker length}`` from ``git check-attr -z conflict-marker-size`` output (7 where unset)."""
    fields = check_attr_z.split("\0")
    sizes = dict.fromkeys(wanted, DEFAULT_MARKER_SIZE)
    for i in range(0, len(fields) - 2, 3):
        path, value = fields[i], fields[i + 2]
        if value.isdigit() and int(value) > 0:
            sizes[path] = int(value)
    return sizes


def has_conflict_hunk(data: bytes, size: int = DEFAULT_MARKER_SIZE) -> bool:
    """Whether ``data`` holds a complete conflict hunk with markers of length ``size``.

    rerere's grammar (rerere.c ``is_cmarker``): ``<`` and ``>`` markers are followed by a
    space (or end the line), ``=`` and ``|`` markers by whitespace; a hunk is ``<``, an
    optional ``|`` base, ``=``, ``>`` in that order.
    """
    state = 0  # 0 outside, 1 after <, 2 after = (a | base between < and = is allowed)
    for raw in data.split(b"\n"):
        line = raw.rstrip(b"\r")
        kind = _marker(line, size)
        if kind == b"<":
            state = 1
        elif kind == b"=" and state == 1:
            state = 2
        elif kind == b">" and state == 2:
            return True
    return False


def _marker(line: bytes, size: int) -> bytes | None:
    if len(line) < size:
        return None
    head = line[:1]
    if head not in (b"<", b"=", b">", b"|") or line[:size] != head * size:
        return None
    rest = line[size:]
    if head in (b"<", b">"):
        return head if rest == b"" or rest[:1] == b" " else None
    return head if rest == b"" or rest[:1].isspace() else None


def _git(
    cwd: Path, *args: str, env: Mapping[str, str] | None = None, stdin: bytes | None = None
) -> tuple[int, bytes, bytes]:
    """Run git once: hooks off, :func:`git_env` plus ``env``; (status, stdout, stderr)."""
    try:
        proc = subprocess.run(
            ["git", *NO_HOOKS, *args],
            cwd=cwd,
            env=git_env(env),
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError as exc:
        raise not_started(
            "git", cwd, missing=GitError("git is not installed", where=str(cwd), fix="install git >= 2.38")
        ) from exc
    return proc.returncode, proc.stdout, proc.stderr
