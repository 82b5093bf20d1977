"""The publish phase: push the sync branch, check open PRs for duplicate work, open or update the draft PR.

Runs after report and before promote. Never a second PR for the same sync: when the fork already
has an open PR from the sync's head branch (seen by the check, or named by GitHub's 422 "already
exists"), its description is replaced and a comment says what changed since the last push (the
``report --compare`` of the run that last published to it and this one). Otherwise a draft PR is
opened with the labels from ``publish.labels``.

The push is a compare-and-swap (``--force-with-lease``): the remote head branch must be missing,
at a commit ds4sync pushed before, or an ancestor of the new head; a branch someone else pushed to
stops the phase for a person.
"""

from __future__ import annotations

from ds4sync.core.errors import GitError
from ds4sync.core.model import updated
from ds4sync.core.record import now_iso
from ds4sync.core.redact import redact_secrets
from ds4sync.models.publish_duplicates import check_duplicates
from ds4sync.models.publish_results import PublishResult
from ds4sync.models.publish_settings import TOKEN_ENV, PublishConfig
from ds4sync.models.record import RecordStore, RunRecord
from ds4sync.publish.forge import Forge, ForgeError, ForgeUnavailable, PullExists, forge_token
from ds4sync.runner import Phase, PhaseOutcome, RunContext


def head_branch_name(config: PublishConfig, record: RunRecord) -> str:
    """The branch on the fork's remote that carries this sync (``publish.head_branch`` formatted)."""
    return config.head_branch.format(
        branch=record.fork.branch.replace("/", "-"), upstream=record.upstream.sha[:12], sync_branch=record.sync_branch
    )


def run_publish_phase(ctx: RunContext) -> PhaseOutcome:
    """Push, check for duplicate work, open or update the draft PR; record it all in ``results.publish``."""
    config = ctx.ws.config.publish
    if config is None:
        return PhaseOutcome("skipped", "no publish: section in ds4sync.yaml; nothing pushed")
    record = ctx.record
    base = config.base or record.fork.branch
    result = PublishResult(
        status="no-token",
        repo=config.repo,
        remote=config.remote,
        head_branch=head_branch_name(config, record),
        base=base,
    )
    token = forge_token()
    if token is None:
        return _stop(
            ctx,
            result,
            f"no forge token in the environment ({' / '.join(TOKEN_ENV)})",
            "set one, then `ds4sync resume`",
        )
    forge = Forge(config, token)
    try:
        return _publish(ctx, forge, config, result)
    except ForgeUnavailable as exc:
        result = updated(result, status="unavailable", waits_s=tuple(forge.waits))
        return _stop(ctx, result, exc.one_line(), "`ds4sync resume` publishes again (the next nightly does too)")
    except ForgeError as exc:
        result = updated(result, status="refused", waits_s=tuple(forge.waits))
        return _stop(ctx, result, exc.one_line(), "fix it, then `ds4sync resume`")


def _publish(ctx: RunContext, forge: Forge, config: PublishConfig, result: PublishResult) -> PhaseOutcome:
    record, repo = ctx.record, ctx.ws.repo
    ctx.progress(f"publish: open PRs of {config.repo}")
    pulls = forge.open_pulls()
    upstream_range = set(repo.rev_list(record.upstream.sha, record.fork.head_before))
    check = check_duplicates(
        pulls,
        repo=config.repo,
        checked_at=now_iso(),
        head_branch=result.head_branch,
        base=result.base,
        upstream_range=upstream_range,
        title_pattern=config.sync_title_pattern,
        commits_of=forge.pull_commits,
        max_inspected=config.max_prs_inspected,
    )
    result = updated(result, duplicate_check=check)
    pushed = _push(ctx, config, result)
    if isinstance(pushed, PhaseOutcome):
        return pushed
    result = pushed
    ctx.record.results.publish = result  # the description below renders this check
    title, body = _description(ctx, config)
    own = check.own
    number, url, action = (own.number, own.url, "updated") if own else (None, None, "opened")
    if own is None:
        try:
            created = forge.create_pull(
                title=title, head=result.head_branch, base=result.base, body=body, draft=config.draft
            )
            number, url = int(created["number"]), str(created.get("html_url", ""))
        except PullExists:
            # Opened between our listing and now (or listed on a page we did not see): update that one.
            existing = forge.pulls_with_head(result.head_branch)
            if not existing:
                raise
            number, url, action = int(existing[0]["number"]), str(existing[0].get("html_url", "")), "updated"
    assert number is not None
    comment_url = compared = None
    if action == "updated":
        forge.update_pull(number, title=title, body=body)
        compared = _last_published(ctx.ws.store, record, number)
        comment = forge.comment(number, _update_comment(ctx, result, compared))
        comment_url = str(comment.get("html_url", "")) or None
    if config.labels:
        forge.add_labels(number, config.labels)
    result = updated(
        result,
        status="published",
        pr_number=number,
        pr_url=url,
        action=action,
        labels=config.labels,
        comment_url=comment_url,
        compared_with=compared,
        published_at=now_iso(),
        waits_s=tuple(forge.waits),
        message=f"{action} PR #{number}"
        + (f" ({len(check.duplicates)} possible duplicate(s))" if check.duplicates else ""),
    )
    return PhaseOutcome("done", f"{result.message}: {url}", result=result)


