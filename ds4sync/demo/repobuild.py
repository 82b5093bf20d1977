"""Build small git repositories from ``{path: text}`` snapshots: the demo's and the tests' fixtures.

Real git through ds4sync's own git layer (:class:`~ds4sync.core.git.GitRepo`); nothing is mocked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ds4sync.core.git import GitRepo, init_repository

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
        self.repo = GitRepo(path)
        self.repo.set_config("user.name", "ds4sync demo")
        self.repo.set_config("user.email", "demo@ds4sync.invalid")
        self.repo.set_config("commit.gpgsign", "false")

    def write(self, files: FileSpec) -> None:
        """Write or delete files in the work tree and stage them."""
        for rel, content in files.items():
            target = self.path / rel
            if content is None:
                self.repo.remove_paths([rel])
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
            self.repo.add_paths([rel])

    def commit(self, files: FileSpec, message: str, *, date: str | None = None) -> str:
        """Apply ``files`` and commit them; returns the new SHA."""
        self.write(files)
        return self.repo.commit_as(message, identity=_IDENTITY, date=date)

    def rename(self, old: str, new: str, message: str) -> str:
        """``git mv old new`` and commit."""
        (self.path / new).parent.mkdir(parents=True, exist_ok=True)
        self.repo.move_path(old, new)
        return self.commit({}, message)

    def branch(self, name: str, start: str = "HEAD") -> None:
        """Create branch ``name`` at ``start`` and check it out."""
        self.repo.checkout_new_branch(name, start)

    def checkout(self, name: str) -> None:
        """Check out an existing branch."""
        self.repo.checkout_branch(name)

    def head(self) -> str:
        """The SHA of HEAD."""
        return self.repo.head()

    def read(self, rel: str, rev: str = "HEAD") -> str:
        """A file's text at ``rev``.

        Raises:
            GitError: ``rel`` is not a file at ``rev``.
        """
        return self.repo.blob(f"{rev}:{rel}").decode()
