"""The report view: the run record normalised into exactly what the report templates need.

Phase modules own their result models and the run record holds them typed; the
builder (:mod:`ds4sync.report.build`) turns those models into these frozen views, so a
renamed field upstream of the report changes one builder function (mypy says which; for a view that copies
a result's fields by name, ``from_attributes``, the first report built), never a template. ``ReportView`` is also the
published JSON summary (``ds4sync report --format json``; schema: ``ds4sync schema``).

Units: durations in seconds (float), percentages in percent (float), counts as ints.
A section that did not run is ``None`` (or an empty list) and renders as "not run".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ds4sync.models.semantic_results import SemanticResult

REPORT_SCHEMA_VERSION = 2
SCHEMA_ID = "urn:ds4sync:report-summary:v2"

COUNT_KEYS: tuple[str, ...] = (
    "passed",
    "failed",
    "errors",
    "skipped",
    "xfailed",
    "xpassed",
    "deselected",
    "env_only",
    "flaky",
)


class View(BaseModel):
    """Base of every report view model: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Side(View):
    """One side of the merge: display name (``owner/repo``), branch or ref, SHA."""

    name: str
    ref: str
    sha: str
    url: str | None = None


class RunInfo(View):
    """The run itself: id, status, timestamps (ISO 8601, UTC), refs it created."""

    run_id: str
    status: str
    created_at: str
    updated_at: str
    sync_branch: str
    backup_ref: str
    backup_branch: str | None = None
    profile: str | None = None


class PhaseView(View):
    """One pipeline phase: name, status (pending, running, done, needs-person, failed, skipped)."""

    name: str
    status: str
    finished_at: str | None = None
    message: str = ""


class Tally(View):
    """A count of one label (conflict kind, resolution, status)."""

    label: str
    count: int


class ConflictView(View):
    """One conflicted path, its kind and how it was resolved (``rule`` names the rule).

    ``stored_as``: the shared-store entry a person's resolution was recorded to (None when
    rerere keeps no record of that kind, e.g. modify/delete); ``store_entry``: the entry a
    ``recorded`` resolution was replayed from; ``replay_changed``: ``edited``/``deleted`` when a
    person changed a replayed resolution before the commit (then the resolution is ``person``).
    ``proposal``: the validated proposal's sources (``proposed (model, validated)``); ``upstream_prs``
    and ``patchsets``: the provenance of its hunks (PRs that changed those lines, owning patch-sets).
    """

    path: str
    kind: str
    resolution: str
    rule: str | None = None
    stored_as: str | None = None
    store_entry: str | None = None
    replay_changed: str | None = None
    kept: str | None = None
    proposal: str | None = None
    upstream_prs: tuple[int, ...] = ()
    patchsets: tuple[str, ...] = ()


class OverlapView(View):
    """A semantic overlap: both sides changed the file, git merged it cleanly; lines added+deleted.

    ``equals_upstream``: the merged file is exactly upstream's (a cherry-pick): folded in the report.
    """

    path: str
    upstream_lines: int
    fork_lines: int
    equals_upstream: bool = False


class MergeView(View):
    """The merge: commit, counts, conflicts by kind and resolution, semantic overlaps."""

    merge_commit: str | None = None
    merge_base: str | None = None
    upstream_sha: str | None = None
    upstream_commits: int | None = None
    fork_commits: int | None = None
    conflicts: tuple[ConflictView, ...] = ()
    conflict_kinds: tuple[Tally, ...] = ()
    resolutions: tuple[Tally, ...] = ()
    overlaps: tuple[OverlapView, ...] = ()
    remerge_diff_paths: tuple[str, ...] = ()


class InvariantView(View):
    """One invariant of a patch-set on the final tree: its id, kind, severity and status.

    ``status``: holds, violated or deferred (a test run by the gate phase); an advisory
    violation is ``violated`` with ``severity`` advisory: it never counts as holding.
    ``since``: for a violation, ``lost in this merge`` or ``already failing before it`` (the
    same invariant on the fork head before the merge); empty when verify had no baseline.
    """

    id: str
    kind: str
    severity: str
    status: str
    detail: str = ""
    since: str = ""


