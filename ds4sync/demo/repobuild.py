"""Build small git repositories from ``{path: text}`` snapshots: the demo's and the tests' fixtures.

Real git through GitPython; nothing is mocked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import git

from ds4sync.core.git import init_repository, pinned_env

FileSpec = Mapping[str, "str | bytes | None"]
_IDENTITY = {
    "GIT_AUTHOR_NAME": "ds4sync demo",
    "GIT_AUTHOR_EMAIL": "demo@ds4sync.invalid",
    "GIT_COMMITTER_NAME": "ds4sync demo",
    "GIT_COMMITTER_EMAIL": "demo@ds4sync.invalid",
}


class RepoBuilder:
    """A repository grown one commit at a time.

    ``commit({"a.py": "text", "old.py": None}, "message")`` writes (or, for None,
    deletes) the files and commits them; renames go through :meth:`rename`.
    """

    def __init__(self, path: Path, *, branch: str = "main") -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        if not (path / ".git").exists():
            init_repository(path, branch=branch)
        self.repo = git.Repo(path)
        self.repo.git.update_environment(**pinned_env(path.resolve()))  # a leaked GIT_DIR cannot redirect it
        with self.repo.config_writer() as cfg:
            cfg.set_value("user", "name", "ds4sync demo")
            cfg.set_value("user", "email", "demo@ds4sync.invalid")
            cfg.set_value("commit", "gpgsign", "false")

    def write(self, files: FileSpec) -> None:
        """Write or delete files in the work tree and stage them."""
        for rel, content in files.items():
            target = self.path / rel
            if content is None:
                self.repo.git.rm("-q", "--", rel)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
            self.repo.git.add("--", rel)

    def commit(self, files: FileSpec, message: str, *, date: str | None = None) -> str:
        """Apply ``files`` and commit them; returns the new SHA."""
        self.write(files)
        env = dict(_IDENTITY)
        if date:
            env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
        self.repo.git.execute(["git", "commit", "-q", "--allow-empty", "-m", message], env=env)
        return self.head()

    def rename(self, old: str, new: str, message: str) -> str:
        """``git mv old new`` and commit."""
        (self.path / new).parent.mkdir(parents=True, exist_ok=True)
        self.repo.git.mv(old, new)
        return self.commit({}, message)

    def branch(self, name: str, start: str = "HEAD") -> None:
        """Create branch ``name`` at ``start`` and check it out."""
        self.repo.git.checkout("-q", "-b", name, start)

    def checkout(self, name: str) -> None:
        """Check out an existing branch."""
        self.repo.git.checkout("-q", name)

    def head(self) -> str:
        """The SHA of HEAD."""
        return self.repo.head.commit.hexsha

    def read(self, rel: str, rev: str = "HEAD") -> str:
        """A file's text at ``rev``."""
        return self.repo.git.show(f"{rev}:{rel}")
