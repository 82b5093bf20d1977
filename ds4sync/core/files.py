"""The one atomic write and the one log-tail reader.

Every file ds4sync persists (run records, reports, registries, scrubbed logs) goes through
:func:`write_atomic`: a temporary file in the same folder, flushed and fsynced, then
``os.replace``, so a reader or a kill never sees half a file. Log tails are read from the end
of the file in bounded blocks, so a multi-gigabyte build log costs a few kilobytes of memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ds4sync.core import fault
from ds4sync.core.redact import redact_data, redact_secrets

#: How much of a log's end :func:`tail_lines` reads at most (bytes); older lines are not looked at.
TAIL_MAX_BYTES = 256 * 1024


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` (text is UTF-8) through a temporary file and ``os.replace``.

    The folder is created when missing. On any error the temporary file is removed and ``path``
    is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        fault.point("atomic-write.before-replace")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_output(path: Path, data: str | bytes, *, option: str = "--out") -> None:
    """:func:`write_atomic` for a file a person named (through ``option``); the folder is created when missing.

    Raises:
        ConfigError: the file cannot be written there (the OS's reason, the path, and the fix).
    """
    from ds4sync.core.errors import ConfigError

    try:
        write_atomic(path, data)
    except OSError as exc:
        raise ConfigError(
            f"cannot write this file ({exc.strerror or exc})",
            where=str(path),
            fix=f"pass {option} a path in a folder you can write to",
        ) from exc


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON (non-JSON values through ``str``) with :func:`write_atomic`.

    Secrets are redacted on the way (:func:`ds4sync.core.redact.redact_data`): no state file
    (record, cache entry, registry) keeps a token, a password or a secret variable's value.
    """
    write_atomic(path, json.dumps(redact_data(data), indent=2, default=str) + "\n")


def tail_lines(path: Path | None, lines: int, *, max_bytes: int = TAIL_MAX_BYTES) -> tuple[str, ...]:
    """The last ``lines`` lines of a text file, read backwards in blocks; ``()`` when there is no file.

    At most ``max_bytes`` from the end are read, so the first returned line may be cut when a
    single line is longer than that. Undecodable bytes are replaced.
    """
    if path is None or lines <= 0 or not Path(path).is_file():
        return ()
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        end = handle.tell()
        start, chunk = end, b""
        while start > 0 and chunk.count(b"\n") <= lines and end - start < max_bytes:
            step = min(8192, start, max_bytes - (end - start))
            start -= step
            handle.seek(start)
            chunk = handle.read(step) + chunk
    text = chunk.decode("utf-8", errors="replace").splitlines()
    return tuple(text[-lines:])


def redact_file(path: Path, *, extra: Iterable[str] = ()) -> bool:
    """Rewrite the text file ``path`` redacted (``redact_secrets``), atomically; whether it changed."""
    if not path.is_file():
        return False
    text = path.read_text(encoding="utf-8", errors="replace")
    clean = redact_secrets(text, extra=extra)
    if clean == text:
        return False
    write_atomic(path, clean)
    return True
