"""The forge client: the few GitHub REST calls publishing needs, through githubkit.

The token comes only from the environment (``GITHUB_TOKEN``, else ``GH_TOKEN``) and is never
written anywhere: error lines are redacted with :mod:`ds4sync.core.redact` before they leave.
Rate-limited replies (403/429 with ``x-ratelimit-remaining: 0`` or ``retry-after``) are retried
after the reset time the reply names, up to ``max_wait_s``; 5xx replies are retried with an
exponential backoff. Every other error reply becomes a :class:`ForgeError` with what to fix.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import Any

from ds4sync.core.errors import Ds4syncError, ExitCode
from ds4sync.core.redact import redact_secrets
from ds4sync.models.publish_settings import TOKEN_ENV, PublishConfig


class ForgeError(Ds4syncError):
    """The forge refused a request: bad token, no permission, unknown repository, invalid request.

    ``status`` is the HTTP status (0 when the forge could not be reached).
    """

    exit_code = ExitCode.NEEDS_PERSON

    def __init__(self, what: str, *, status: int, where: str | None = None, fix: str | None = None) -> None:
        super().__init__(redact_secrets(what), where=where, fix=fix)
        self.status = status


class ForgeUnavailable(ForgeError):
    """The forge stayed rate-limited or failing (5xx, unreachable) after every retry: try again later."""

    exit_code = ExitCode.TRANSIENT


class PullExists(ForgeError):
    """422 "A pull request already exists" for this head and base."""


def forge_token(env: Mapping[str, str] | None = None) -> str | None:
    """The forge token from ``GITHUB_TOKEN`` or ``GH_TOKEN`` (first set wins), None when neither is."""
    source = os.environ if env is None else env
    for name in TOKEN_ENV:
        value = source.get(name, "").strip()
        if value:
            return value
    return None


@dataclass
class Backoff:
    """githubkit retry decision: honour the rate-limit reset time, back off exponentially on 5xx.

    ``waits`` collects every wait taken, in seconds (the publish result records them).
    """

    retries: int
    backoff_s: float
    max_wait_s: float
    waits: list[float]

    def __call__(self, exc: Exception, retry_count: int) -> Any:
        from githubkit.exception import RateLimitExceeded, RequestFailed
        from githubkit.retry import RetryOption

        if retry_count >= self.retries:
            return RetryOption(False)
        if isinstance(exc, RateLimitExceeded):
            wait = exc.retry_after.total_seconds()
            if wait > self.max_wait_s:
                return RetryOption(False)
        elif isinstance(exc, RequestFailed) and exc.response.status_code >= 500:
            wait = self.backoff_s * 2**retry_count
        else:
            return RetryOption(False)
        # githubkit sleeps 60 s for a zero wait; a reset already past is waited as a short pause.
        wait = max(wait, 0.01)
        self.waits.append(round(wait, 3))
        return RetryOption(True, timedelta(seconds=wait))


class Forge:
    """The fork's repository on GitHub (or a server speaking its REST API at ``api_url``).

    Raises (every method):
        ForgeError: 401 token rejected, 403 forbidden, 404 repository or PR not found, 422 invalid.
        ForgeUnavailable: still rate-limited or failing after the retries.
    """

    def __init__(self, config: PublishConfig, token: str | None) -> None:
        from githubkit import GitHub

        self.config = config
        self.waits: list[float] = []
        self._gh = GitHub(
            token,
            base_url=config.api_url.rstrip("/") + "/",
            timeout=config.timeout_s,
            http_cache=False,
            trust_env=False,
            user_agent="ds4sync",
            auto_retry=Backoff(config.retries, config.backoff_s, config.max_wait_s, self.waits),
        )

    def __enter__(self) -> Forge:
        """Keep one HTTP connection (and TLS context) for the calls inside ``with``, instead of one per call."""
        self._gh.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._gh.__exit__(kind, error, trace)

    # -- calls ------------------------------------------------------------------------------
    def open_pulls(
        self,
        *,
        keep: Callable[[dict[str, Any]], bool] | None = None,
        limit: int | None = None,
        updated_since: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every open pull request (all pages), newest update first.

        ``keep`` filters them; ``limit`` stops after that many kept; ``updated_since`` (ISO 8601, compared
        as text like GitHub's ``updated_at``) stops at the first older one (the list is sorted by update).
        """
        pulls: list[dict[str, Any]] = []
        page = 1
        while True:
            batch = self._call(
                "GET",
                "/pulls",
                params={"state": "open", "sort": "updated", "direction": "desc", "per_page": 100, "page": page},
            )
            for pull in batch:
                if updated_since and str(pull.get("updated_at") or "") < updated_since:
                    return pulls
                if keep is None or keep(pull):
                    pulls.append(pull)
                if limit is not None and len(pulls) >= limit:
                    return pulls
            if len(batch) < 100:
                return pulls
            page += 1

    def pull(self, number: int) -> dict[str, Any]:
        """One pull request in full (with ``mergeable``, which the list leaves out)."""
        return self._call("GET", f"/pulls/{number}")

    def pull_reviews(self, number: int) -> list[dict[str, Any]]:
        """A pull request's reviews, oldest first (the first 100)."""
        return self._call("GET", f"/pulls/{number}/reviews", params={"per_page": 100})

    def pull_commits(self, number: int) -> list[str]:
        """The SHAs of a pull request's commits (GitHub lists at most 250)."""
        shas: list[str] = []
        for page in (1, 2, 3):
            batch = self._call("GET", f"/pulls/{number}/commits", params={"per_page": 100, "page": page})
            shas.extend(str(c.get("sha", "")) for c in batch)
            if len(batch) < 100:
                break
        return shas

    def pulls_with_head(self, head_branch: str) -> list[dict[str, Any]]:
        """Open pull requests whose head is ``owner:head_branch``."""
        return self._call("GET", "/pulls", params={"state": "open", "head": f"{self.config.owner}:{head_branch}"})

    def create_pull(self, *, title: str, head: str, base: str, body: str, draft: bool) -> dict[str, Any]:
        """Open a pull request.

        Raises:
            PullExists: one is already open for this head and base (422).
        """
        return self._call(
            "POST", "/pulls", json={"title": title, "head": head, "base": base, "body": body, "draft": draft}
        )

    def update_pull(self, number: int, *, title: str, body: str) -> dict[str, Any]:
        """Replace a pull request's title and description."""
        return self._call("PATCH", f"/pulls/{number}", json={"title": title, "body": body})

    def comment(self, number: int, body: str) -> dict[str, Any]:
        """Add a comment to a pull request's conversation."""
        return self._call("POST", f"/issues/{number}/comments", json={"body": body})

    def add_labels(self, number: int, labels: tuple[str, ...]) -> list[dict[str, Any]]:
        """Add labels to a pull request (existing ones are kept)."""
        return self._call("POST", f"/issues/{number}/labels", json={"labels": list(labels)})

    # -- plumbing ---------------------------------------------------------------------------
    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        from githubkit.exception import GitHubException, RateLimitExceeded, RequestError, RequestFailed

        url = f"/repos/{self.config.owner}/{self.config.name}{path}"
        where = f"{self.config.api_url.rstrip('/')}{url}"
        try:
            return self._gh.request(method, url, **kwargs).json()
        except RateLimitExceeded as exc:
            reset = exc.response.headers.get("x-ratelimit-reset", "")
            raise ForgeUnavailable(
                f"rate-limited by the forge (reset at {reset or 'unknown'}, in {exc.retry_after})",
                status=exc.response.status_code,
                where=where,
                fix="wait for the reset or raise publish.max_wait_s; `ds4sync resume` publishes again",
            ) from None
        except RequestFailed as exc:
            raise _failure(exc.response.status_code, _message(exc.response), where, method) from None
        except RequestError as exc:
            raise ForgeUnavailable(
                f"cannot reach the forge ({type(exc.exc).__name__}: {exc.exc})",
                status=0,
                where=where,
                fix="check publish.api_url and the network; `ds4sync resume` publishes again",
            ) from None
        except GitHubException as exc:  # anything else githubkit raises is still the forge's answer
            raise ForgeError(f"forge request failed ({exc})", status=0, where=where) from None


