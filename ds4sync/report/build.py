"""Turn a typed run record into a :class:`~ds4sync.report.view.ReportView`.

Every input is a field of :class:`~ds4sync.models.record.RunResults` that a phase writes, read
through the phase's own model; a phase that did not run is ``None`` (or empty) and its
section renders "not run". :data:`READS` lists the result fields read here: a test checks
that each has a writer.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Literal

from ds4sync.core.model import from_attributes
from ds4sync.core.names import TIERS
from ds4sync.core.redact import MARKERS
from ds4sync.models.gates_details import KernelDetails
from ds4sync.models.gates_results import GateResult, TierResult
from ds4sync.models.gates_status import gate_green, gate_ran
from ds4sync.models.merge_results import MergeSummary
from ds4sync.models.native_results import BuildResult
from ds4sync.models.patchsets_results import ReplayResult, VerifyResult, verify_message
from ds4sync.models.publish_results import PublishResult
from ds4sync.models.record import RunRecord, RunResults
from ds4sync.models.serving_results import ABResult, ServingResult
from ds4sync.report.view import (
    ABRow,
    BackportView,
    BuildView,
    CheckView,
    CommandView,
    ConflictView,
    DuplicateView,
    Fact,
    FailureView,
    GateView,
    IntegrationView,
    InvariantView,
    MergeView,
    OpenPR,
    OverlapView,
    PatchsetView,
    PhaseView,
    ProbeGroup,
    ProbeView,
    RemainingItem,
    ReportView,
    RuleUse,
    RunInfo,
    Side,
    Tally,
    TierView,
    ValidationView,
)

#: The fields of RunResults the report reads (each must have a writer: tests/report/test_writers.py).
READS: frozenset[str] = frozenset(
    {"merge", "replay", "verify", "semantic", "build", "gates", "serving", "ab", "backports", "publish"}
)
_PATCHSET_REVIEW = {
    "needs-adaptation": "needs adaptation before the sync can go on",
    "landed-upstream": "landed upstream: candidate to delete from the catalogue",
    "unconfirmed": "only advisory invariants fail: its presence is not confirmed",
}
# A patch-set the fork branch does not carry: replay says so, or only verify ran and said so.
_NOT_CARRIED = frozenset({"not-carried", "verify:not-carried"})
_TOOLCHAIN_LABELS = {
    "python": "Python",
    "torch": "PyTorch",
    "torch_cuda": "PyTorch CUDA",
    "nvcc": "nvcc",
    "gcc": "gcc",
    "cmake": "cmake",
    "ninja": "ninja",
    "compiler_cache": "compiler cache",
    "cuda": "CUDA",
}


def build_view(record: RunRecord, *, public: bool = False, notes: str | None = None) -> ReportView:
    """The report view of ``record``; extra ``notes`` are a person's text (Markdown)."""
    results = record.results
    merge = merge_view(results.merge)
    validation = validation_view(results, required=record.required_tiers or ())
    integration = integration_view(merge, results.replay, results.verify)
    view_notes = [n for n in record.notes if n]
    if notes and notes.strip():
        view_notes.append(notes.strip())
    phases = tuple(from_attributes(PhaseView, state, name=name) for name, state in record.phases.items())
    upstream = Side(
        name=record.upstream.name or record.upstream.url or record.upstream.remote,
        ref=record.upstream.branch or record.upstream.ref,
        sha=record.upstream.sha,
        url=record.upstream.url,
    )
    fork = Side(name=record.fork.name or "fork", ref=record.fork.branch, sha=record.fork.head_before)
    return ReportView(
        record_schema_version=record.schema_version,
        public=public,
        title=f"Sync {fork.name}:{fork.ref} with {upstream.name} {upstream.ref}".strip(),
        run=from_attributes(RunInfo, record),
        upstream=upstream,
        fork=fork,
        phases=phases,
        merge=merge,
        integration=integration,
        semantic=results.semantic,
        duplicate=duplicate_view(results.publish),
        validation=validation,
        commands=commands(validation),
        remaining=remaining(phases, merge, integration, validation),
        backports=tuple(
            from_attributes(BackportView, d, sha=d.upstream_sha, patchset=d.patchset or "")
            for d in results.backports.values()
        ),
        notes=tuple(view_notes),
    )


