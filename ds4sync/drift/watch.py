"""``ds4sync drift``: list the open upstream PRs, fetch their heads, evaluate each against the fork, rank.

Heads are fetched from upstream's ``refs/pull/N/head`` into a private namespace
(``refs/ds4sync/drift/pull/N``), in one ``git fetch``; when that fails the PRs are fetched one by one,
then from the PR's own head repository, and a PR whose head still cannot be had gets one line
(:class:`~ds4sync.models.drift_results.Unfetched`) while the rest go on. Refs of PRs no longer open are deleted.

Cost: one tree diff per PR, one merge per PR touching the fork's files, and a cache keyed by (PR head,
fork head, patch-sets) under ``<state>/drift/cache/`` (one file per fork head, written once per watch), so an
unchanged PR is not evaluated again on the next night. Entries no PR of the current watch used are dropped.
Each watch is kept under ``<state>/drift/results/`` and the next one lists what is new since.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from ds4sync.core.errors import ConfigError, Ds4syncError, GitError
from ds4sync.core.files import write_json_atomic
from ds4sync.core.model import updated
from ds4sync.core.record import now_iso
from ds4sync.drift.evaluate import ForkContext, evaluate_pull
from ds4sync.models.drift_results import DriftEntry, DriftFindings, DriftResult, PullState, Unfetched
from ds4sync.runner import Workspace

PULL_NAMESPACE = "refs/ds4sync/drift/pull/"
_SLUG = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_URL_SLUG = re.compile(r"github\.com[:/]([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?$")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class DriftOptions:
    """Filters of the PR listing: at most ``limit`` PRs, having every one of ``labels``, updated since
    ``updated_since`` (ISO 8601 date or time)."""

    limit: int | None = None
    labels: tuple[str, ...] = ()
    updated_since: str | None = None


def upstream_repo(ws: Workspace) -> str:
    """Upstream's ``owner/name`` on the forge: ``upstream.name``, else read from ``upstream.url``.

    The forge's API is ``upstream.api_url``, else ``publish.api_url``, else GitHub's.

    Raises:
        ConfigError: neither names one.
    """
    upstream = ws.config.upstream
    if upstream.name and _SLUG.match(upstream.name):
        return upstream.name
    url = upstream.url or ws.repo.remote_url(upstream.remote) or ""
    match = _URL_SLUG.search(url)
    if match:
        return match.group(1)
    raise ConfigError(
        "drift needs upstream's repository on the forge",
        where=str(ws.config.source or "ds4sync.yaml"),
        fix="set upstream.name to owner/name, e.g. vllm-project/vllm",
    )


def _forge(ws: Workspace, repo: str):  # -> publish.forge.Forge
    from ds4sync.models.publish_settings import PublishConfig
    from ds4sync.publish.forge import Forge, forge_token

    publish = ws.config.publish
    config = updated(publish, repo=repo) if publish else PublishConfig(repo=repo)
    if ws.config.upstream.api_url:
        config = updated(config, api_url=ws.config.upstream.api_url)
    return Forge(config, forge_token())


def _pull_state(raw: dict[str, Any]) -> PullState:
    head = raw.get("head") or {}
    head_repo = head.get("repo") or {}
    return PullState(
        number=int(raw["number"]),
        title=str(raw.get("title") or ""),
        author=str((raw.get("user") or {}).get("login") or ""),
        url=str(raw.get("html_url") or ""),
        head_sha=str(head.get("sha") or ""),
        head_repo=head_repo.get("full_name"),
        head_ref=str(head.get("ref") or ""),
        clone_url=head_repo.get("clone_url"),
        draft=bool(raw.get("draft")),
        labels=tuple(str(label.get("name")) for label in raw.get("labels") or () if isinstance(label, dict)),
        updated_at=str(raw.get("updated_at") or ""),
    )


def list_pulls(forge, options: DriftOptions) -> list[PullState]:
    """The open PRs, newest update first, filtered by ``options`` (closed ones never listed)."""
    wanted = set(options.labels)

    def keep(raw: dict[str, Any]) -> bool:
        names = {str(label.get("name")) for label in raw.get("labels") or () if isinstance(label, dict)}
        return raw.get("state", "open") == "open" and wanted <= names

    raws = forge.open_pulls(keep=keep, limit=options.limit, updated_since=options.updated_since)
    return [_pull_state(raw) for raw in raws]


def fetch_heads(ws: Workspace, pulls: list[PullState]) -> dict[int, str]:
    """Fetch each PR head into ``refs/ds4sync/drift/pull/N``; number -> why it could not be fetched.

    A PR whose private ref already points at its head costs nothing; the others are fetched in one call.
    """
    repo = ws.repo
    remote = ws.config.upstream.remote
    source = remote if repo.remote_url(remote) else (ws.config.upstream.url or "")
    refs = repo.refs_under(PULL_NAMESPACE)
    missing = [p for p in pulls if refs.get(f"{PULL_NAMESPACE}{p.number}") != p.head_sha or not p.head_sha]
    failed: dict[int, str] = {}
    if missing and source:
        ok, _ = repo.fetch_refspecs(source, [_pull_spec(p) for p in missing])
        if not ok:  # all or nothing: find the ones that fail
            failed = {p.number: why for p in missing if (why := _fetch_one(ws, source, p))}
    refs = repo.refs_under(PULL_NAMESPACE)
    stale = [p for p in missing if p.number not in failed and refs.get(f"{PULL_NAMESPACE}{p.number}") != p.head_sha]
    have = repo.existing_objects(p.head_sha for p in stale)
    for pull in stale:
        if pull.head_sha not in have:
            failed[pull.number] = f"head {pull.head_sha[:12] or '?'} is not in what upstream gave"
        else:  # pin the head the forge listed (it may have been pushed to between the listing and the fetch)
            repo.update_ref(f"{PULL_NAMESPACE}{pull.number}", pull.head_sha, message="ds4sync drift")
    open_refs = {f"{PULL_NAMESPACE}{p.number}" for p in pulls if p.number not in failed}
    for ref in refs:
        if ref not in open_refs:
            repo.delete_ref(ref)
    return failed


def _pull_spec(pull: PullState) -> str:
    return f"+refs/pull/{pull.number}/head:{PULL_NAMESPACE}{pull.number}"


def _fetch_one(ws: Workspace, source: str, pull: PullState) -> str | None:
    """Fetch one PR head from upstream, else from its head repository; why not, or None when fetched."""
    ok, line = ws.repo.fetch_refspecs(source, [_pull_spec(pull)])
    if not ok and pull.clone_url and pull.head_ref:
        spec = f"+refs/heads/{pull.head_ref}:{PULL_NAMESPACE}{pull.number}"
        ok, line = ws.repo.fetch_refspecs(pull.clone_url, [spec])
    return None if ok else f"cannot fetch its head ({line})"


class _Cache:
    """Findings by PR head for one (fork head, patch-sets) digest: one JSON file, read once, written once.

    Only the heads of the current watch are written back: entries of PRs closed or pushed to since are dropped,
    and so are the files of other fork heads.
    """

    def __init__(self, root: Path, digest: str) -> None:
        self.root = root
        self.path = root / f"{digest[:32]}.json"
        self.entries: dict[str, DriftFindings] = {}
        self.used: dict[str, DriftFindings] = {}
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            self.entries = {head: DriftFindings.model_validate(item) for head, item in raw.items()}
        except (OSError, ValueError, ValidationError, AttributeError):
            self.entries = {}  # missing or damaged: everything is evaluated again

    def get(self, head: str) -> DriftFindings | None:
        found = self.entries.get(head)
        if found is not None:
            self.used[head] = found
        return found

    def put(self, findings: DriftFindings) -> None:
        self.used[findings.head_sha] = findings

    def save(self) -> None:
        write_json_atomic(self.path, {head: f.model_dump(mode="json") for head, f in self.used.items()})
        for other in self.root.glob("*.json"):
            if other != self.path:
                other.unlink(missing_ok=True)


def rank(entries: list[DriftEntry]) -> list[DriftEntry]:
    """Conflicts and violated invariants first, then semantic findings, then clean merges touching the fork;
    within each, more findings first, then the most recently updated."""

    def weight(entry: DriftEntry) -> int:
        f = entry.findings
        return len(f.conflicts) + len(f.violations) + len(f.semantic or ())

    newest_first = sorted(entries, key=lambda e: e.pull.updated_at, reverse=True)
    return sorted(newest_first, key=lambda e: (e.action, -weight(e)))  # stable: ties stay newest first


def _context(ws: Workspace, fork_head: str, fork_base: str) -> ForkContext:
    from ds4sync.patchsets.model import load_catalogue

    folder = ws.profile / "patches"
    catalogue, patchsets = load_catalogue(folder) if folder.is_dir() else (None, [])
    return ForkContext.build(
        ws.repo, fork_head=fork_head, fork_base=fork_base, catalogue=catalogue, patchsets=patchsets, patches_dir=folder
    )


def run_drift(
    ws: Workspace, options: DriftOptions = DriftOptions(), *, progress: Progress | None = None, forge=None
) -> DriftResult:
    """One drift watch (see the module docstring); the result is kept under ``<state>/drift/results/``.

    ``forge`` defaults to the forge client for upstream's repository (token from ``GITHUB_TOKEN``/``GH_TOKEN``).

    Raises:
        ConfigError: no upstream repository on the forge (see :func:`upstream_repo`).
        ForgeError, ForgeUnavailable: the forge refused or could not be reached for the listing.
        StateError, GitError: no fork branch; the fork and upstream share no history.
    """
    say = progress or (lambda _m: None)
    started, start = now_iso(), time.monotonic()
    slug = upstream_repo(ws)
    forge = forge if forge is not None else _forge(ws, slug)
    branch, fork_head, upstream_sha, fork_base = _fork_refs(ws)
    with forge:
        pulls = list_pulls(forge, options)
    say(f"drift: {len(pulls)} open PRs of {slug}")
    failed = fetch_heads(ws, pulls)
    ctx = _context(ws, fork_head, fork_base)
    found = _evaluate_pulls(ws, ctx, pulls, failed=failed, upstream_sha=upstream_sha)
    with forge:
        entries = [_with_review_state(forge, e) for e in rank(found.entries)]
    result = DriftResult(
        started_at=started,
        upstream_repo=slug,
        upstream_ref=ws.config.upstream.ref,
        upstream_sha=upstream_sha,
        fork_branch=branch,
        fork_head=fork_head,
        fork_base=fork_base,
        fork_files=len(ctx.fork_files),
        listed=len(pulls),
        entries=tuple(entries),
        quiet=tuple(found.quiet),
        unfetched=tuple(found.unfetched),
        merges=found.merges,
        cache_hits=found.hits,
        semantic_check=ctx.semantic is not None,
        seconds=round(time.monotonic() - start, 3),
    )
    previous = last_result(ws)
    result = updated(result, new=new_lines(previous, result))
    save_result(ws, result)
    return result


def _fork_refs(ws: Workspace) -> tuple[str, str, str, str]:
    """The fork branch, its head, the upstream SHA and their merge-base.

    Raises:
        StateError, GitError: no fork branch; the fork and upstream share no history.
    """
    from ds4sync.core.errors import StateError
    from ds4sync.runner import require_branch, resolve_upstream

    branch = require_branch(ws)
    fork_head = ws.repo.branch_head(branch)
    upstream_sha = resolve_upstream(ws, ws.config.upstream.ref)
    fork_base = ws.repo.merge_base(fork_head, upstream_sha)
    if fork_base is None:
        raise StateError("the fork and upstream share no history", where=str(ws.repo.path))
    return branch, fork_head, upstream_sha, fork_base


class _Evaluated(NamedTuple):
    """What the PRs of one watch came to: flagged entries, quiet PR numbers, heads not had, merges made, cache hits."""

    entries: list[DriftEntry]
    quiet: list[int]
    unfetched: list[Unfetched]
    merges: int
    hits: int


def _evaluate_pulls(
    ws: Workspace, ctx: ForkContext, pulls: list[PullState], *, failed: dict[int, str], upstream_sha: str
) -> _Evaluated:
    """Each fetched PR merged three-way into the fork (:func:`evaluate_pull`), or its findings from the cache
    (saved after)."""
    cache = _Cache(ws.store.root / "drift" / "cache", ctx.digest)
    entries, quiet, unfetched = [], [], []
    merges = hits = 0
    for pull in pulls:
        if pull.number in failed:
            unfetched.append(Unfetched(number=pull.number, title=pull.title, reason=failed[pull.number]))
            continue
        findings = cache.get(pull.head_sha)
        cached = findings is not None
        if findings is None:
            try:
                findings = evaluate_pull(ctx, pull.head_sha, upstream=upstream_sha)
            except GitError as exc:  # e.g. a head that shares no history with upstream
                unfetched.append(Unfetched(number=pull.number, title=pull.title, reason=exc.one_line()))
                continue
            cache.put(findings)
            merges += findings.merged
        hits += cached
        if findings.flagged:
            entries.append(DriftEntry(pull=pull, findings=findings, cached=cached))
        else:
            quiet.append(pull.number)
    cache.save()
    return _Evaluated(entries, quiet, unfetched, merges, hits)


def _with_review_state(forge, entry: DriftEntry) -> DriftEntry:
    """Ask the forge whether a flagged PR is approved and mergeable (the list leaves both out)."""
    try:
        detail = forge.pull(entry.pull.number)
        reviews = forge.pull_reviews(entry.pull.number)
    except Ds4syncError:
        return entry  # the state stays unknown; the findings stand
    latest: dict[str, str] = {}
    for review in reviews:
        who = str((review.get("user") or {}).get("login") or "")
        state = str(review.get("state") or "")
        if state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            latest[who] = state
    approved = "APPROVED" in latest.values() and "CHANGES_REQUESTED" not in latest.values()
    mergeable = detail.get("mergeable")
    pull = updated(entry.pull, approved=approved, mergeable=mergeable if isinstance(mergeable, bool) else None)
    return updated(entry, pull=pull)


def new_lines(previous: DriftResult | None, current: DriftResult) -> tuple[str, ...]:
    """Lines of ``current``'s actionable entries that ``previous`` did not have (all of them without one)."""
    before = {e.line() for e in previous.actionable} if previous is not None else set()
    return tuple(e.line() for e in current.actionable if e.line() not in before)


def _results_dir(ws: Workspace) -> Path:
    return ws.store.root / "drift" / "results"


def last_result(ws: Workspace) -> DriftResult | None:
    """The newest kept watch, or None (a damaged one is skipped)."""
    folder = _results_dir(ws)
    for path in sorted(folder.glob("*.json"), reverse=True) if folder.is_dir() else ():
        try:
            return DriftResult.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, UnicodeDecodeError):
            continue
    return None


def history(ws: Workspace) -> list[DriftResult]:
    """Every kept watch, oldest first (for the trend)."""
    folder = _results_dir(ws)
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            found.append(DriftResult.model_validate_json(path.read_text(encoding="utf-8")))
        except (OSError, ValidationError, UnicodeDecodeError):
            continue
    return found


def save_result(ws: Workspace, result: DriftResult) -> Path:
    """Keep ``result`` under ``<state>/drift/results/`` (newest last by name); returns the path."""
    stamp = result.started_at.replace(":", "").replace("-", "").replace("+", "p")
    folder = _results_dir(ws)
    index = len(list(folder.glob(f"{stamp}-*.json"))) if folder.is_dir() else 0
    path = folder / f"{stamp}-{index:03}.json"
    write_json_atomic(path, result.model_dump(mode="json"))
    return path
