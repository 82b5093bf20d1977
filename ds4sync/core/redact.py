"""Redaction of secrets (always) and of private machine details (``--public``): the one rule set.

Secrets: anything shaped like a credential (the rule set of the `detect-secrets` detector, read as
data, plus PEM private key blocks and high-entropy values next to secret-like keys: see
:mod:`ds4sync.core.secretrules`; and GitHub ``ghp_``/``github_pat_`` tokens,
Hugging Face ``hf_``, OpenAI-style ``sk-``, AWS ``AKIA``/``ASIA`` key ids, Slack ``xox?-``,
GitLab ``glpat-``, JWTs, ``Bearer ...``/``Authorization:`` values, ``user:pass@`` and token
userinfo in URLs, values of ``*TOKEN*``/``*SECRET*``/``*PASSWORD*``/``*KEY*`` assignments and
of ``--token VALUE`` style arguments), plus the literal values of this process's environment
variables whose names look secret (:func:`is_secret_name`) and of the variables the person
lists (``redact.env`` in ds4sync.yaml, see :func:`register_secret_names`). They are redacted
where they are written: the run record on save, child output and logs, every line the CLI
prints, build logs and reports.
Private details, removed only for a public report: home directories, RFC 1918 / loopback /
link-local / CGNAT IPv4 and ULA IPv6 addresses, internal host names (``*.local``,
``*.internal``, ``*.lan``, ``*.corp``, ``*.home.arpa``...), and host names the record names.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TextIO

from ds4sync.core.secretrules import redact_shapes

SECRET = "[redacted]"
PRIVATE_IP = "[private-ip]"
PRIVATE_HOST = "[private-host]"
MARKERS = frozenset({SECRET, PRIVATE_IP, PRIVATE_HOST})

# Environment-variable style names (HF_TOKEN, AWS_SECRET_ACCESS_KEY) with = or :, any case with = only.
_SECRET_NAME = r"[A-Z0-9_]*(?:TOKEN(?!S)|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)[A-Z0-9_]*"
_SECRET_WORD = r"[A-Za-z0-9_-]*(?i:token(?!s)|secret|password|passwd|api_?key|access_?key)[A-Za-z0-9_]*"
_SECRETS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)(authorization\s*[:=]\s*)(?:(?:bearer|basic|token|digest)\s+)?[^\s'\",]+"), rf"\1{SECRET}"),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {SECRET}"),
    (re.compile(rf"\b({_SECRET_NAME})(\s*[=:]\s*)(['\"]?)(?=[^\s'\",;]*[A-Za-z])[^\s'\",;]+\3"), rf"\1\2{SECRET}"),
    (re.compile(rf"\b({_SECRET_WORD})(=)(['\"]?)(?=[^\s'\",;&]*[A-Za-z])[^\s'\",;&]+\3"), rf"\1\2{SECRET}"),
    (
        re.compile(
            r"(?i)(?<![\w-])(--?(?:[a-z0-9][a-z0-9_-]*)?(?:token|secret|password|passwd|api[-_]?key|access[-_]?key))"
            r"(\s+|['\"],\s*['\"])"
            r"(?!-)[^\s'\",]+"
        ),
        rf"\1\2{SECRET}",
    ),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), SECRET),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), SECRET),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), SECRET),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), SECRET),
    (re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"), SECRET),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), SECRET),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), SECRET),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+"), SECRET),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@'\"]+:[^/\s@'\"]+@"), rf"\1{SECRET}@"),
)
_HOME = (
    (re.compile(r"/(?:home|Users)/[^/\s'\"`]+"), "~"),
    (re.compile(r"(?<![\w.~])/root(?=/|\b)"), "~"),
    (re.compile(r"(?i)\b[A-Z]:\\Users\\[^\\\s'\"`]+"), "~"),
)
_OCTET = r"(?:25[0-5]|2[0-4]\d|1?\d?\d)"
_PRIVATE_IPV4 = re.compile(
    r"(?<![\d.])(?:10\.{o}\.{o}\.{o}|192\.168\.{o}\.{o}|172\.(?:1[6-9]|2\d|3[01])\.{o}\.{o}"
    r"|127\.{o}\.{o}\.{o}|169\.254\.{o}\.{o}|100\.(?:6[4-9]|[7-9]\d|1[01]\d|12[0-7])\.{o}\.{o})(?![\d.]*\d)".replace(
        "{o}", _OCTET
    )
)
_PRIVATE_IPV6 = re.compile(r"(?i)(?<![\w:])f[cd][0-9a-f]{2}:[0-9a-f:]*[0-9a-f](?![\w:])")
_PRIVATE_HOSTNAME = re.compile(
    r"(?i)\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+"
    r"(?:local|localdomain|internal|intranet|lan|corp|home\.arpa|private|localhost)\b"
)
_HOST_KEYS = frozenset({"host", "hostname", "node", "machine", "server_host"})


_SECRET_NAME_RE = re.compile(
    r"(?i:[A-Z0-9_.-]*(?:TOKEN(?!S|IZ)|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY"
    r"|CREDENTIAL|AUTH(?!OR(?!I)))[A-Z0-9_.-]*)|[A-Z][A-Z0-9_]*_KEY"
)
_SECRET_FLAG_RE = re.compile(r"(?i)^--?[a-z0-9_-]*(?:token|secret|password|passwd|api[-_]?key|access[-_]?key)$")
_TOKEN_USERINFO_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[A-Za-z0-9_-]{16,}@")
MIN_SECRET_VALUE = 6  # shorter values of secret-named variables would redact ordinary words
_listed_names: set[str] = set()
_listed_values: set[str] = set()
_values_cache: tuple[int, tuple[str, ...]] = (0, ())


def is_secret_name(name: str) -> bool:
    """Whether a variable (or key) name looks like it holds a credential.

    ``GITHUB_TOKEN``, ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``, ``OPENAI_API_KEY``,
    ``WANDB_KEY`` (upper-case ``*_KEY``), ``AUTH_HEADER`` and names listed with
    :func:`register_secret_names` do; ``MAX_TOKENS``, ``TOKENIZER``, ``GIT_AUTHOR_NAME`` and a
    lower-case ``cache_key`` do not.
    """
    return name in _listed_names or _SECRET_NAME_RE.fullmatch(name) is not None


def register_secret_names(names: Iterable[str]) -> None:
    """Also treat these variable names as secret (``redact.env`` of ds4sync.yaml), for the whole process."""
    _listed_names.update(n for n in names if n)


def register_secret_values(values: Iterable[str]) -> None:
    """Also redact these literal values wherever they appear (values a caller knows to be secret)."""
    _listed_values.update(v for v in values if v and len(v) >= MIN_SECRET_VALUE)


def secret_values(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Literal values to redact: those of secret-named variables of ``env`` (default: this process's
    environment) and the registered ones, longest first."""
    import os

    source = os.environ if env is None else env
    key = hash(
        (
            frozenset(source.items()) if env is not None else tuple(source.items()),
            len(_listed_names),
            len(_listed_values),
        )
    )
    global _values_cache
    if env is None and _values_cache[0] == key:
        return _values_cache[1]
    found = {v for k, v in source.items() if is_secret_name(k) and len(v) >= MIN_SECRET_VALUE}
    found |= _listed_values
    values = tuple(sorted(found, key=len, reverse=True))
    if env is None:
        _values_cache = (key, values)
    return values