def tally(labels: Iterable[str]) -> tuple[Tally, ...]:
    """Counts of each label, most frequent first, ties in first-seen order."""
    return tuple(Tally(label=label, count=n) for label, n in Counter(labels).most_common())


def merge_view(summary: MergeSummary | None) -> MergeView | None:
    """The merge section; None when merge did not run."""
    if summary is None:
        return None
    conflicts = tuple(
        from_attributes(
            ConflictView,
            c,
            resolution=c.resolution or "unresolved",
            upstream_prs=tuple(dict.fromkeys(n for h in c.hunks for n in h.upstream_prs)),
            patchsets=tuple(dict.fromkeys(o.patchset for h in c.hunks for o in h.owners)),
        )
        for c in summary.conflicts
    )
    return from_attributes(
        MergeView,
        summary,
        conflicts=conflicts,
        conflict_kinds=tally(c.kind for c in conflicts),
        resolutions=tally(c.resolution for c in conflicts),
        overlaps=tuple(from_attributes(OverlapView, o) for o in summary.overlaps),
    )


def integration_view(
    merge: MergeView | None, replay: ReplayResult | None, verify: VerifyResult | None
) -> IntegrationView:
    """Resolution rules used, recorded/person resolutions, and each patch-set's replay and verify outcome."""
    conflicts = merge.conflicts if merge else ()
    rules: dict[str, list[str]] = {}
    for c in conflicts:
        if c.resolution == "rule":
            rules.setdefault(c.rule or "rule", []).append(c.path)
    patchsets = patchset_views(replay, verify)
    state: Literal["not run", "done", "waiting", "not applicable"] = "not run"
    if replay is not None:
        state = "not applicable" if not replay.applicable else "waiting" if replay.pending else "done"
    return IntegrationView(
        rules=tuple(RuleUse(rule=r, paths=tuple(p)) for r, p in rules.items()),
        recorded=tuple(c.path for c in conflicts if c.resolution == "recorded"),
        person=tuple(c.path for c in conflicts if c.resolution == "person" and c.stored_as),
        person_unrecorded=tuple(c.path for c in conflicts if c.resolution == "person" and not c.stored_as),
        replay_edited=tuple(c.path for c in conflicts if c.replay_changed == "edited"),
        replay_deleted=tuple(c.path for c in conflicts if c.replay_changed == "deleted"),
        unresolved=tuple(c.path for c in conflicts if c.resolution == "unresolved"),
        patchsets=patchsets,
        patchset_tally=tally(p.status for p in patchsets),
        replay=state,
        pending=replay.pending if replay else None,
        applies_detail=(replay.applies_detail if replay and not replay.applicable else "")
        or (verify.applies_detail if verify and not verify.applicable else ""),
        verify_ran=verify is not None,
        verify_ok=verify.ok if verify is not None else None,
        verify_line=_verify_line(verify),
    )


def _verify_line(verify: VerifyResult | None) -> str:
    if verify is None:
        return ""
    return verify_message(verify.counts())


