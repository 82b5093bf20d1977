"""Logging for one CLI invocation: configured here only, never at import time.

Core logs every git and child command at DEBUG on the ``ds4sync`` logger (redacted argv).
This module sends those records to the run's log file (``<state>/runs/<id>/logs/ds4sync.log``
while a run is active, else ``<state>/logs/ds4sync.log``) and, with ``-v``, to stderr.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

LOGGER = "ds4sync"
_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
_handlers: list[logging.Handler] = []


class RunLogHandler(logging.Handler):
    """Append records to the active run's log, else to the state dir's log (folders made on demand)."""

    def __init__(self, state_root: Path, header: str) -> None:
        super().__init__(logging.DEBUG)
        self.root = state_root
        self.header = header
        self._written: set[Path] = set()
        self.broken = False
        self.setFormatter(logging.Formatter(_FORMAT))

    def target(self) -> Path:
        """The file the next record goes to."""
        pointer = self.root / "current"
        try:
            run_id = pointer.read_text().strip()
        except OSError:
            run_id = ""
        if run_id and (self.root / "runs" / run_id).is_dir():
            return self.root / "runs" / run_id / "logs" / "ds4sync.log"
        return self.root / "logs" / "ds4sync.log"

    def emit(self, record: logging.LogRecord) -> None:
        """Write one record (with this invocation's command line before its first record in a file)."""
        if self.broken:
            return
        try:
            path = self.target()
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as fh:
                if path not in self._written:
                    from ds4sync.core.redact import redact_secrets  # here: a command that logs nothing never loads it

                    self._written.add(path)
                    fh.write(f"--- pid {os.getpid()}: {redact_secrets(self.header)}\n")
                fh.write(self.format(record) + "\n")
        except Exception as exc:  # a log that cannot be written must not stop the command, nor flood stderr
            self._give_up(exc)

    def _give_up(self, exc: Exception) -> None:
        """Say once, in one line, that the log cannot be written, and write no more records to it."""
        import sys

        self.broken = True
        why = getattr(exc, "strerror", None) or exc
        print(f"ds4sync: warning: cannot write the log under {self.root} ({why}); going on without it", file=sys.stderr)


def configure(*, verbose: bool, argv: list[str]) -> None:
    """Set up the ``ds4sync`` logger for this invocation: stderr at DEBUG with ``-v``, else warnings only.

    The command line heads each log file the command writes to, redacted as it is written there, so a command
    that logs nothing (``--help``, ``status``) never loads the secret scanners.
    """
    close()
    logger = logging.getLogger(LOGGER)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    terminal = logging.StreamHandler()
    terminal.setLevel(logging.DEBUG if verbose else logging.WARNING)
    terminal.setFormatter(logging.Formatter("ds4sync: %(message)s"))
    _add(logger, terminal)
    global _command_line
    _command_line = "ds4sync " + " ".join(argv)


_command_line = "ds4sync"


def attach_run_log(state_root: Path) -> None:
    """Also write every record to the run's log under ``state_root`` (once per state dir)."""
    logger = logging.getLogger(LOGGER)
    root = Path(state_root)
    if any(isinstance(h, RunLogHandler) and h.root == root for h in _handlers):
        return
    _add(logger, RunLogHandler(root, _command_line))


def close() -> None:
    """Remove and close this module's handlers (the end of an invocation)."""
    logger = logging.getLogger(LOGGER)
    while _handlers:
        handler = _handlers.pop()
        logger.removeHandler(handler)
        handler.close()


def _add(logger: logging.Logger, handler: logging.Handler) -> None:
    from ds4sync.core.redact import RedactFilter

    handler.addFilter(RedactFilter())
    logger.addHandler(handler)
    _handlers.append(handler)