class PatchsetView(View):
    """A patch-set: what replay did (``status``) and what verify found (``verify_status``).

    ``status`` is replay's: retained, unconfirmed, reapplied, adapted, landed-upstream,
    needs-adaptation, not-carried (``verify:<status>`` when only verify ran). ``held``,
    ``violated``, ``advisory`` and ``deferred`` count its invariants on the final tree
    (``advisory`` = advisory violations, never holding). ``evidence``: the upstream facts that
    made a landed-upstream patch-set unnecessary; ``conflicted``/``rejects``: the files and
    hunks a person must adapt (needs-adaptation).
    """

    id: str
    title: str = ""
    kind: str = ""
    status: str
    verify_status: str = ""
    detail: str = ""
    commit: str | None = None
    evidence: tuple[str, ...] = ()
    conflicted: tuple[str, ...] = ()
    rejects: tuple[str, ...] = ()
    invariants: tuple[InvariantView, ...] = ()
    held: int = 0
    violated: int = 0
    advisory: int = 0
    deferred: int = 0


class RuleUse(View):
    """A resolution rule from ds4sync.yaml and the conflicted paths it resolved."""

    rule: str
    paths: tuple[str, ...]


class IntegrationView(View):
    """Integration choices: rules used, recorded and person resolutions, patch-set outcomes.

    ``replay``: replay's state (not run, done, waiting for ``pending``, or the catalogue does not
    apply: ``applies_detail``); ``verify_line``: verify's one-line verdict from its own counts.
    """

    rules: tuple[RuleUse, ...] = ()
    recorded: tuple[str, ...] = ()
    person: tuple[str, ...] = ()
    person_unrecorded: tuple[str, ...] = ()
    replay_edited: tuple[str, ...] = ()  # replayed, then edited by a person: their edit is the store entry now
    replay_deleted: tuple[str, ...] = ()  # replayed, then deleted by a person: the store entry is forgotten
    unresolved: tuple[str, ...] = ()
    patchsets: tuple[PatchsetView, ...] = ()
    patchset_tally: tuple[Tally, ...] = ()
    replay: Literal["not run", "done", "waiting", "not applicable"] = "not run"
    pending: str | None = None
    applies_detail: str = ""
    verify_ran: bool = False
    verify_ok: bool | None = None
    verify_line: str = ""

    @property
    def patchsets_ran(self) -> bool:
        """Whether replay or verify recorded anything."""
        return self.replay != "not run" or self.verify_ran


class OpenPR(View):
    """An open pull request seen by the duplicate-work check: own, duplicate or unrelated, and why."""

    number: int | None = None
    title: str = ""
    author: str = ""
    updated_at: str = ""
    url: str = ""
    relation: str = ""
    reason: str = ""


class DuplicateView(View):
    """The duplicate-work check the publish phase ran before opening the PR."""

    repo: str = ""
    checked_at: str = ""
    open_prs: tuple[OpenPR, ...] = ()
    conclusion: str = ""
    pr_url: str = ""


class Fact(View):
    """A label and a value, e.g. ("CUDA", "13.3")."""

    label: str
    value: str


class FailureView(View):
    """A failed test: node id, category (e.g. gated-model-403) and the reason."""

    test: str
    category: str = ""
    reason: str = ""
    env_only: bool = False


class CommandView(View):
    """An exact command as run: environment overrides, argv, and where it ran."""

    label: str
    env: tuple[Fact, ...] = ()
    argv: tuple[str, ...] = ()
    text: str = ""
    cwd: str = ""


class GateView(View):
    """One gate result with its counts (tests), duration (s) and exact command; ``required``: whether it keeps
    its tier from being green when it is not (an optional gate never does)."""

    name: str
    tier: str
    kind: str = ""
    status: str
    required: bool = True
    description: str = ""
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    xfailed: int = 0
    xpassed: int = 0
    deselected: int = 0
    env_only: int = 0
    flaky: int = 0
    duration_s: float | None = None
    reason: str = ""
    failures: tuple[FailureView, ...] = ()
    env_categories: tuple[Tally, ...] = ()
    command: CommandView | None = None


