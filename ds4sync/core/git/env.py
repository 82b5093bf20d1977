"""The one git environment, and the one place git is started.

Every git command ds4sync runs goes through :func:`_git` with :func:`git_env`: the caller's ``GIT_*``
variables are dropped (a git alias or hook exports ``GIT_DIR``, ``GIT_INDEX_FILE``, ``GIT_WORK_TREE``),
messages are in the C locale, and the user's hooks are off (``core.hooksPath=/dev/null``). GitPython
cannot remove variables from the environment it passes on, so ds4sync runs git itself.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from ds4sync.core.errors import GitError
from ds4sync.core.proc import not_started, without_git_env

SHA_RE = re.compile(r"^[0-9a-f]{7,40}$")
FULL_SHA_RE = re.compile(r"^[0-9a-f]{40}$")

#: ``-c`` options every ds4sync git command gets: the user's hooks never run for our commands.
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


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


def _literal(paths: Iterable[str]) -> list[str]:
    """File paths as pathspecs that match only themselves (a ``[`` or ``*`` in a name is no glob)."""
    return [f":(literal){path}" for path in paths]


def git_version() -> str:
    """git's version (``2.43.0``), as ``git --version`` says in the clean environment.

    Raises:
        GitError: git is missing or did not answer.
    """
    status, out, err = _git(Path.cwd(), "--version")
    if status != 0:
        raise GitError(f"git --version failed: {err.decode('utf-8', 'replace').strip()}")
    return out.decode("utf-8", "replace").strip().removeprefix("git version ")


def init_repository(path: Path, *, branch: str = "main", bare: bool = False) -> None:
    """``git init`` a new repository at ``path`` in the clean environment (never a leaked ``GIT_DIR``).

    ``bare``: a repository without a work tree (a push target).

    Raises:
        GitError: git refused (the folder is not writable...).
    """
    path.mkdir(parents=True, exist_ok=True)
    args = ("init", "--quiet", *(["--bare"] if bare else []), f"--initial-branch={branch}")
    status, _, err = _git(path, *args, "--end-of-options", str(path))
    if status != 0:
        raise GitError(f"git init failed: {err.decode('utf-8', 'replace').strip()}", where=str(path))


def clone_repository(source: str | Path, dest: Path, *, origin: str = "origin", checkout: bool = True) -> None:
    """``git clone`` of the repository ``source`` (a folder or a URL) into ``dest`` in the clean environment.

    ``origin`` names the remote ``source`` becomes; without ``checkout`` no work tree is written
    (``--no-checkout``: worktrees are added later).

    Raises:
        GitError: git refused (the message is git's last line).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    options = ("--quiet", "--origin", origin, *([] if checkout else ["--no-checkout"]))
    status, _, err = _git(dest.parent, "clone", *options, "--end-of-options", str(source), str(dest))
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
