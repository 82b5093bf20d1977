"""Environment-only failure classification: the first rule whose pattern matches wins."""

from __future__ import annotations

from collections.abc import Iterable

from ds4sync.gates.definition import EnvFailureRule


def classify(rules: Iterable[EnvFailureRule], *, failure_text: str, log_text: str = "") -> EnvFailureRule | None:
    """The first rule matching this failure (its message and traceback) or the gate's log, else None."""
    return next((rule for rule in rules if rule.matches(failure_text=failure_text, log_text=log_text)), None)