class TierView(View):
    """The gates of one tier, its status and one-line count (:func:`ds4sync.models.gates_results.tier_line`)."""

    tier: str
    status: str
    line: str = ""
    gates: tuple[GateView, ...]


class CheckView(View):
    """A build check group, e.g. imports 7/7 or op schemas 4/4, with failed items named."""

    name: str
    passed: int
    total: int
    failed: tuple[str, ...] = ()


class BuildView(View):
    """The native build: status, profile, duration (s), log path, import/op-schema checks, archs.

    ``archs_asked``: the profile's ``TORCH_CUDA_ARCH_LIST``; ``archs_built``: what the build
    compiled for (its own output, and cubins when cuobjdump was there); ``skipped_kernels``:
    kernels a narrowed list left out.
    """

    status: str
    profile: str = ""
    duration_s: float | None = None
    log: str = ""
    message: str = ""
    checks: tuple[CheckView, ...] = ()
    command: CommandView | None = None
    log_tail: tuple[str, ...] = ()
    archs_asked: tuple[str, ...] = ()
    archs_built: tuple[str, ...] = ()
    arch_source: str = ""
    skipped_kernels: tuple[str, ...] = ()


class ProbeView(View):
    """A kernel check or serving probe: measured value against its baseline, in ``unit``."""

    name: str
    status: str
    value: str = ""
    baseline: str = ""
    unit: str = ""
    detail: str = ""


class ABRow(View):
    """An A/B metric: medians, relative delta (%) and its confidence interval (%), verdict."""

    metric: str
    baseline_median: float | None = None
    candidate_median: float | None = None
    delta_pct: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    verdict: str = ""


class ProbeGroup(View):
    """A tier of probes (kernels, serving) with its A/B rows."""

    name: str
    status: str = ""
    probes: tuple[ProbeView, ...] = ()
    ab: tuple[ABRow, ...] = ()


class ValidationView(View):
    """Environment, build, gates by tier, kernel checks and serving probes."""

    environment: tuple[Fact, ...] = ()
    build: BuildView | None = None
    tiers: tuple[TierView, ...] = ()
    tiers_not_run: tuple[str, ...] = ()
    tiers_required: tuple[str, ...] = ()
    probes: tuple[ProbeGroup, ...] = ()

    @property
    def gates(self) -> tuple[GateView, ...]:
        """Every gate of every tier, in tier order."""
        return tuple(g for tier in self.tiers for g in tier.gates)


class RemainingItem(View):
    """Something not run or not green: what it is and why it is listed."""

    kind: Literal["tier", "gate", "build", "patch-set", "conflict", "overlap", "phase", "review"]
    text: str


class BackportView(View):
    """An upstream commit ``ds4sync backport evaluate`` measured: the decision and its reasons."""

    sha: str
    decision: str
    reasons: tuple[str, ...] = ()
    kv_change_pct: float | None = None
    patchset: str = ""


class ReportView(View):
    """The report summary of one run: what ``--format json`` emits and the templates render."""

    schema_: str = Field(default=SCHEMA_ID, alias="$schema", serialization_alias="$schema")
    report_schema_version: int = REPORT_SCHEMA_VERSION
    record_schema_version: int
    public: bool = False
    title: str
    run: RunInfo
    upstream: Side
    fork: Side
    phases: tuple[PhaseView, ...] = ()
    merge: MergeView | None = None
    integration: IntegrationView = IntegrationView()
    semantic: SemanticResult | None = None  # the semantic phase's result as recorded; None: it did not run
    duplicate: DuplicateView | None = None
    validation: ValidationView = ValidationView()
    commands: tuple[CommandView, ...] = ()
    remaining: tuple[RemainingItem, ...] = ()
    backports: tuple[BackportView, ...] = ()
    notes: tuple[str, ...] = ()

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
