"""``ds4sync backport evaluate``: keep an upstream backport only when measurements say so.

Steps: apply the upstream commit (``git cherry-pick -x``) on a branch made from the sync
branch, build both trees with the configured command, A/B them (both servers started alike,
randomised ABBA blocks, KV capacity read from each server), then decide include or exclude
with the measured reasons (a candidate that does not start or loses requests is excluded,
never an error), e.g. ``excluded: reduced KV capacity by 3.80%; slowed c1.output_throughput by
3.02%; undecided c8.output_throughput (...; about 14 pairs would decide)``. A metric whose interval
decided nothing always excludes (``require_benefit`` only says whether all-neutral is enough).
An included backport is written as a patch-set folder (``patchset.yaml`` + the ``git format-patch`` file).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from ds4sync.core.children import ChildRegistry
from ds4sync.core.git import GitRepo
from ds4sync.core.proc import run
from ds4sync.models.serving_abstats import schedule
from ds4sync.models.serving_results import ABResult, BackportDecision, MetricComparison, Side
from ds4sync.models.serving_settings import BackportConfig, ServingConfig
from ds4sync.serving.ab import LiveRuns, LiveSides, compare_live, measure_live, new_seed, samples_from_steps

Measure = Callable[[str, int], dict[str, float]]
MeasureFactory = Callable[["Trees"], tuple[Measure, Callable[[], None]]]
KV_METRIC = "kv_cache_tokens"


def decide(
    rows: Sequence[MetricComparison],
    *,
    kv_change_pct: float | None,
    config: BackportConfig,
    lost: dict[str, float] | None = None,
) -> tuple[Literal["include", "exclude"], list[str]]:
    """The decision and its reasons from A/B rows (KV-capacity row excluded), the KV change in percent and the
    requests each side lost.

    A metric whose interval decided nothing (inconclusive) always excludes, whatever ``require_benefit`` says,
    naming the pairs its spread would need; ``require_benefit`` then only decides whether all-neutral is enough.
    """
    reasons: list[str] = []
    bad = False
    lost = lost or {}
    if lost.get("candidate", 0) > lost.get("baseline", 0):
        reasons.append(f"lost {lost['candidate']:g} request(s) (baseline lost {lost.get('baseline', 0):g})")
        bad = True
    elif lost.get("baseline", 0) > 0:
        reasons.append(f"the baseline lost {lost['baseline']:g} request(s): no trustworthy comparison")
        bad = True
    if kv_change_pct is not None and kv_change_pct < -config.kv_tolerance_pct:
        reasons.append(f"reduced KV capacity by {abs(kv_change_pct):.2f}%")
        bad = True
    perf = [r for r in rows if r.metric != KV_METRIC]
    for row in perf:
        if row.verdict == "regression":
            verb = "slowed" if row.direction == "higher" else "raised"
            reasons.append(f"{verb} {row.metric} by {abs(row.mean_delta_pct):.2f}%")
            bad = True
    gains = [r for r in perf if r.verdict == "improvement"]
    reasons += [f"improved {r.metric} by {abs(r.mean_delta_pct):.2f}%" for r in gains]
    unsure = [r for r in perf if r.verdict == "inconclusive"]
    reasons += [
        f"undecided {r.metric} ({r.mean_delta_pct:+.2f}% mean, {100 * r.confidence:.4g}% CI "
        f"[{r.ci_low_pct:+.2f}%, {r.ci_high_pct:+.2f}%]; "
        + (f"about {r.pairs_needed} pairs would decide)" if r.pairs_needed else "more pairs or less noise needed)")
        for r in unsure
    ]
    if not gains and not unsure and not bad:
        reasons.append("no measurable benefit (all metrics neutral)")
    bad = bad or bool(unsure) or (config.require_benefit and not gains)
    return ("exclude" if bad else "include"), reasons


@dataclass(frozen=True)
class Trees:
    """The two checkouts compared: the sync branch (A) and the sync branch plus the backport (B)."""

    base: GitRepo
    candidate: GitRepo
    branch: str


def prepare_trees(repo: GitRepo, sha: str, *, base_ref: str, base_tree: Path | None, work_dir: Path) -> Trees | str:
    """A candidate worktree at ``base_ref`` + cherry-pick of ``sha``; a string says why it failed."""
    branch = f"backport/{sha[:10]}"
    path = work_dir / f"backport-{sha[:10]}"
    repo.worktree_remove(path)
    repo.delete_branch(branch)
    candidate = repo.worktree_add(path, branch, base_ref)
    picked, conflicted = candidate.cherry_pick(sha)
    if not picked:
        repo.worktree_remove(path)
        repo.delete_branch(branch)
        return (
            f"does not apply cleanly on {base_ref} (cherry-pick conflict in {', '.join(conflicted) or '?'}); "
            "adapt it by hand"
        )
    if base_tree is None:
        base_path = work_dir / f"base-{sha[:10]}"
        repo.worktree_remove(base_path)
        base_tree = repo.worktree_add_detached(base_path, base_ref).path
    return Trees(base=GitRepo(base_tree), candidate=candidate, branch=branch)


def build_trees(trees: Trees, config: BackportConfig, *, log_dir: Path, python: str) -> str | None:
    """Run the build command in both trees; a string names the first failure."""
    if not config.build_command:
        return None
    log_dir.mkdir(parents=True, exist_ok=True)
    for side, tree in (("baseline", trees.base), ("candidate", trees.candidate)):
        argv = [a.replace("{worktree}", str(tree.path)).replace("{python}", python) for a in config.build_command]
        res = run(argv, cwd=tree.path, timeout_s=config.build_timeout_s, log_path=log_dir / f"build-{side}.log")
        if not res:
            return f"{side} build failed: {res.describe()}"
    return None


def live_measure(
    serving: ServingConfig,
    trees: Trees,
    *,
    out_dir: Path,
    seed: int = 0,
    registry: ChildRegistry | None = None,
    progress: Callable[[str], None] = lambda _m: None,
) -> tuple[Measure, Callable[[], None]]:
    """A measure function starting each tree's server (``{worktree}`` in the command) and reading KV capacity.

    Both servers are started alike (``serving.ab.servers``: restarted for every run, or both kept up).
    """
    from ds4sync.serving import kvcache
    from ds4sync.serving.client import RequestFailed

    def side(tree: GitRepo):
        server = serving.server.model_dump()
        server["command"] = [a.replace("{worktree}", str(tree.path)) for a in server.get("command") or ()]
        server["cwd"] = str(tree.path)
        return serving.server.model_validate(server)

    sides = LiveSides(
        {"A": side(trees.base), "B": side(trees.candidate)},
        serving.bench,
        out_dir=out_dir,
        servers=serving.ab.servers,
        warmup_runs=serving.ab.warmup_runs,
        seed=seed,
        registry=registry,
        progress=progress,
    )

    def measure(which: str, step: int) -> dict[str, float]:
        values = sides.measure(which, step)
        handle = sides.handle(which)
        with handle.client() as client:
            try:
                capacity = kvcache.read_capacity(client, handle.log_text())
            except RequestFailed:
                capacity = None
        if capacity and capacity.tokens is not None:
            values[KV_METRIC] = float(capacity.tokens)
        return values

    measure.describe = sides.describe  # type: ignore[attr-defined]
    return measure, sides.close


def evaluate_backport(
    repo: GitRepo,
    sha: str,
    serving: ServingConfig,
    *,
    base_ref: str,
    base_tree: Path | None,
    work_dir: Path,
    python: str,
    measure_factory: MeasureFactory | None = None,
    patch_dir: Path | None = None,
    registry: ChildRegistry | None = None,
    seed: int | None = None,
    progress: Callable[[str], None] = lambda _m: None,
) -> BackportDecision:
    """Apply, build, A/B and decide.

    ``measure_factory(trees)`` gives the per-step measurement and a cleanup; the default starts
    each tree's server (:func:`live_measure`). With ``base_tree`` None the baseline is a
    detached worktree at ``base_ref``; otherwise that tree (the sync worktree) is used as is.

    Never raises for a backport that does not apply, build or serve, or that loses requests: that is an
    ``exclude`` with the reason.
    """
    config = serving.backport
    base_sha = repo.resolve_commit(base_ref)
    trees = prepare_trees(repo, sha, base_ref=base_ref, base_tree=base_tree, work_dir=work_dir)
    if isinstance(trees, str):
        return BackportDecision(
            upstream_sha=sha, base_sha=base_sha, decision="exclude", basis="unmeasured", reasons=(trees,)
        )
    common: dict[str, Any] = {"upstream_sha": sha, "base_sha": base_sha, "candidate_sha": trees.candidate.head()}
    failure = build_trees(trees, config, log_dir=work_dir / "logs", python=python)
    if failure:
        return BackportDecision(decision="exclude", basis="unmeasured", reasons=(failure,), **common)
    seed = new_seed() if seed is None else seed
    order = schedule(config.pairs, seed=seed)
    factory = measure_factory or (
        lambda t: live_measure(serving, t, out_dir=work_dir / "ab", seed=seed, registry=registry, progress=progress)
    )
    runs = _measure_trees(factory(trees), serving, order, out_dir=work_dir / "ab", progress=progress)
    if not all(samples_from_steps(runs.steps)):
        return BackportDecision(
            decision="exclude", basis="unmeasured", reasons=(runs.error or "nothing was measured",), **common
        )
    ab = _compare_trees(runs, serving, order, labels=(base_ref, trees.branch), seed=seed)
    return _decided(ab, config, trees, sha=sha, patch_dir=patch_dir, common=common)


def _measure_trees(
    measurement: tuple[Measure, Callable[[], None]],
    serving: ServingConfig,
    order: Sequence[Side],
    *,
    out_dir: Path,
    progress: Callable[[str], None],
) -> LiveRuns:
    """Measure the base and candidate trees in ``order`` (:func:`measure_live`), then close the measurement."""
    measure, close = measurement
    grace = 3 * serving.server.stop_grace_s
    try:
        return measure_live(
            order,
            measure,
            serving.ab_metrics,
            describe=getattr(measure, "describe", None),
            out_dir=out_dir,
            close=close,
            grace_s=grace,
            progress=progress,
        )
    finally:
        close()


def _compare_trees(
    runs: LiveRuns, serving: ServingConfig, order: Sequence[Side], *, labels: tuple[str, str], seed: int
) -> ABResult:
    """The A/B of the base and candidate trees' runs (:func:`compare_live`), as the serving config judges it."""
    return compare_live(
        runs,
        serving.ab_metrics,
        labels=labels,
        confidence=serving.ab.confidence,
        min_pairs=serving.ab.min_pairs,
        mode="started-both" if serving.ab.servers == "both" else "started-alternate",
        order=order,
        seed=seed,
    )


