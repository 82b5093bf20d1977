"""Remotes: their URLs, fetch, ls-remote and push (every user ref after ``--end-of-options``)."""

from __future__ import annotations

from collections.abc import Sequence

from ds4sync.core.errors import GitError
from ds4sync.core.git.base import GitBase
from ds4sync.core.git.env import check_user_ref


class RemoteVerbs(GitBase):
    """Remote verbs of :class:`~ds4sync.core.git.GitRepo`."""

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