def patchset_views(replay: ReplayResult | None, verify: VerifyResult | None) -> tuple[PatchsetView, ...]:
    """One view per patch-set, replay order first: replay's status, verify's invariant results by id."""
    checks = {ps.id: ps for ps in verify.patchsets} if verify else {}
    entries = {e.id: e for e in replay.entries} if replay else {}
    order = list(entries) + [pid for pid in checks if pid not in entries]
    views = []
    for pid in order:
        entry, check = entries.get(pid), checks.get(pid)
        results = check.invariants if check else (entry.invariants if entry else ())
        invariants = tuple(from_attributes(InvariantView, r, id=r.invariant) for r in results)
        views.append(
            PatchsetView(
                id=pid,
                title=(entry.title if entry else "") or (check.title if check else ""),
                kind=check.kind if check else "",
                status=entry.status if entry else f"verify:{check.status}" if check else "unknown",
                verify_status=check.status if check else "",
                detail=(entry.detail if entry else "") or (check.detail if check else ""),
                commit=entry.commit if entry else None,
                evidence=entry.evidence if entry else (),
                conflicted=entry.conflicted if entry else (),
                rejects=entry.rejects if entry else (),
                invariants=invariants,
                held=sum(i.status == "holds" for i in invariants),
                violated=sum(i.status == "violated" and i.severity == "blocking" for i in invariants),
                advisory=sum(i.status == "violated" and i.severity == "advisory" for i in invariants),
                deferred=sum(i.status == "deferred" for i in invariants),
            )
        )
    return tuple(views)


def duplicate_view(publish: PublishResult | None) -> DuplicateView | None:
    """The publish phase's duplicate-work check; None when publish did not check."""
    if publish is None or publish.duplicate_check is None:
        return None
    check = publish.duplicate_check
    return from_attributes(
        DuplicateView,
        check,
        open_prs=tuple(from_attributes(OpenPR, p) for p in check.open_prs),
        pr_url=publish.pr_url or "",
    )


def validation_view(results: RunResults, *, required: tuple[str, ...] = ()) -> ValidationView:
    """Environment, build, gates by tier, kernel checks, serving probes and the A/B comparison.

    ``required``: the tiers the run had to pass (the record's ``required_tiers``); the others that did not run
    are shown as not run, never as blockers.
    """
    tiers = gate_tiers(results.gates)
    groups = [g for g in (kernel_group(results.gates.get("kernel")), serving_group(results.serving)) if g]
    ab = ab_group(results.ab)
    if ab:
        groups.append(ab)
    present = {t.tier for t in tiers} | ({"serving"} if results.serving else set())
    return ValidationView(
        environment=environment(results.build, results.gates),
        build=build_view_of(results.build),
        tiers=tiers,
        tiers_not_run=tuple(t for t in TIERS if t not in present),
        tiers_required=required,
        probes=tuple(groups),
    )


def environment(build: BuildResult | None, gates: Mapping[str, TierResult]) -> tuple[Fact, ...]:
    """The toolchain the build recorded, then what each gate tier recorded of its Python environment."""
    facts: dict[str, str] = {}
    if build is not None:
        for key, value in build.toolchain.items():
            if value:
                facts[_TOOLCHAIN_LABELS.get(key, key.replace("_", " "))] = value
        facts.setdefault("build profile", build.profile)
    for tier in gates.values():
        for key, value in tier.environment.items():
            label = _TOOLCHAIN_LABELS.get(key, key.replace("_", " "))
            if value and value != "None" and key != "executable":
                facts.setdefault(label, value)
    return tuple(Fact(label=k, value=v) for k, v in facts.items())


def build_view_of(build: BuildResult | None) -> BuildView | None:
    """The build section; None when the build phase did not run."""
    if build is None:
        return None
    checks = tuple(
        CheckView(
            name=name.replace("_", " "),
            passed=int(value.get("passed", 0)),
            total=int(value.get("total", 0)),
            failed=tuple(str(x) for x in value.get("failed", ())),
        )
        for name, value in build.checks.items()
    )
    archs = build.archs
    return BuildView(
        status=build.status,
        profile=build.profile,
        duration_s=build.total_s or build.duration_s,
        log=build.log_path,
        message=build.message,
        checks=checks,
        command=_command("build", build.command, build.env, build.cwd),
        log_tail=build.tail if build.status != "passed" else (),
        archs_asked=archs.asked if archs else (),
        archs_built=archs.built if archs else (),
        arch_source=archs.source if archs else "",
        skipped_kernels=archs.skipped_kernels if archs else (),
    )


