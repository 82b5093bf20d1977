"""One error base, the exit codes, and the one-line form every error takes.

Expected failures (a failing gate, a conflict that needs a person) are results, not
exceptions. Exceptions here are for input a person must fix and for states that stop a
command before it changes anything. Anything else is a bug (exit 3).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes of every ds4sync command."""

    OK = 0
    FAILED = 1  # a gate, build or invariant failed
    USAGE = 2  # bad arguments, config or repository state
    INTERNAL = 3  # a bug: traceback saved to a file
    NEEDS_PERSON = 4  # a person must act (conflicts, adaptation, stale run)
    BUDGET = 5  # the nightly time budget ran out; unfinished gates are recorded incomplete
    TRANSIENT = 6  # the forge or a notification target was unreachable or rate-limited; try again later
    NOT_MEASURED = 7  # a measurement could not be made (no server, lost requests, no readable result); not a verdict


class Ds4syncError(Exception):
    """Base of the package's errors: what is wrong, where, and how to fix it.

    Args:
        what: the problem, as one short sentence fragment.
        where: the file, ref, key path or repository it concerns.
        fix: what the person should do next.
    """

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.where = where
        self.fix = fix

    def one_line(self) -> str:
        """The single line printed for this error."""
        parts = [self.what]
        if self.where:
            parts[0] = f"{self.where}: {self.what}"
        if self.fix:
            parts.append(self.fix)
        return "; ".join(parts)


class ConfigError(Ds4syncError):
    """ds4sync.yaml or a profile file is malformed or names something unknown."""


class GitError(Ds4syncError):
    """A git operation failed on input the person controls (unknown ref, missing remote...)."""


class StateError(Ds4syncError):
    """The run state forbids this command (no run to resume, a run already in progress...)."""


class NeedsPersonError(Ds4syncError):
    """The command cannot go on until a person acts; nothing was changed."""

    exit_code = ExitCode.NEEDS_PERSON


class ToolMissingError(Ds4syncError):
    """A required external tool (nvcc, cmake, a python) is not available."""