def redact_secrets(text: str, *, extra: Iterable[str] = ()) -> str:
    """``text`` with every credential-shaped substring and every known secret value replaced by ``[redacted]``.

    ``extra`` adds literal values known to be secret here (a child's secret-named overrides).
    """
    extras = sorted((v for v in extra if len(v) >= MIN_SECRET_VALUE), key=len, reverse=True)
    return _redact_known(text, (*secret_values(), *extras))


def _redact_known(text: str, values: tuple[str, ...]) -> str:
    """:func:`redact_secrets` with its literal values already resolved: a pure function of both."""
    for value in values:
        if value in text:
            text = text.replace(value, SECRET)
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return redact_shapes(_TOKEN_USERINFO_RE.sub(rf"\1{SECRET}@", text), SECRET)


# The run record is saved at every phase's start and end, and each save redacts every string of it; most
# of them are the same strings again (a needs-person merge of the vLLM fork: ~6,000 strings, 8 saves).
# Large enough for one record's strings, so a save after the first costs a lookup per string.
_redact_known_cached = functools.lru_cache(maxsize=1 << 16)(_redact_known)


class RedactFilter(logging.Filter):
    """A logging filter that redacts each record's message (attach it to every handler that writes)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Replace the record's message by its redacted form; never drops a record."""
        record.msg = redact_secrets(record.getMessage())
        record.args = ()
        return True


