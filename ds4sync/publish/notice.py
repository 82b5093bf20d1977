"""The night's one notification, composed from what the nightly did and the run's report view.

The gate lines are the report's own tier lines (``ReportView.validation.tiers``), the same the record, report,
``summary.json`` and promote read; nothing here counts gates or decides green. Sending is :mod:`.notify`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ds4sync.core.errors import ExitCode
from ds4sync.core.redact import redact_secrets
from ds4sync.core.words import many
from ds4sync.models.publish_duplicates import OpenPull
from ds4sync.models.publish_results import PublishResult
from ds4sync.models.record import RunRecord
from ds4sync.publish.notify import Notice

if TYPE_CHECKING:
    from ds4sync.report.view import ReportView

#: Notes of the nightly a notice carries as bullets (the drift watch's, the last-green ref's).
NOTICE_PREFIXES = ("drift:", "last green")
_RAN = frozenset({"done", "failed", "needs-person"})


class Night(Protocol):
    """What the notice reads of a night (:class:`ds4sync.loop.nightly.NightlyResult` is one): the run record
    (None when no run took place), the nightly's message and exit code, and what the loop did after the run."""

    @property
    def record(self) -> RunRecord | None: ...
    @property
    def message(self) -> str: ...
    @property
    def exit_code(self) -> ExitCode: ...
    @property
    def promoted(self) -> str | None: ...
    @property
    def deployed(self) -> str | None: ...
    @property
    def pruned(self) -> tuple[str, ...]: ...
    @property
    def notes(self) -> tuple[str, ...]: ...


def compose_notice(night: Night, *, proven: bool, title_prefix: str, fork: str) -> Notice:
    """The night's one message: a title with the night's status, what happened, the PR link, what needs a person.

    ``proven``: the run is green by the pipeline's own rule (:func:`ds4sync.models.gates_status.run_green`).
    ``kind`` is ``success`` only for a night that exited 0 with nothing left for a person; a run that exited 0 but
    is not ``proven`` (a required tier the pipeline does not run) is "done, not proven", never green. The body is
    redacted.
    """
    from ds4sync.report.build import build_view

    record = night.record
    if record is None:
        kind = "info" if night.exit_code == ExitCode.OK else "warning"
        body = "\n".join([night.message, *(f"- {n}" for n in night.notes if n.startswith(NOTICE_PREFIXES))])
        return Notice(title=f"{title_prefix} nightly: {fork}: {night.message}", body=body, kind=kind)
    view = build_view(record, public=True)
    status = {
        ExitCode.OK: "green",
        ExitCode.FAILED: "FAILED",
        ExitCode.BUDGET: "out of time",
        ExitCode.TRANSIENT: "not published (forge unreachable)",
    }.get(night.exit_code, "needs a person")
    if status == "green" and not proven:
        status = "done, not proven"  # a required tier the pipeline does not run (promote_tiers) has no green
    lines = [f"**{view.title}**: {status} (run {record.run_id}, exit {int(night.exit_code)})", ""]
    lines += _what_happened(view, record, night)
    publish = record.results.publish
    needs = _needs_person(view, record, night)
    if needs:
        lines += ["", "Needs a person:"] + [f"- {n}" for n in dict.fromkeys(needs)]
    kind = (
        "success"
        if night.exit_code == ExitCode.OK and not needs
        else "failure"
        if night.exit_code == ExitCode.FAILED
        else "warning"
    )
    return Notice(
        title=f"{title_prefix} nightly: {fork} {status}",
        body=redact_secrets("\n".join(lines) + "\n"),
        kind=kind,
        needs_person=tuple(dict.fromkeys(needs)),
        pr_url=publish.pr_url if publish is not None else None,
    )


def _what_happened(view: ReportView, record: RunRecord, night: Night) -> list[str]:
    """The notice's bullets of what the night did: merge, semantic check, each tier's line, the PR, promote,
    deploy, prune and the notes a notice carries (``view``: the record's public report view)."""
    lines = []
    if view.merge is not None:
        m = view.merge
        tally = ", ".join(f"{t.count} {t.label}" for t in m.resolutions) or "none"
        lines.append(
            f"- Merge: {many(m.upstream_commits or 0, 'upstream commit')} into {view.fork.ref}; "
            f"{many(len(m.conflicts), 'conflicted file')} (resolved: {tally}); "
            f"{many(len(m.overlaps), 'semantic overlap')}"
        )
    lines += [f"- Semantic check: {view.semantic.summary_line()}"] if view.semantic is not None else []
    lines += [f"- Gates {tier.tier}: {tier.line}" for tier in view.validation.tiers]  # the record's one tier line
    publish = record.results.publish
    if publish is not None and publish.pr_url:
        lines.append(f"- PR #{publish.pr_number} {publish.action}: {publish.pr_url}")
    elif publish is not None and publish.message:
        lines.append(f"- Not published: {publish.message}")
    if night.promoted:
        lines.append(f"- Promoted {night.promoted}")
    if night.deployed:
        lines.append(f"- Deployed: {night.deployed}")
    if night.pruned:
        lines.append(f"- Pruned {len(night.pruned)} old run(s)")
    return lines + [f"- {n}" for n in night.notes if n.startswith(NOTICE_PREFIXES)]


def _needs_person(view: ReportView, record: RunRecord, night: Night) -> list[str]:
    """What the night leaves for a person, in order (may repeat): the phase waiting for one, unresolved
    conflicts, the report's remaining items of phases that ran, possible duplicate PRs, semantic breaks and
    the notes that say something was not done."""
    needs: list[str] = []
    waiting = next((n for n, p in record.phases.items() if p.status == "needs-person"), None)
    if waiting:
        needs.append(f"phase {waiting}: {record.phases[waiting].message}")
    if view.merge is not None:
        needs += [f"conflict in {c.path} ({c.kind})" for c in view.merge.conflicts if c.resolution == "unresolved"]
    # Build and patch-set items count only when their phase ran: "not run" of a phase not reached is no job.
    ran = {k for k, phase in (("build", "build"), ("patch-set", "replay")) if record.phase(phase).status in _RAN}
    needs += [i.text for i in view.remaining if i.kind in ("gate", "overlap") or i.kind in ran]
    needs += [f"possible duplicate work: {p.reason} (#{p.number})" for p in _duplicates(record.results.publish)]
    needs += [
        f"semantic break {f.line_text()}" for f in (view.semantic.blockers() if view.semantic is not None else [])
    ]
    return needs + [n for n in night.notes if n.startswith("not ")]


def _duplicates(publish: PublishResult | None) -> list[OpenPull]:
    check = publish.duplicate_check if publish is not None else None
    return [p for p in check.open_prs if p.relation == "duplicate"] if check is not None else []