def _decided(
    ab: ABResult, config: BackportConfig, trees: Trees, *, sha: str, patch_dir: Path | None, common: dict[str, Any]
) -> BackportDecision:
    """The decision on a measured A/B and its basis (an A/B that could not measure excludes, unmeasured), with the
    KV-capacity change; an included backport is written as a patch-set under ``patch_dir``."""
    kv_row = next((r for r in (*ab.rows, *ab.reported) if r.metric == KV_METRIC), None)
    kv = kv_row.mean_delta_pct if kv_row else None
    decision, reasons = decide(ab.rows, kv_change_pct=kv, config=config, lost=ab.lost)
    basis: Literal["measured", "undecided", "unmeasured"] = "measured"
    if ab.error:
        decision, basis = "exclude", "unmeasured"
        reasons.insert(0, f"could not measure: {ab.error}")
    elif decision == "exclude" and _undecided(ab, kv_change_pct=kv, config=config):
        basis = "undecided"
    patchset = None
    if decision == "include" and patch_dir is not None:
        patchset = str(write_patchset(trees.candidate, trees.candidate.head(), sha, reasons, patch_dir))
    return BackportDecision(
        decision=decision, basis=basis, reasons=tuple(reasons), kv_change_pct=kv, ab=ab, patchset=patchset, **common
    )


