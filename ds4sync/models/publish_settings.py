"""The ``publish:`` and ``notify:`` sections of ds4sync.yaml (imported by ds4sync.models.config; pydantic only).

Secrets never live here: the forge token comes from ``GITHUB_TOKEN``/``GH_TOKEN`` and notification
URLs that carry credentials can come from an environment variable (``notify.urls_env``).
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from ds4sync.core.model import FrozenModel, Regex

#: A pull request title that reads like an upstream sync (matched case-insensitively).
SYNC_TITLE_PATTERN = r"\b(sync|merge|integrat\w*|rebase|catch[- ]?up|refresh)\b.*\b(upstream|main)\b"
TOKEN_ENV = ("GITHUB_TOKEN", "GH_TOKEN")


def checked_remote_name(value: str) -> str:
    """``value`` when it can name a git remote; a ValueError (what is wrong, for the config line) otherwise."""
    from ds4sync.core.git import remote_name_problem

    problem = remote_name_problem(value)
    if problem:
        raise ValueError(f"not a git remote name: {value!r} {problem}")
    return value


class PublishConfig(FrozenModel):
    """Where and how the publish phase pushes the sync branch and opens its draft PR.

    ``repo`` is the fork on the forge (``owner/name``); ``remote`` the git remote the sync branch is
    pushed to; ``head_branch`` the branch name on that remote, formatted with ``{branch}`` (fork
    branch, ``/`` as ``-``), ``{upstream}`` (12-hex upstream SHA) and ``{sync_branch}``. The default
    keeps one stable head per fork branch, so every night's sync updates the same PR.
    """

    repo: str
    api_url: str = "https://api.github.com"
    remote: str = "origin"
    head_branch: str = "sync/{branch}-upstream"
    base: str | None = Field(default=None, description="PR base branch (default: the fork branch)")
    labels: tuple[str, ...] = ()
    draft: bool = True
    public: bool = Field(default=True, description="redact private hosts and home folders from the PR text")
    sync_title_pattern: Regex = SYNC_TITLE_PATTERN
    max_prs_inspected: int = Field(default=50, ge=0, description="open PRs whose commits are read (range check)")
    retries: int = Field(default=4, ge=0, description="retries of a rate-limited or 5xx reply")
    backoff_s: float = Field(default=2.0, gt=0, description="first wait after a 5xx reply, doubled each retry")
    max_wait_s: float = Field(default=900.0, gt=0, description="longest wait for a rate-limit reset")
    timeout_s: float = Field(default=30.0, gt=0)

    @field_validator("remote")
    @classmethod
    def _remote_name(cls, value: str) -> str:
        return checked_remote_name(value)

    @field_validator("repo")
    @classmethod
    def _owner_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", value):
            raise ValueError("must be owner/name, e.g. jasl/vllm")
        return value

    @property
    def owner(self) -> str:
        """The repository's owner."""
        return self.repo.split("/", 1)[0]

    @property
    def name(self) -> str:
        """The repository's name."""
        return self.repo.split("/", 1)[1]


class NotifyConfig(FrozenModel):
    """Where the one message per night goes: apprise URLs (Slack, Matrix, mailto, ntfy, json://...).

    ``urls`` are written in the file; ``urls_env`` names an environment variable holding more
    (space or comma separated), for URLs that carry a credential.
    """

    urls: tuple[str, ...] = ()
    urls_env: str | None = "DS4SYNC_NOTIFY_URLS"
    on_skip: bool = Field(default=False, description="also send a message on a night where nothing moved")
    title_prefix: str = "ds4sync"
