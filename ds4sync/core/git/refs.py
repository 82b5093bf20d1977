"""Refs and names: what a ref resolves to, branches, HEAD, creating and deleting refs."""

from __future__ import annotations

from ds4sync.core.errors import GitError
from ds4sync.core.git.base import GitBase
from ds4sync.core.git.env import check_user_ref


class RefVerbs(GitBase):
    """Ref verbs of :class:`~ds4sync.core.git.GitRepo`."""

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

    def update_ref(self, ref: str, sha: str, *, message: str = "ds4sync", expect: str | None = None) -> None:
        """Point ``ref`` at ``sha`` (creating it); ``message`` goes to the reflog.

        ``expect``: only if ``ref`` is at that SHA now (git's compare-and-swap, one atomic step).

        Raises:
            GitError: ``ref`` is not at ``expect`` (it moved meanwhile), or git refused the name.
        """
        self.run("update-ref", "-m", message, "--", ref, sha, *([expect] if expect is not None else []))

    def delete_ref(self, ref: str) -> None:
        """Delete ``ref`` if it exists."""
        if self.ref_exists(ref):
            self.run("update-ref", "-d", "--", ref)

    def refs_under(self, prefix: str) -> dict[str, str]:
        """Full ref name -> SHA of every ref under ``prefix`` (e.g. ``refs/ds4sync/``)."""
        out = self.out("for-each-ref", "--format=%(refname) %(objectname)", "--end-of-options", prefix)
        return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)

    def tree_id(self, rev: str) -> str:
        """The tree id of commit (or tree) ``rev`` (``git rev-parse --verify rev^{tree}``).

        Raises:
            GitError: ``rev`` names no commit or tree here.
        """
        return self.out("rev-parse", "--verify", "--end-of-options", f"{rev}^{{tree}}")

    def full_ref_name(self, ref: str) -> str | None:
        """The full name git reads ``ref`` as (``main`` -> ``refs/heads/main``); None for a SHA, an ambiguous
        name or one that names nothing."""
        # --verify: without it, git before 2.43 prints "--end-of-options" as if it were the name
        status, out, _ = self.run(
            "rev-parse", "--verify", "--quiet", "--symbolic-full-name", "--end-of-options", ref, ok_codes=(0, 1, 128)
        )
        return out.strip() if status == 0 and out.strip() else None
