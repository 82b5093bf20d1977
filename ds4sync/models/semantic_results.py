"""What the semantic check found: breaks a merge made without a textual conflict, each with its culprit.

Models only (the run record names them without importing git or ast); :mod:`ds4sync.semantic.check`
produces them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ds4sync.core.model import FrozenModel

#: What a finding is about. ``lint``: a pyflakes finding (ruff's F rules) the merged file has and
#: neither the fork's nor upstream's file has; ``unresolved-import``: an import of the package that
#: no longer resolves against the merged tree; ``removed-definition``: a ``module.attr`` or
#: ``Class.attr`` reference to a definition upstream removed; ``call-contract``: a call that no
#: longer binds to the signature upstream changed; ``return-arity``: a tuple unpack of a call whose
#: returned tuple upstream resized; ``lost-wiring``: a fork definition referenced on the fork head
#: and by nothing in the merged tree.
FindingKind = Literal[
    "lint",
    "unresolved-import",
    "removed-definition",
    "call-contract",
    "return-arity",
    "lost-wiring",
]
#: ``blocker`` fails verify unless the profile acknowledges it; ``warning`` is shown only.
Severity = Literal["blocker", "warning"]
#: Where the broken line came from: an upstream change (``culprit`` names the commit), the
#: conflict resolution (a line neither side has), or nothing found in the upstream range.
Origin = Literal["upstream", "conflict resolution", "unknown"]


class Culprit(FrozenModel):
    """The upstream first-parent commit that introduced the change, found by pickaxe (``git log -S``).

    ``pr``: the pull request number from the subject's ``(#NNNN)``, None when it names none.
    """

    commit: str
    subject: str
    pr: int | None = None

    def label(self) -> str:
        """``#41536 <subject> (abc123def456)``, or the subject and short SHA without a PR number."""
        head = f"#{self.pr} " if self.pr is not None else ""
        return f"{head}{self.subject} ({self.commit[:12]})"


class SemanticFinding(FrozenModel):
    """One break in a fork-touched file of the merged tree.

    ``path``/``line``: the fork file and 1-based line in the merged tree. ``symbol``: the name
    the finding is about (``vllm.x.y.func``, ``Class.forward``, a lint code's name). ``defined_in``:
    the upstream file whose change broke it, when one is known. ``patchset``: the id of the
    patch-set whose files or invariants cover ``path``. ``acknowledged``: the profile's reason
    when it accepts this finding (it then no longer fails verify).
    """

    kind: FindingKind
    severity: Severity
    path: str
    line: int
    symbol: str
    message: str
    defined_in: str | None = None
    patchset: str | None = None
    origin: Origin = "unknown"
    culprit: Culprit | None = None
    acknowledged: str | None = None

    @property
    def key(self) -> str:
        """A stable id for acknowledgement: ``<kind>:<path>:<symbol>`` (no line: lines move)."""
        return f"{self.kind}:{self.path}:{self.symbol}"

    def blocking(self) -> bool:
        """Whether this finding fails verify: a blocker nobody acknowledged."""
        return self.severity == "blocker" and self.acknowledged is None

    def line_text(self) -> str:
        """One line: ``path:line kind symbol: message [culprit]``."""
        where = self.culprit.label() if self.culprit else self.origin
        return f"{self.path}:{self.line} {self.kind} {self.symbol}: {self.message} [{where}]"


class SemanticResult(FrozenModel):
    """The semantic check of one merge: what it read and what it found.

    ``merged`` is the tree (plan: merge-tree's tree) or commit (verify: the resolved worktree)
    checked; ``unknown`` the conflicted paths not read (their content is a person's to decide).
    ``files_checked``: fork-touched Python files read from ``merged``; ``upstream_files``: upstream
    Python files whose definitions were diffed. ``seconds``: wall time of the check.
    """

    fork_sha: str
    upstream_sha: str
    merged: str
    merge_base: str
    files_checked: int = 0
    upstream_files: int = 0
    unknown: tuple[str, ...] = ()
    findings: list[SemanticFinding] = Field(default_factory=list)
    seconds: float = 0.0

    def blockers(self) -> list[SemanticFinding]:
        """Findings that fail verify (blockers not acknowledged)."""
        return [f for f in self.findings if f.blocking()]

    def warnings(self) -> list[SemanticFinding]:
        """Findings shown only: warnings and acknowledged blockers."""
        return [f for f in self.findings if not f.blocking()]

    def summary_line(self) -> str:
        """One line for notifications: the breaks with their upstream PR, then the other counts."""
        breaks = [
            f"{f.path}:{f.line} {f.symbol} ({f.culprit.label() if f.culprit else f.origin})" for f in self.blockers()
        ]
        acked = sum(1 for f in self.findings if f.acknowledged)
        warnings = sum(1 for f in self.findings if f.severity == "warning")
        head = f"{len(breaks)} break(s)" + (": " + "; ".join(breaks) if breaks else "")
        return f"{head}; {acked} acknowledged, {warnings} warning(s) in {self.files_checked} fork-touched files"

    @property
    def ok(self) -> bool:
        """No blocking finding."""
        return not self.blockers()

    def __bool__(self) -> bool:
        return self.ok