def gate_tiers(gates: Mapping[str, TierResult]) -> tuple[TierView, ...]:
    """Gate results grouped by tier, tiers in pipeline order (unknown tiers last)."""
    order = [t for t in TIERS if t in gates] + sorted(t for t in gates if t not in TIERS)
    views = []
    for name in order:
        tier = gates[name]
        if not tier.gates:
            continue
        views.append(
            TierView(
                tier=name,
                status=tier.status,
                line=tier.line(),
                gates=tuple(gate_view(g) for g in tier.gates),
            )
        )
    return tuple(views)


def gate_view(g: GateResult) -> GateView:
    """One gate result with its counts, failures (each with its environment-only category) and command."""
    failures = tuple(
        FailureView(
            test=f.node_id,
            category=f.env_category or "",
            reason=f.message.splitlines()[0][:300] if f.message else "",
            env_only=f.env_category is not None,
        )
        for f in g.failures
    )
    display = g.details.display_command
    return GateView(
        name=g.name,
        tier=g.tier,
        kind=g.kind,
        status=g.status,
        required=g.required,
        **g.counts.model_dump(),
        duration_s=g.duration_s,
        reason=g.reason,
        failures=failures,
        env_categories=tally(f.category for f in failures if f.env_only and f.category),
        command=_command(g.name, g.command, g.env_overrides, g.cwd, display=display),
    )


def kernel_group(tier: TierResult | None) -> ProbeGroup | None:
    """Per-op case counts of the kernel suite gates (``details.kernel``); None when the tier did not run."""
    if tier is None:
        return None
    probes = []
    for gate in tier.gates:
        suite = gate.details.kernel if isinstance(gate.details, KernelDetails) else None
        if suite is None:
            continue
        for op in suite.ops:
            total = len(op.cases)
            probes.append(
                ProbeView(
                    name=f"{op.op} ({op.impl})",
                    status="passed" if op.ok else "failed",
                    value=f"{op.count('pass')}/{total}",
                    unit="cases passed",
                    detail=f"{op.count('fail')} failed, {op.count('error')} errors, {op.count('skip')} skipped",
                )
            )
    return ProbeGroup(name="kernel checks", status=tier.status, probes=tuple(probes)) if probes else None


def serving_group(serving: ServingResult | None) -> ProbeGroup | None:
    """The serving probes ``ds4sync serving gate`` recorded; None when it did not run in this run."""
    if serving is None:
        return None
    probes = tuple(
        ProbeView(
            name=p.name,
            status=p.status,
            value=_number(p.value),
            baseline=_number(p.baseline),
            unit=p.unit,
            detail=p.summary,
        )
        for p in serving.probes
    )
    return ProbeGroup(name="serving", status=serving.status, probes=probes)


def ab_group(ab: ABResult | None) -> ProbeGroup | None:
    """The A/B rows ``ds4sync ab`` recorded; None when it did not run in this run."""
    if ab is None:
        return None
    rows = tuple(from_attributes(ABRow, r) for r in ab.rows)
    return ProbeGroup(name=f"perf A/B ({ab.baseline} vs {ab.candidate}, {ab.pairs} pairs)", status=ab.verdict, ab=rows)


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"


def _command(
    label: str, argv: tuple[str, ...], env: Mapping[str, str], cwd: str, *, display: str | None = None
) -> CommandView | None:
    if not argv and not display:
        return None
    facts = tuple(Fact(label=k, value=v) for k, v in env.items())
    text = display or shlex.join(argv)
    shown = tuple(shlex.split(display)) if display else argv
    prefix = " ".join(f"{f.label}={f.value if f.value in MARKERS else shlex.quote(f.value)}" for f in facts)
    return CommandView(label=label, env=facts, argv=shown, text=f"{prefix} {text}" if prefix else text, cwd=cwd)


