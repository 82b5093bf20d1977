"""Settings of the model endpoint that proposes conflict-hunk resolutions (``merge.endpoint`` in ds4sync.yaml)."""

from __future__ import annotations

from pydantic import Field

from ds4sync.core.model import FrozenModel


class EndpointConfig(FrozenModel):
    """An OpenAI-compatible chat endpoint asked for a hunk's replacement (its proposals are validated, never
    a person's).

    ``url``: the API base (``http://host:8000/v1``; ``/chat/completions`` is appended); ``model``: the
    model name sent; ``key_env``: the environment variable holding the API key (its value is
    redacted wherever ds4sync writes); ``timeout_s``: seconds per request; ``context_lines``: lines of
    merged text shown (and required back unchanged) either side of a hunk; ``accept_paths``: globs of
    paths whose validated proposals are staged without ``resume --accept-proposals``.
    """

    url: str
    model: str
    key_env: str | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    max_tokens: int = Field(default=2048, ge=1)
    context_lines: int = Field(default=3, ge=1, le=20)
    accept_paths: tuple[str, ...] = ()
