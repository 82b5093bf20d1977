"""The one message per night: what happened, the PR link, what needs a person; sent through apprise.

Targets are apprise URLs (``slack://``, ``matrix://``, ``mailto://``, ``ntfy://``, ``json://``...), so
a channel is configuration, not code. URLs may carry credentials: they are never recorded, and
every error line is redacted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Literal

from ds4sync.core.model import FrozenModel
from ds4sync.core.redact import redact_secrets
from ds4sync.models.publish_results import NotifyResult
from ds4sync.models.publish_settings import NotifyConfig

NoticeKind = Literal["success", "info", "warning", "failure"]


class Notice(FrozenModel):
    """The night's message: a title line, a Markdown body, its kind, and the items that need a person."""

    title: str
    body: str
    kind: NoticeKind = "info"
    needs_person: tuple[str, ...] = ()
    pr_url: str | None = None


def target_urls(config: NotifyConfig, env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The apprise URLs: ``notify.urls`` plus those in the ``notify.urls_env`` variable (space/comma separated)."""
    source = os.environ if env is None else env
    extra = source.get(config.urls_env, "") if config.urls_env else ""
    return tuple(config.urls) + tuple(u for u in re.split(r"[\s,]+", extra) if u)


def send(config: NotifyConfig, notice: Notice, *, env: Mapping[str, str] | None = None) -> NotifyResult:
    """Send ``notice`` to every target; a target that cannot be reached makes ``sent`` False (never raises)."""
    import apprise

    urls = target_urls(config, env)
    if not urls:
        return NotifyResult(sent=False, targets=0, title=notice.title, message="no notification targets configured")
    bundle = apprise.Apprise()
    invalid = sum(0 if bundle.add(url) else 1 for url in urls)
    if len(bundle) == 0:
        return NotifyResult(
            sent=False, targets=len(urls), invalid=invalid, title=notice.title, message="no valid apprise URL"
        )
    kind = {
        "success": apprise.NotifyType.SUCCESS,
        "info": apprise.NotifyType.INFO,
        "warning": apprise.NotifyType.WARNING,
        "failure": apprise.NotifyType.FAILURE,
    }[notice.kind]
    ok = bool(bundle.notify(body=notice.body, title=notice.title, notify_type=kind, body_format="markdown"))
    message = "sent" if ok else "a notification target refused or could not be reached"
    if invalid:
        message += f"; {invalid} URL(s) not understood by apprise"
    return NotifyResult(
        sent=ok and not invalid, targets=len(urls), invalid=invalid, title=notice.title, message=redact_secrets(message)
    )