def commands(validation: ValidationView) -> tuple[CommandView, ...]:
    """The exact commands behind the build and each gate that ran, build first, duplicates dropped."""
    found: list[CommandView] = []
    if validation.build and validation.build.command:
        found.append(validation.build.command)
    found.extend(g.command for t in validation.tiers for g in t.gates if g.command and gate_ran(g.status))
    seen: set[str] = set()
    return tuple(c for c in found if not (c.text in seen or seen.add(c.text)))  # type: ignore[func-returns-value]


def _patchset_items(integration: IntegrationView) -> list[RemainingItem]:
    """The patch-sets a person must act on; a patch-set the branch does not carry is never one."""
    items = []
    for p in integration.patchsets:
        if _NOT_CARRIED & {p.status, p.verify_status}:
            continue  # the branch does not carry the feature: nothing of it can be lost in this merge
        if p.status in _PATCHSET_REVIEW:
            items.append(RemainingItem(kind="patch-set", text=f"patch-set {p.id}: {_PATCHSET_REVIEW[p.status]}"))
        elif p.violated:
            text = f"patch-set {p.id}: {p.violated} invariant(s) violated"
            items.append(RemainingItem(kind="patch-set", text=text + _already_failing(p)))
    if not integration.patchsets_ran:
        items.append(RemainingItem(kind="patch-set", text="patch-set replay and verify: not run"))
    return items


def _already_failing(p: PatchsetView) -> str:
    """`` (N already failing before the merge)`` for the blocking violations verify also found on the fork head."""
    before = sum(
        i.status == "violated" and i.severity == "blocking" and i.since == "already failing before it"
        for i in p.invariants
    )
    if not before:
        return ""
    return " (already failing before the merge)" if before == p.violated else f" ({before} already failing before it)"


def remaining(
    phases: tuple[PhaseView, ...], merge: MergeView | None, integration: IntegrationView, validation: ValidationView
) -> tuple[RemainingItem, ...]:
    """Everything not run or not green, in pipeline order, ending with the review a person owes.

    Blockers only: a tier not run is listed when the run required it (``validation.tiers_required``), the
    build when one was configured (its phase not skipped), a gate when it is required, a patch-set when the
    branch carries it (marked when its violations were already failing on the fork head before the merge).
    """
    items = [
        RemainingItem(kind="phase", text=f"phase {p.name} is {p.status}" + (f": {p.message}" if p.message else ""))
        for p in phases
        if p.status not in ("done", "skipped") and p.name != "report"
    ]
    if merge is None:
        items.append(RemainingItem(kind="phase", text="merge: not run"))
    elif integration.unresolved:
        n = len(integration.unresolved)
        items.append(RemainingItem(kind="conflict", text=f"{n} conflicted file{'s' * (n != 1)} unresolved"))
    items.extend(_patchset_items(integration))
    build = validation.build
    build_skipped = any(p.name == "build" and p.status == "skipped" for p in phases)  # no build configured
    if build is None:
        if not build_skipped:
            items.append(RemainingItem(kind="build", text="native build: not run"))
    elif build.status != "passed":
        items.append(RemainingItem(kind="build", text=f"native build: {build.status}"))
    items.extend(
        RemainingItem(kind="tier", text=f"{tier} tier: required, not run")
        for tier in validation.tiers_required
        if tier in validation.tiers_not_run
    )
    for g in validation.gates:
        if g.required and not gate_green(g.status):  # an optional gate never blocks (gate_blocking)
            why = f" ({g.reason})" if g.reason else ""
            items.append(RemainingItem(kind="gate", text=f"{g.name} ({g.tier}): {g.status}{why}"))
    if merge and merge.overlaps:
        n = len(merge.overlaps)
        items.append(RemainingItem(kind="overlap", text=f"{n} semantic overlap{'s' * (n != 1)} to review"))
    items.append(
        RemainingItem(
            kind="review",
            text="human review of the semantic resolutions and maintainer review remain required before merging",
        )
    )
    return tuple(items)
