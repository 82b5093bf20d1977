"""Counted nouns for messages a person reads: ``1 conflicted file``, ``2 conflicted files``."""

from __future__ import annotations


def many(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, with ``plural`` (default ``noun + "s"``) unless ``count`` is 1."""
    return f"{count} {noun if count == 1 else (plural or noun + 's')}"