def _push(ctx: RunContext, config: PublishConfig, result: PublishResult) -> PublishResult | PhaseOutcome:
    record, repo = ctx.record, ctx.ws.repo
    local = repo.branch_head(record.sync_branch)
    remote_ref = f"refs/heads/{result.head_branch}"
    ctx.progress(f"publish: push {record.sync_branch} to {config.remote} as {result.head_branch}")
    try:
        current = repo.remote_head(config.remote, remote_ref)
    except GitError as exc:  # no such remote, or it cannot be reached: the sync stands, publishing waits
        result = updated(result, status="push-rejected")
        return _stop(ctx, result, exc.one_line(), f"check `git remote get-url {config.remote}`, then `ds4sync resume`")
    if current is not None and current != local and not _ours_or_ancestor(ctx, current, local):
        result = updated(result, status="push-rejected", previous_remote_sha=current)
        return _stop(
            ctx,
            result,
            f"{config.remote}/{result.head_branch} is at {current[:12]}, a commit ds4sync did not push",
            "fetch it and fold its changes into the sync, or delete that remote branch; then `ds4sync resume`",
        )
    ok, line = repo.push(config.remote, local, remote_ref, expect=current)
    if not ok:
        result = updated(result, status="push-rejected", previous_remote_sha=current)
        return _stop(
            ctx, result, f"push to {config.remote} refused ({redact_secrets(line)})", "`ds4sync resume` after fixing it"
        )
    return updated(result, pushed_sha=local, previous_remote_sha=current)


def _ours_or_ancestor(ctx: RunContext, remote_sha: str, local: str) -> bool:
    pushed = {r.publish.pushed_sha for r in (ctx.ws.store.load(i).results for i in ctx.ws.store.run_ids()) if r.publish}
    if remote_sha in pushed:
        return True
    return ctx.ws.repo.resolve_commit(remote_sha) is not None and ctx.ws.repo.is_ancestor(remote_sha, local)


def as_published(record: RunRecord) -> RunRecord:
    """The record as it stands once this phase is done: what the PR text and its comment describe.

    The description is rendered while the publish phase still runs; the PR it becomes is that
    phase's result, so it is rendered with publish done and the run's status the runner will give.
    """
    from ds4sync.core.record import PhaseState

    final = record.model_copy(deep=True)
    state = final.phases.get("publish") or PhaseState()
    final.phases["publish"] = updated(state, status="done", finished_at=now_iso(), pid=None)
    if all(p.status in ("done", "skipped") for p in final.phases.values()):
        final.status = "done"
    return final


def _description(ctx: RunContext, config: PublishConfig) -> tuple[str, str]:
    from ds4sync.report.build import build_view
    from ds4sync.report.files import templates_dir
    from ds4sync.report.render import render_report

    record = as_published(ctx.record)
    view = build_view(record, public=config.public)
    body = render_report(record, templates_dir=templates_dir(ctx.ws.profile), fmt="md", public=config.public)
    return redact_secrets(view.title), body


def _update_comment(ctx: RunContext, result: PublishResult, previous: str | None) -> str:
    from ds4sync.report.files import templates_dir
    from ds4sync.report.render import render_compare

    head = f"Pushed {result.pushed_sha[:12] if result.pushed_sha else '?'} to `{result.head_branch}`"
    if result.previous_remote_sha:
        head += f" (was {result.previous_remote_sha[:12]})"
    head += f"; run {ctx.record.run_id}."
    if previous is None:
        return head + "\n\nNo earlier ds4sync run published to this PR, so there is nothing to compare with.\n"
    compared = render_compare(
        ctx.ws.store.load(previous),
        as_published(ctx.record),
        templates_dir=templates_dir(ctx.ws.profile),
        public=bool(ctx.ws.config.publish and ctx.ws.config.publish.public),
    )
    return f"{head}\n\nWhat changed since the last push (run {previous}):\n\n{compared}"


def _last_published(store: RecordStore, record: RunRecord, number: int) -> str | None:
    for run_id in reversed(store.run_ids()):
        if run_id == record.run_id:
            continue
        publish = store.load(run_id).results.publish
        if publish is not None and publish.pr_number == number and publish.status == "published":
            return run_id
    return None


def _stop(ctx: RunContext, result: PublishResult, message: str, fix: str) -> PhaseOutcome:
    result = updated(result, message=redact_secrets(message))
    return PhaseOutcome("needs-person", result.message, result=result, next_steps=(fix,))


PUBLISH_PHASES = (Phase("publish", run_publish_phase),)
