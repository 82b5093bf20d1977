"""Redaction of secrets (always) and of private machine details (``--public``).

Secrets: anything shaped like a credential (GitHub ``ghp_``/``github_pat_`` tokens,
Hugging Face ``hf_``, OpenAI-style ``sk-``, AWS ``AKIA``/``ASIA`` key ids, Slack ``xox?-``,
GitLab ``glpat-``, JWTs, ``Bearer ...``/``Authorization:`` values, ``user:pass@`` in URLs,
and values of ``*TOKEN*``/``*SECRET*``/``*PASSWORD*``/``*KEY*`` assignments) never reach a report.
Private details, removed only for a public report: home directories, RFC 1918 / loopback /
link-local / CGNAT IPv4 and ULA IPv6 addresses, internal host names (``*.local``,
``*.internal``, ``*.lan``, ``*.corp``, ``*.home.arpa``...), and host names the record names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

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


def redact_secrets(text: str) -> str:
    """``text`` with every credential-shaped substring replaced by ``[redacted]``."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


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


def redact_data(data: Any, *, public: bool, hosts: Iterable[str] = ()) -> Any:
    """Every string of a JSON-like value (keys included) redacted as :func:`redact` does."""
    hosts = tuple(hosts)
    if isinstance(data, str):
        return redact(data, public=public, hosts=hosts)
    if isinstance(data, Mapping):
        return {
            redact(str(k), public=public, hosts=hosts): redact_data(v, public=public, hosts=hosts)
            for k, v in data.items()
        }
    if isinstance(data, list | tuple):
        return [redact_data(v, public=public, hosts=hosts) for v in data]
    return data
