"""Credential shapes from a maintained detector, read as data, for :mod:`ds4sync.core.redact`.

The rule set is `detect-secrets`' (Yelp): every regex-based plugin's ``denylist`` (AWS, Azure,
GitHub, GitLab, Slack, Stripe, SendGrid, Twilio, JWT, PyPI, basic-auth URLs ...) and its keyword
detector (a quoted value assigned to a secret-sounding name, e.g. ``"SecretAccessKey": "..."``),
taken from its plugin registry so new plugins come with upgrades. Public IPv4 addresses are not
secrets and are left alone; its private-key plugin only names headers, so PEM blocks are handled
here whole. Shapes it does not carry (from gitleaks' rules): Google API keys ``AIza...``, npm
tokens ``npm_...``, Stripe keys of any length. Plus two heuristics of its entropy plugins:
a high-entropy value next to a secret-like key (``SecretAccessKey: wJal...``), and a run of 40 or more
base64 characters of high entropy (the body of a PEM key whose header was cut off, e.g. in a log tail).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Iterator
from typing import Any, cast

#: detect-secrets plugins whose findings are not credentials (a public IP address), or that only
#: name a header (private keys: the PEM rule below takes the whole block).
_NOT_SECRETS = frozenset({"IPPublicDetector", "PrivateKeyDetector"})

_EXTRA_SHAPES = (
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),  # gitleaks gcp-api-key
    re.compile(r"\bnpm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),  # gitleaks npm-access-token
    re.compile(r"\b[rs]k_(?:live|test|prod)_[0-9A-Za-z]{10,99}\b"),  # gitleaks stripe-access-token
)
_PEM_BLOCK = re.compile(
    r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
# A base64 run of a key's length (a PEM body line is 64), wherever it stands: alone on a line, after
# pytest's ``E   `` prefix, between escaped line breaks (JUnit XML's ``&#10;``, JSON's ``\n``).
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/=])([A-Za-z0-9+/]{40,}={0,2})(?![A-Za-z0-9+/=])")
#: Words a secret-like key holds; a line without one skips the rules that need such a key.
_KEY_WORD = re.compile(
    r"(?i)secret|token(?!s|iz)|password|passwd|pwd|api_?key|access_?key|private_?key|credential|auth_?key"
)
_KEYED_VALUE = re.compile(r"[A-Za-z0-9_.-]*[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9+/=_.~-]{16,})")
_KEYISH = re.compile(r"(?i)key|pw|pass|token|secret")
#: A line where detect-secrets' keyword detector can find something: a key word its list holds, then
#: an assignment or comparison (its patterns all have one); the detector itself is slow on long lines.
_KEYWORD_LINE = re.compile(r"(?i)(?:key|pass|pwd|secret|contrase)\w*[\]'\"]{0,2}\s*(?:[:=!]|=>)")
#: Shannon entropy (bits per character) above which a value is taken for random: detect-secrets'
#: default limits are 4.5 for base64 and 3.0 for hex; 3.5 sits between (values beside a secret
#: name are short, and the name already says what they are).
KEYED_ENTROPY = 3.5
LINE_ENTROPY = 4.5


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value`` over its own characters (0.0 for an empty string)."""
    if not value:
        return 0.0
    counts = {c: value.count(c) for c in set(value)}
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _random_base64(value: str) -> bool:
    """Whether a base64 run looks random (a key body), not a path or a long name: high entropy, digits and
    both cases, and few ``/`` (a path has one every few characters)."""
    return (
        shannon_entropy(value) >= LINE_ENTROPY
        and any(c.isdigit() for c in value)
        and any(c.islower() for c in value)
        and any(c.isupper() for c in value)
        and value.count("/") <= len(value) // 16
    )


@functools.cache
def _denylist() -> tuple[tuple[re.Pattern[str], ...], tuple[re.Pattern[str], ...]]:
    """The plugins' patterns: (those that need a key word such as ``key``/``pass``/``token`` in the line,
    every other one). The first kind (vendor name, then a key word) is slow on long lines: it runs
    only where :data:`_KEYISH` finds a key word."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    keyed: list[re.Pattern[str]] = []
    plain: list[re.Pattern[str]] = []
    plugins: list[type[Any]] = list(get_mapping_from_secret_type_to_class().values())
    for plugin in plugins:
        if issubclass(plugin, RegexBasedDetector) and plugin.__name__ not in _NOT_SECRETS:
            denylist = cast("Iterable[re.Pattern[str]]", plugin.denylist)  # a class attribute of regex plugins
            for pattern in denylist:
                (keyed if pattern.pattern.startswith(r"(?:(?<=\W)|(?<=^))") else plain).append(pattern)
    return tuple(keyed), tuple(plain)


@functools.cache
def _any_shape() -> re.Pattern[str]:
    """One pattern matching where any of the plain shapes may match: a line none of them can match
    (most log lines) is scanned once instead of once per shape."""
    _keyed, plain = _denylist()
    flags = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.VERBOSE, "x"))
    parts = []
    for pattern in (*plain, *_EXTRA_SHAPES):
        letters = "".join(letter for flag, letter in flags if pattern.flags & flag)
        parts.append(f"(?{letters}:{pattern.pattern})" if letters else f"(?:{pattern.pattern})")
    return re.compile("|".join(parts))


@functools.cache
def _keyword_detector() -> Any:  # detect-secrets' KeywordDetector
    from detect_secrets.plugins.keyword import KeywordDetector

    return KeywordDetector()


def secret_values(text: str) -> Iterator[str]:
    """The credential values in ``text``, each as it appears there (without quotes or separators)."""
    keyed, plain = _denylist()
    keyish = _KEYISH.search(text) is not None
    candidates = (*plain, *_EXTRA_SHAPES) if _any_shape().search(text) else ()
    for pattern in (*(keyed if keyish else ()), *candidates):
        for match in pattern.finditer(text):
            groups = [g for g in match.groups() if g]
            value = (groups[0] if groups else match.group(0)).strip(" \t\r\n\"'=:")
            if len(value) >= 8:
                yield value
    if keyish:
        for line in text.splitlines():
            if _KEYWORD_LINE.search(line):
                yield from (v for v in _keyword_detector().analyze_string(line) if v and len(v) >= 6)
        for word in _KEY_WORD.finditer(text):
            value = _KEYED_VALUE.match(text, word.end())
            if value and shannon_entropy(value.group(1)) >= KEYED_ENTROPY:
                yield value.group(1)
    for match in _BASE64_RUN.finditer(text.replace("&#10;", "\n").replace("\\n", "\n ")):
        if _random_base64(match.group(1)):
            yield match.group(1)


def redact_shapes(text: str, marker: str) -> str:
    """``text`` with PEM private key blocks and every value of :func:`secret_values` replaced by ``marker``."""
    text = _PEM_BLOCK.sub(lambda m: f"{m.group(1)}{marker}{m.group(2)}", text)
    for value in sorted(set(secret_values(text)), key=len, reverse=True):
        text = text.replace(value, marker)
    return text
