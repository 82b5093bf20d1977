"""The model-endpoint resolver: an OpenAI-compatible chat endpoint (``merge.endpoint`` in ds4sync.yaml)
asked for one hunk's replacement, given the hunk's provenance packet. Its reply is a proposal: the
caller validates it (:func:`ds4sync.merge.resolvers.resolve_file`) and never records it as a person's.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ds4sync.core.redact import redact_secrets, register_secret_names, register_secret_values
from ds4sync.merge.resolvers import Answer, HunkPacket, reply_text
from ds4sync.models.merge_hunks import HunkSource
from ds4sync.models.merge_settings import EndpointConfig

SYSTEM = (
    "You resolve one git merge conflict hunk in a downstream fork. Keep the fork's feature and take "
    "upstream's change. Reply with one fenced code block holding the region exactly: the context lines "
    "before the hunk unchanged, your resolution, the context lines after the hunk unchanged. No markers."
)


def prompt(packet: HunkPacket) -> str:
    """The user message for ``packet``: path, the three texts, the context, and the provenance."""
    hunk = packet.hunk
    owners = [
        {"patchset": o.patchset, "title": o.title, "rationale": o.rationale, "matched_by": list(o.matched_by)}
        for o in hunk.owners
    ]
    provenance = {
        "upstream_commits": [_commit(c) for c in hunk.upstream_commits],
        "fork_commits": [_commit(c) for c in hunk.fork_commits],
        "owning_patchsets": owners,
    }
    return (
        f"File: {packet.path} (hunk {hunk.index})\n\n"
        f"Context before the hunk (return unchanged):\n```\n{packet.region.before}```\n"
        f"Fork side:\n```\n{hunk.fork}```\n"
        f"Merge-base:\n```\n{hunk.base}```\n"
        f"Upstream side:\n```\n{hunk.upstream}```\n"
        f"Context after the hunk (return unchanged):\n```\n{packet.region.after}```\n"
        f"Provenance:\n{json.dumps(provenance, indent=1)}\n"
    )


def _commit(commit: object) -> dict[str, object]:
    data = {"sha": getattr(commit, "sha", "")[:12], "subject": getattr(commit, "subject", "")}
    pr = getattr(commit, "pr", None)
    return data | ({"pr": pr} if pr is not None else {})


@dataclass
class EndpointResolver:
    """Asks ``config``'s endpoint for each hunk (httpx, one request per hunk, ``timeout_s`` each).

    A failed request (timeout, refused connection, an HTTP error, a reply without text) is an
    :class:`Answer` without text whose reason says what happened; the API key never appears in it.
    """

    config: EndpointConfig
    name: HunkSource = "model"
    _key: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.config.key_env:
            register_secret_names([self.config.key_env])
            self._key = os.environ.get(self.config.key_env) or None
            if self._key:
                register_secret_values([self._key])

    def answer(self, packet: HunkPacket) -> Answer | None:
        """The endpoint's reply for ``packet`` (text extracted from a fenced block when there is one)."""
        import httpx

        body = {
            "model": self.config.model,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt(packet)}],
            "temperature": 0,
            "max_tokens": self.config.max_tokens,
        }
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        url = self.config.url.rstrip("/") + "/chat/completions"
        detail = self.config.model
        try:
            reply = httpx.post(url, json=body, headers=headers, timeout=self.config.timeout_s)
        except httpx.TimeoutException:
            return Answer("model", None, detail, f"the endpoint did not answer within {self.config.timeout_s:g} s")
        except httpx.HTTPError as exc:
            return Answer("model", None, detail, redact_secrets(f"request failed: {type(exc).__name__}: {exc}"))
        if reply.status_code != 200:
            return Answer("model", None, detail, redact_secrets(f"HTTP {reply.status_code}: {reply.text[:200]}"))
        try:
            content = reply.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return Answer("model", None, detail, "the reply is not an OpenAI chat completion")
        if not isinstance(content, str) or not content.strip():
            return Answer("model", None, detail, "the reply holds no text")
        return Answer("model", reply_text(content), detail)
