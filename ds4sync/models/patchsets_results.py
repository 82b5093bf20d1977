"""The replay and verify phases' record entries (the run record holds them typed), and what they
are made of: invariant results and the check report of a catalogue on a tree.

Apart from the code that writes them (:mod:`~ds4sync.patchsets.invariants`,
:mod:`~ds4sync.patchsets.check`, :mod:`~ds4sync.patchsets.replay`) so that the record can name
them without importing the phases, the patch-set model and its YAML loader.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from ds4sync.core.model import FrozenModel

CHECK_SCHEMA_VERSION = 1
REPLAY_SCHEMA_VERSION = 1
InvariantStatus = Literal["holds", "violated", "deferred"]
PatchSetStatus = Literal["holds", "violated", "advisory-violations", "landed-upstream", "not-carried", "not-applicable"]
PATCHSET_STATUSES: tuple[PatchSetStatus, ...] = (
    "holds",
    "violated",
    "advisory-violations",
    "landed-upstream",
    "not-carried",
    "not-applicable",
)
COUNTED: frozenset[str] = frozenset({"holds", "violated", "advisory-violations"})
ReplayStatus = Literal[
    "retained", "unconfirmed", "landed-upstream", "not-carried", "reapplied", "needs-adaptation", "adapted"
]


class InvariantResult(FrozenModel):
    """One invariant checked on one tree.

    ``status``: holds, violated, or deferred (a ``test`` invariant, run by the gate phase).
    ``detail``: one line of what was (not) found; ``evidence``: ``path:line: text`` of
    matches, or the names a cross reference missed. ``before``: the same invariant on the fork
    head before the merge, for a violation verify found (None: not checked), so that a report
    tells "lost in this merge" (``holds`` before) from "already failing before it" (``violated``).
    """

    patchset: str
    invariant: str
    kind: str
    severity: Literal["blocking", "advisory"]
    status: InvariantStatus
    files: tuple[str, ...] = ()
    detail: str
    evidence: tuple[str, ...] = ()
    before: InvariantStatus | None = None

    @property
    def blocking_violation(self) -> bool:
        """Whether this result fails a sync (violated and not advisory)."""
        return self.status == "violated" and self.severity == "blocking"

    @property
    def since(self) -> str:
        """``lost in this merge``, ``already failing before it`` or ``""`` (no baseline) for a violation."""
        if self.status != "violated" or self.before is None:
            return ""
        return "already failing before it" if self.before == "violated" else "lost in this merge"

    def line(self) -> str:
        """``patch-set / invariant [kind]: detail`` (and the baseline) for logs and error lists."""
        since = f" ({self.since})" if self.since else ""
        return f"{self.patchset} / {self.invariant} [{self.kind}]: {self.detail}{since}"


class PatchSetCheck(FrozenModel):
    """One patch-set on one tree.

    ``status``: holds (every checked invariant holds); violated (a blocking invariant failed);
    advisory-violations (only advisory ones failed: not holding, not failing); landed-upstream
    (replay found its ``drop_when`` true, so its invariants are reported but do not block);
    not-carried (the fork branch does not carry it, per ``catalogue.yaml`` ``branches`` or its
    ``carried_when``: its invariants are reported apart, never as holding or failing);
    not-applicable (the catalogue does not apply to this tree). ``detail`` says why for the
    last three.
    """

    id: str
    title: str
    kind: str
    status: PatchSetStatus
    detail: str = ""
    invariants: tuple[InvariantResult, ...] = ()
    tests: tuple[str, ...] = ()
    metadata_only: bool = False


class CarryScope(FrozenModel):
    """What decides which patch-sets a fork tree carries.

    ``branch``: the fork branch name (matched against ``catalogue.branches``); ``head``: the
    fork commit whose history ``carried_when.since`` is looked up in; ``tree_label``: the
    tree ``carried_when.tree`` was checked on (the fork's own tree, before any merge).
    """

    branch: str | None = None
    head: str | None = None
    tree_label: str = ""


class CheckReport(FrozenModel):
    """A catalogue checked on a tree; ``ok`` when no blocking invariant is violated."""

    schema_version: int = CHECK_SCHEMA_VERSION
    tree: str
    patches_dir: str
    applicable: bool = True
    applies_detail: str = ""
    carry: CarryScope = CarryScope()
    patchsets: tuple[PatchSetCheck, ...] = ()
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether no patch-set is violated."""
        return all(ps.status != "violated" for ps in self.patchsets)

    def __bool__(self) -> bool:
        return self.ok

    def counts(self) -> dict[str, int]:
        """Invariant counts over the patch-sets that count (holds / violated / advisory-violations).

        ``invariants`` = ``holds`` + ``violated`` + ``advisory`` + ``deferred`` + ``not_counted``:
        ``violated`` are blocking violations, ``advisory`` advisory ones (never holding),
        ``not_counted`` every result of a landed-upstream, not-carried or not-applicable
        patch-set. ``lost_in_merge`` / ``failing_before``: blocking violations that held on the
        fork head before the merge / that already failed there (see ``InvariantResult.before``).
        ``patchsets`` is the number of patch-sets; ``patchsets_<status>`` (dashes
        as underscores) how many have each status.
        """
        results = [r for ps in self.patchsets for r in ps.invariants]
        counted = {ps.id for ps in self.patchsets if ps.status in COUNTED}
        inside = [r for r in results if r.patchset in counted]
        out = {
            "patchsets": len(self.patchsets),
            "invariants": len(results),
            "holds": sum(r.status == "holds" for r in inside),
            "violated": sum(r.blocking_violation for r in inside),
            "advisory": sum(r.status == "violated" and r.severity == "advisory" for r in inside),
            "deferred": sum(r.status == "deferred" for r in inside),
            "not_counted": len(results) - len(inside),
            "lost_in_merge": sum(r.blocking_violation and r.before == "holds" for r in inside),
            "failing_before": sum(r.blocking_violation and r.before == "violated" for r in inside),
        }
        for status in PATCHSET_STATUSES:
            out[f"patchsets_{status.replace('-', '_')}"] = sum(ps.status == status for ps in self.patchsets)
        return out

    def violations(self) -> list[InvariantResult]:
        """Blocking violations of patch-sets that count (not landed upstream, catalogue applicable)."""
        counted = {ps.id for ps in self.patchsets if ps.status == "violated"}
        return [r for ps in self.patchsets for r in ps.invariants if r.patchset in counted and r.blocking_violation]

    def summary(self) -> dict[str, object]:
        """The JSON form with counts added (what ``--json`` prints and the record stores)."""
        return {**self.model_dump(mode="json"), "counts": self.counts(), "ok": self.ok}


class ReplayEntry(FrozenModel):
    """What replay did with one patch-set.

    ``evidence``: upstream facts for landed-upstream; ``conflicted``/``rejects``: what a
    person must adapt; ``not_applied``: every file of its patches that ``git apply`` left
    unchanged or half applied; ``git_said``: git apply's own messages (its reason);
    ``invariants``: the results that decided it.
    """

    id: str
    title: str
    status: ReplayStatus
    detail: str
    commit: str | None = None
    evidence: tuple[str, ...] = ()
    conflicted: tuple[str, ...] = ()
    rejects: tuple[str, ...] = ()
    not_applied: tuple[str, ...] = ()
    git_said: tuple[str, ...] = ()
    invariants: tuple[InvariantResult, ...] = ()


class ReplayResult(FrozenModel):
    """The replay phase's record entry; ``pending`` names the patch-set waiting for a person."""

    schema_version: int = REPLAY_SCHEMA_VERSION
    patches_dir: str
    applicable: bool = True
    applies_detail: str = ""
    entries: tuple[ReplayEntry, ...] = ()
    pending: str | None = None

    def counts(self) -> dict[str, int]:
        """Patch-sets per replay status."""
        out: dict[str, int] = {}
        for entry in self.entries:
            out[entry.status] = out.get(entry.status, 0) + 1
        return out


class VerifyResult(CheckReport):
    """The verify phase's record entry: the check report plus its counts, and what it checked.

    ``commit`` is the sync worktree's HEAD it ran on; ``dirty`` the tracked paths that differed
    from that commit (then the check was not a check of the commit, and promote refuses it).
    """

    totals: dict[str, int] = Field(default_factory=dict)
    commit: str | None = None
    dirty: tuple[str, ...] = ()

    @classmethod
    def of(cls, report: CheckReport, *, commit: str | None = None, dirty: Sequence[str] = ()) -> VerifyResult:
        """Wrap a check report, freezing its counts into the JSON form."""
        return cls(**report.model_dump(), totals=report.counts(), commit=commit, dirty=tuple(dirty))


def verify_message(counts: dict[str, int]) -> str:
    """One line from :meth:`CheckReport.counts`: patch-sets per status, then invariants.

    Only patch-sets that count (holds / violated / advisory-violations) contribute to the
    invariant figures; those not carried, landed upstream or not applicable are counted apart.
    """
    counted = counts["patchsets_holds"] + counts["patchsets_violated"] + counts["patchsets_advisory_violations"]
    apart = [
        f"{counts[key]} {label}"
        for key, label in (
            ("patchsets_not_carried", "not carried"),
            ("patchsets_landed_upstream", "landed upstream"),
            ("patchsets_not_applicable", "not applicable"),
        )
        if counts[key]
    ]
    checked = counts["invariants"] - counts["not_counted"]
    return (
        f"{counts['patchsets_holds']} of {counted} carried patch-sets hold, {counts['patchsets_violated']} violated, "
        f"{counts['patchsets_advisory_violations']} with advisory violations"
        + (f" ({', '.join(apart)})" if apart else "")
        + f"; {counts['holds']} of {checked} invariants hold ({counts['violated']} violated, "
        f"{counts['advisory']} advisory, {counts['deferred']} deferred to gates)" + _baseline_note(counts)
    )


def _baseline_note(counts: dict[str, int]) -> str:
    """``"; 1 lost in this merge, 2 already failing before it"`` when a violation has a baseline."""
    lost, before = counts.get("lost_in_merge", 0), counts.get("failing_before", 0)
    if not (lost or before):
        return ""
    return f"; {lost} lost in this merge, {before} already failing before it"
