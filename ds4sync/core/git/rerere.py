"""rerere against a ds4sync-owned resolution cache (never the user's ``rr-cache``)."""

from __future__ import annotations

from pathlib import Path

from ds4sync.core.git.base import GitBase


class RerereVerbs(GitBase):
    """rerere verbs of :class:`~ds4sync.core.git.GitRepo`."""

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