def _message(response: Any) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:200]
    if not isinstance(data, dict):
        return str(data)[:200]
    parts = [str(data.get("message", ""))]
    for item in data.get("errors") or ():
        if isinstance(item, dict) and item.get("message"):
            parts.append(str(item["message"]))
    return "; ".join(p for p in parts if p)


#: What a refusal of the token or the repository means, and the fix: ``{message}`` is the forge's own words.
_REFUSED = {
    401: ("the forge rejected the token (401: {message})", f"set a valid token in {' or '.join(TOKEN_ENV)}"),
    403: (
        "the token may not do this (403: {message})",
        "give the token pull-request and contents write access to the fork",
    ),
    404: (
        "not found (404: {message}): the repository does not exist or the token cannot see it",
        "check publish.repo in ds4sync.yaml and the token's repository access",
    ),
}


def _failure(status: int, message: str, where: str, method: str) -> ForgeError:
    if status in _REFUSED:
        what, fix = _REFUSED[status]
        return ForgeError(what.format(message=message), status=status, where=where, fix=fix)
    if status == 422 and method == "POST" and "already exists" in message.lower():
        return PullExists(f"a pull request already exists ({message})", status=status, where=where)
    if status >= 500:
        return ForgeUnavailable(
            f"the forge kept failing ({status}: {message})",
            status=status,
            where=where,
            fix="`ds4sync resume` publishes again later",
        )
    return ForgeError(f"the forge refused the request ({status}: {message})", status=status, where=where)
