"""The base of :class:`~ds4sync.core.git.GitRepo`: opening a checkout and running git in it.

Every verb of the git package runs git through :meth:`GitBase.run` (or :meth:`GitBase.run_bytes`), which
runs it once in the one clean environment (:func:`ds4sync.core.git.env.git_env`, hooks off).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from ds4sync.core.errors import GitError
from ds4sync.core.git.env import _git
from ds4sync.core.git.mergetree import MergeTreeResult
from ds4sync.core.redact import redact_secrets

_log = logging.getLogger("ds4sync.git")


class GitBase:
    """A git checkout opened at its top-level folder, and git run in it: what every verb module builds on.

    See :class:`~ds4sync.core.git.GitRepo` (all the verbs) for ``path`` and ``search_parents``.

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