class RedactedStream:
    """A text stream that redacts what is written before passing it to ``target()`` (e.g. ``sys.stdout``).

    ``target`` is called on every write, so a stream swapped later (a test's capture) is followed.
    """

    def __init__(self, target: Callable[[], TextIO]) -> None:
        self._target = target

    def write(self, text: str) -> int:
        """Write ``text`` redacted; returns the length of ``text`` (what the caller asked to write)."""
        self._target().write(redact_secrets(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)


def redact_private(text: str, *, hosts: Iterable[str] = ()) -> str:
    """``text`` without home directories, private addresses, internal or named host names."""
    for pattern, replacement in _HOME:
        text = pattern.sub(replacement, text)
    text = _PRIVATE_IPV4.sub(PRIVATE_IP, text)
    text = _PRIVATE_IPV6.sub(PRIVATE_IP, text)
    text = _PRIVATE_HOSTNAME.sub(PRIVATE_HOST, text)
    for host in sorted(set(hosts), key=len, reverse=True):
        text = re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", PRIVATE_HOST, text)
    return text


def redact(text: str, *, public: bool, hosts: Iterable[str] = ()) -> str:
    """Secrets always; private details too when ``public``."""
    text = redact_secrets(text)
    return redact_private(text, hosts=hosts) if public else text


def named_hosts(data: Any) -> set[str]:
    """Host names the record itself names (values of ``host``/``hostname``/``node`` keys, any depth).

    Only names of at least three characters that are not plain words of the report are taken.
    """
    found: set[str] = set()
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, value in item.items():
                if str(key).lower() in _HOST_KEYS and isinstance(value, str) and len(value.strip()) >= 3:
                    found.add(value.strip())
                else:
                    stack.append(value)
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return found


def redact_data(data: Any, *, public: bool = False, hosts: Iterable[str] = ()) -> Any:
    """Every string of a JSON-like value (keys included) redacted as :func:`redact` does.

    The value of a key whose name looks secret (:func:`is_secret_name`) is redacted whole, and
    so is a list item that follows a ``--token``-style flag (``["--token", "abc"]``).
    """
    hosts = tuple(hosts)
    values = secret_values()  # once per value, not per string: the key reads the whole environment

    def text(value: str) -> str:
        clean = _redact_known_cached(value, values)
        return redact_private(clean, hosts=hosts) if public else clean

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return text(item)
        if isinstance(item, Mapping):
            return {
                text(str(k)): SECRET if isinstance(v, str) and v and is_secret_name(str(k)) else walk(v)
                for k, v in item.items()
            }
        if isinstance(item, list | tuple):
            out = []
            for i, v in enumerate(item):
                flagged = i > 0 and isinstance(item[i - 1], str) and _SECRET_FLAG_RE.match(item[i - 1]) is not None
                out.append(SECRET if flagged and isinstance(v, str) else walk(v))
            return out
        return item

    return walk(data)
