"""Defensive readers for the run record's JSON: wrong types and missing keys become defaults.

Phase results are written by other modules whose field names can change; every reader
here takes ``Any`` and returns a plain value of the asked type, never raising.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from ds4sync.core.redact import MARKERS
from ds4sync.report.view import CommandView, Fact, Tally

_FRACTION = re.compile(r"(\d+)\s*/\s*(\d+)\s+([A-Za-z][\w -]*)")


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a mapping, else an empty dict."""
    return dict(value) if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a list or tuple, else an empty list."""
    return list(value) if isinstance(value, list | tuple) else []


def as_str(value: Any) -> str:
    """``value`` as text; None and containers become ''."""
    if value is None or isinstance(value, Mapping | list | tuple):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def as_int(value: Any) -> int | None:
    """An int from an int, an integral float or a digit string; otherwise None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def as_float(value: Any) -> float | None:
    """A float from a number or a numeric string; otherwise None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def first(data: Mapping[str, Any], *keys: str) -> Any:
    """The value of the first key present with a non-None value."""
    for key in keys:
        if data.get(key) is not None:
            return data[key]
    return None


def tally(labels: Iterable[str]) -> tuple[Tally, ...]:
    """Counts of each label, most frequent first, ties in first-seen order."""
    return tuple(Tally(label=label, count=n) for label, n in Counter(labels).most_common())


def fractions(text: str) -> list[tuple[str, int, int]]:
    """``[(name, passed, total)]`` from text like ``"7/7 imports, 4/4 op schemas"``."""
    return [(m.group(3).strip(), int(m.group(1)), int(m.group(2))) for m in _FRACTION.finditer(text)]


def env_facts(env: Any) -> tuple[Fact, ...]:
    """Environment overrides as facts, in the order given; a list of ``K=V`` strings works too."""
    if isinstance(env, Mapping):
        return tuple(Fact(label=str(k), value=as_str(v)) for k, v in env.items())
    facts = []
    for item in as_list(env):
        key, sep, val = as_str(item).partition("=")
        if sep:
            facts.append(Fact(label=key, value=val))
    return tuple(facts)


def command(data: Any, *, label: str) -> CommandView | None:
    """The exact command a gate or build ran, from an argv list or a shell string.

    Reads ``command``/``cmd``/``argv`` and ``env``/``env_overrides``/``environment`` and ``cwd``.
    """
    data = as_dict(data)
    raw = first(data, "command", "cmd", "argv", "command_line")
    env = env_facts(first(data, "env_overrides", "env", "environment"))
    if isinstance(raw, list | tuple):
        argv = tuple(as_str(a) for a in raw)
        text = shlex.join(argv)
    elif isinstance(raw, str) and raw.strip():
        argv, text = (), raw.strip()
    else:
        return None
    prefix = " ".join(f"{f.label}={f.value if f.value in MARKERS else shlex.quote(f.value)}" for f in env)
    return CommandView(
        label=label, env=env, argv=argv, text=f"{prefix} {text}" if prefix else text, cwd=as_str(data.get("cwd"))
    )
