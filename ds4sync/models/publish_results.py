"""The publish phase's and the nightly notification's record entries (the run record holds them typed).

Apart from :mod:`ds4sync.publish.phase` and :mod:`ds4sync.publish.notify` so that the record can name
them without importing the phase and the notifier.
"""

from __future__ import annotations

from typing import Literal

from ds4sync.core.model import FrozenModel
from ds4sync.models.publish_duplicates import DuplicateCheck

PublishStatus = Literal["published", "refused", "unavailable", "push-rejected", "no-token"]


class PublishResult(FrozenModel):
    """What publishing did: the push, the duplicate-work check, the PR and how it was touched.

    ``action`` is ``opened`` (a new draft PR) or ``updated`` (the sync's open PR got the new
    description and a comment); ``waits_s`` are the forge's rate-limit/5xx waits taken, in seconds.
    """

    status: PublishStatus
    message: str = ""
    repo: str
    remote: str
    head_branch: str
    base: str
    pushed_sha: str | None = None
    previous_remote_sha: str | None = None
    duplicate_check: DuplicateCheck | None = None
    pr_number: int | None = None
    pr_url: str | None = None
    action: Literal["opened", "updated"] | None = None
    labels: tuple[str, ...] = ()
    comment_url: str | None = None
    compared_with: str | None = None
    published_at: str | None = None
    waits_s: tuple[float, ...] = ()


class NotifyResult(FrozenModel):
    """Whether the message went out: targets configured, how many refused it, the title sent."""

    sent: bool
    targets: int
    invalid: int = 0
    title: str = ""
    message: str = ""