def _undecided(ab: ABResult, *, kv_change_pct: float | None, config: BackportConfig) -> bool:
    """Whether an exclusion rests only on intervals that decided nothing (no measured harm)."""
    perf = [r for r in ab.rows if r.metric != KV_METRIC]
    harm = (
        ab.lost.get("candidate", 0) > ab.lost.get("baseline", 0)
        or (kv_change_pct is not None and kv_change_pct < -config.kv_tolerance_pct)
        or any(r.verdict == "regression" for r in perf)
    )
    return not harm and any(r.verdict == "inconclusive" for r in perf)


def write_patchset(tree: GitRepo, commit: str, upstream_sha: str, reasons: Sequence[str], patch_dir: Path) -> Path:
    """``<patch_dir>/backport-<sha10>/`` with ``patchset.yaml`` (a :class:`PatchSet` of kind backport,
    upstream provenance, dropped once upstream has the commit) and the ``git format-patch`` file."""
    from ds4sync.patchsets.model import DropWhen, PatchSet, Upstream

    folder = patch_dir / f"backport-{upstream_sha[:10]}"
    patches = tree.format_patch(f"{commit}~1..{commit}", folder)
    meta = PatchSet(
        id=folder.name,
        title=tree.subject(commit),
        kind="backport",
        rationale="kept by measurement: " + "; ".join(reasons),
        upstream=Upstream(commit=upstream_sha),
        drop_when=DropWhen(upstream_has_commit=upstream_sha),
        patches=tuple(p.name for p in patches),
    )
    data = meta.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    (folder / "patchset.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return folder
