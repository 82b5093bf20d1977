"""Reading the CLI's ``--json`` envelope in tests, as a script that drives ds4sync would."""

from __future__ import annotations

import json
from typing import Any


def envelope(text: str) -> dict[str, Any]:
    """The one JSON object a ``--json`` command printed; its top-level shape is checked here."""
    body = json.loads(text)
    assert set(body) >= {"schema_version", "command", "ok", "exit_code"}, body
    assert ("data" in body) != ("error" in body), body
    assert body["ok"] == (body["exit_code"] == 0), body
    return body


def data(text: str) -> Any:
    """The ``data`` of a ``--json`` envelope (the command ran and produced a result)."""
    body = envelope(text)
    assert "data" in body, body
    return body["data"]
