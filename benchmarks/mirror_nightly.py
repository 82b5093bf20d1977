"""One real nightly on a clone of the fork's public mirror: merge, build (cpu-overlay), static and unit tiers.

    python benchmarks/mirror_nightly.py --mirror PATH_OR_URL [--branch B] [--conflicts MIN-MAX] [--to REF]
        [--work DIR] [--serving-python PY] [--budget-s S] [--out FILE.md]

1. Two clones of the mirror: ``prep`` and ``fork`` (upstream = the mirror's ``main``).
2. The person's result: the mirror's later branch that carries the fork branch's commits on a newer upstream base
   (:func:`realsyncs.find_real_syncs`); the sync goes to that base (``--to`` another upstream commit instead).
   Without ``--branch`` the pair is chosen so that the store is exercised (:func:`pick_pair`): the newest pair
   whose merge (``git merge-tree`` of the fork branch and the person's new base) conflicts on ``--conflicts``
   paths (default 3-30).
3. The resolution store, prepared from that result: ``ds4sync merge`` in ``prep`` stops for a person; each
   conflicted path is taken as the person's later branch has it, and ``ds4sync resume`` records the resolutions
   into the profile's store (a copy of the shipped profile).
4. ``ds4sync nightly`` in ``fork`` with ``build: {profile: cpu-overlay}`` and ``gates: {tiers: [static, unit]}``:
   its merge replays the store. When its semantic phase stops it, the breaks are fixed as the person's result has
   those paths (:func:`fix_as_person`) and the run resumes within the rest of the budget. Then it prints what ran:
   each phase, the build, both tiers with their counts per gate, and the report's Remaining gate. Of the store it
   prints the conflicts predicted, the entries recorded, the conflicts the nightly replayed from the store and
   those left for a person, and whether each replayed file is byte-identical to the person's result
   (:func:`store_replay`); of a failed per-file static gate, the failing files the merge left as the fork head has
   them (:func:`failing_before`). The cpu-overlay build needs an environment with an installed vLLM CPU wheel
   (``--serving-python``, default ``$DS4SYNC_SERVING_PYTHON``); without one the build says so and the unit tier,
   which runs in the build's venv, is an ``error`` that names it.

Machine paths are replaced by ``WORK``, ``MIRROR`` and ``SERVING_PYTHON`` in what is printed and written.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from realsyncs import RealSync, find_real_syncs

from ds4sync.core.errors import GitError
from ds4sync.core.git import GitRepo
from ds4sync.merge.rerere import ResolutionStore
from ds4sync.models.config import shipped_profile
from ds4sync.models.record import RecordStore, RunRecord
from ds4sync.report.build import build_view

DS4SYNC = [sys.executable, "-m", "ds4sync.cli"]
#: Conflicted paths a pair should predict (inclusive) to exercise the store without a person's day of work.
CONFLICTS = (3, 30)


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _clone(mirror: str, path: Path) -> GitRepo:
    """A clone of the mirror without a checkout, with the mirror as remote ``upstream`` too (its ``main``)."""
    _git("clone", "-q", "--no-checkout", mirror, str(path))
    _git("remote", "add", "upstream", mirror, cwd=path)
    _git("fetch", "-q", "upstream", "+refs/heads/main:refs/remotes/upstream/main", cwd=path)
    return GitRepo(path)


def _check_out(repo: GitRepo, branch: str, *, revs: tuple[str, ...] = ()) -> list[str]:
    """Check the fork branch out in ``repo``; returns the paths of the blobs the mirror lacks
    (:func:`_stand_in_for_missing_blobs`) in its tree and those of ``revs``."""
    missing = _stand_in_for_missing_blobs(repo.path, (f"origin/{branch}", *revs))
    _git("checkout", "-q", "-B", branch, f"origin/{branch}", cwd=repo.path)
    return missing


def _stand_in_for_missing_blobs(path: Path, revs: tuple[str, ...]) -> list[str]:
    """The public mirror lacks a few large blobs (documentation assets): git cannot check out a tree holding them.
    Each one gets a placeholder blob through ``refs/replace/<sha>`` (git-replace(1)), so checkouts and merges work;
    commit and tree ids stay the real ones. Returns the paths, which the result names."""
    paths: dict[str, str] = {}
    for rev in revs:
        listed = _git("ls-tree", "-r", "--full-tree", rev, cwd=path).splitlines()
        by_sha = {line.split()[2]: line.split("\t", 1)[1] for line in listed if " blob " in line}
        out = _git("rev-list", "--objects", "--missing=print", "--no-object-names", f"{rev}^{{tree}}", cwd=path)
        for sha in (line[1:] for line in out.splitlines() if line.startswith("?")):
            paths.setdefault(sha, by_sha.get(sha, "?"))
    for sha in paths:
        text = f"placeholder: blob {sha} is absent from the mirror\n"
        stand_in = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"], cwd=path, input=text, capture_output=True, text=True, check=True
        ).stdout.strip()
        _git("update-ref", f"refs/replace/{sha}", stand_in, cwd=path)
    return sorted(paths.values())


def _ds4sync(*args: str, env: dict[str, str] | None = None, log: list[str]) -> int:
    """Run the ds4sync CLI; its output goes to ``log`` (the caller prints what it needs)."""
    start = time.monotonic()
    res = subprocess.run([*DS4SYNC, *args], capture_output=True, text=True, env=env)
    log.append(f"$ ds4sync {' '.join(args)}  -> exit {res.returncode} in {time.monotonic() - start:.0f} s")
    log.extend((res.stdout + res.stderr).strip().splitlines()[-25:])
    return res.returncode


def _config(path: Path, *, branch: str, to: str, profile: Path, build: bool, budget_s: float | None) -> Path:
    config: dict = {
        "upstream": {"remote": "upstream", "ref": to, "name": "vllm-project/vllm"},
        "fork": {"branch": branch, "name": "mirror"},
        "profile": str(profile),
        "nightly": {"promote": False},
    }
    if build:
        config["build"] = {"profile": "cpu-overlay"}
        config["gates"] = {"tiers": ["static", "unit"]}
        if budget_s:
            config["nightly"]["budget_s"] = budget_s
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def predicted_conflicts(repo: GitRepo, fork: str, upstream: str) -> int | None:
    """Conflicted paths of merging ``upstream`` into ``fork`` (``git merge-tree``, no work tree); None when git
    cannot merge the trees (one holds a blob the mirror lacks)."""
    try:
        return len(repo.merge_tree(fork, upstream).conflicts)
    except GitError:
        return None


def pick_pair(
    repo: GitRepo, pairs: list[RealSync], *, branch: str | None, conflicts: tuple[int, int] = CONFLICTS
) -> tuple[RealSync, int | None] | None:
    """The pair the nightly replays, with its predicted conflicts; None when there is none to pick.

    ``branch``: the pair whose fork branch it is. Otherwise the newest pair (``pairs`` oldest first, as
    :func:`realsyncs.find_real_syncs` orders them) predicting ``conflicts`` paths (min, max), else the newest
    that conflicts at all, else the newest: a pair that merges cleanly leaves the store nothing to replay.
    """
    if branch is not None:
        chosen = next((s for s in pairs if s.before == branch), None)
        return None if chosen is None else (chosen, predicted_conflicts(repo, chosen.before_head, chosen.new_base))
    if not pairs:
        return None
    counted: list[tuple[RealSync, int | None]] = []
    for sync in reversed(pairs):
        n = predicted_conflicts(repo, sync.before_head, sync.new_base)
        if n is not None and conflicts[0] <= n <= conflicts[1]:
            return sync, n
        counted.append((sync, n))
    return next(((s, n) for s, n in counted if n), counted[0])


@dataclass(frozen=True)
class PrepResult:
    """What preparing the store from the person's result did.

    ``conflicts``: paths the prep merge left for a person (each taken as the person's result has it);
    ``entries``: store entries recorded; ``not_stored``: (path, conflict kind) of conflicts no entry was recorded
    for (rerere records content conflicts only: a kind without markers has no preimage).
    """

    conflicts: int = 0
    entries: int = 0
    not_stored: tuple[tuple[str, str], ...] = ()


def prepare_store(mirror: str, work: Path, sync: RealSync, to: str, profile: Path, log: list[str]) -> PrepResult:
    """Record the person's resolutions of ``sync`` into ``profile``'s store."""
    repo = _clone(mirror, work / "prep")
    _check_out(repo, sync.before, revs=(to, sync.after_head))
    config = _config(work / "prep.yaml", branch=sync.before, to=to, profile=profile, build=False, budget_s=None)
    store = ResolutionStore(profile / "patches" / "resolutions")
    before = len(store.entry_names())
    common = ["--repo", str(repo.path), "--config", str(config)]
    code = _ds4sync("merge", to, "--branch", sync.before, *common, log=log)
    if code != 4:  # nothing for a person: no conflict to learn
        return PrepResult()
    run = RecordStore(repo.path / ".git" / "ds4sync")
    record = run.load(run.run_ids()[-1])
    worktree = Path(record.worktree)
    unmerged = sorted(set(_git("diff", "--name-only", "--diff-filter=U", cwd=worktree).splitlines()))
    after = set(_git("ls-tree", "-r", "--name-only", sync.after_head, "--", *unmerged, cwd=worktree).splitlines())
    for path in unmerged:
        if path in after:
            _git("checkout", sync.after_head, "--", path, cwd=worktree)
        else:
            _git("rm", "-q", "--", path, cwd=worktree)
    log.append(f"prep: {len(unmerged)} conflicted paths taken from the person's result {sync.after_head[:12]}")
    _ds4sync("resume", *common, log=log)
    merge = run.load(record.run_id).results.merge
    conflicts = merge.conflicts if merge is not None else ()
    return PrepResult(
        conflicts=len(unmerged),
        entries=len(store.entry_names()) - before,
        not_stored=tuple((c.path, c.kind) for c in conflicts if not c.stored_as),
    )


@dataclass(frozen=True)
class StoreReplay:
    """What the nightly's merge did with the store, against the person's result.

    ``conflicts``: the merge's conflicted paths; ``replayed``: paths resolved from the store; ``left``: paths
    left for a person (unresolved, or a proposal nobody accepted), with their conflict kind; ``identical`` /
    ``differing``: replayed paths whose staged blob is / is not the person's.
    """

    conflicts: int
    replayed: tuple[str, ...]
    left: tuple[tuple[str, str], ...]
    identical: tuple[str, ...]
    differing: tuple[str, ...]


def store_replay(repo: GitRepo, record: RunRecord, person: str) -> StoreReplay | None:
    """The store's part of ``record``'s merge, each replayed file compared with commit ``person``'s; None when
    the run has no merge result.

    The blob a replay staged (``replayed_blob``) is the one the merge commit holds: a person's later edit makes
    the conflict theirs (resolution ``person``), not ``recorded``. Equal blob ids are equal bytes.
    """
    merge = record.results.merge
    if merge is None:
        return None
    replayed = {c.path: c.replayed_blob for c in merge.conflicts if c.resolution == "recorded"}
    left = tuple(
        (c.path, c.kind)
        for c in merge.conflicts
        if c.resolution in (None, "unresolved") or (c.resolution == "proposed" and not c.accepted_by)
    )
    theirs = repo.blob_ids(person, replayed)
    same = tuple(p for p, blob in replayed.items() if blob is not None and theirs.get(p) == blob)
    return StoreReplay(
        conflicts=len(merge.conflicts),
        replayed=tuple(replayed),
        left=left,
        identical=same,
        differing=tuple(p for p in replayed if p not in same),
    )


def fix_as_person(record: RunRecord, person: str, log: list[str]) -> tuple[str, ...]:
    """What a person does when the semantic phase stops the run, done as the person's result did it.

    Each path with a semantic break that blocks is taken as commit ``person`` has it (removed where it has none)
    and committed in the run's sync worktree, for ``ds4sync resume`` to prove. Returns the paths changed: none
    when the semantic phase did not fail, or when the person's result has those paths as the merge does (the
    breaks are in the person's result too: nothing of theirs fixes them).
    """
    semantic = record.results.semantic
    if record.phase("semantic").status != "failed" or semantic is None:
        return ()
    worktree = Path(record.worktree)
    paths = sorted({f.path for f in semantic.blockers()})
    theirs = set(_git("ls-tree", "-r", "--name-only", person, "--", *paths, cwd=worktree).splitlines())
    for path in paths:
        if path in theirs:
            _git("checkout", person, "--", path, cwd=worktree)
        elif _git("ls-files", "--", path, cwd=worktree):
            _git("rm", "-q", "--", path, cwd=worktree)
    changed = tuple(_git("diff", "--cached", "--name-only", cwd=worktree).splitlines())
    if changed:
        message = f"Take {len(changed)} path(s) with semantic breaks as the person's result {person[:12]} has them"
        _git(
            "-c",
            "user.name=mirror nightly",
            "-c",
            "user.email=nightly@ds4sync.invalid",
            "commit",
            "-q",
            "-m",
            message,
            cwd=worktree,
        )
        log.append(f"person's fix of the semantic breaks: {', '.join(changed)}")
    return changed


def resume_within(repo: Path, config: Path, budget_s: float | None, log: list[str]) -> None:
    """``ds4sync resume`` of the run, with the gates stopped when ``budget_s`` is spent (as the nightly's budget
    does; the CLI's resume has no budget)."""
    from ds4sync.core.errors import Ds4syncError
    from ds4sync.loop.sync import resume
    from ds4sync.runner import open_workspace

    start = time.monotonic()
    deadline = start + budget_s if budget_s else None
    try:
        outcome = resume(open_workspace(repo, config_path=config), progress=log.append, deadline=deadline)
        log.append(f"$ resume  -> {outcome.status} in {time.monotonic() - start:.0f} s")
    except Ds4syncError as exc:
        log.append(f"$ resume  -> {exc.one_line()}")


#: Static checks whose verdict on a file is a function of the file (with the pinned tool): a failing file the merge
#: left byte-identical to the fork head's failed there too.
_PER_FILE_CHECKS = ("ruff-check", "ruff-format", "diff-check")


def failing_before(repo: GitRepo, record: RunRecord) -> list[str]:
    """Per failed per-file static gate: how many of its failing files the merge left as the fork head has them.

    Those failures were there before the merge (same bytes, same pinned tool; a tool config the merge changed
    could still move a verdict). Markdown list items; none when no such gate failed.
    """
    lines = []
    for tier in record.results.gates.values():
        for gate in tier.gates:
            if gate.name not in _PER_FILE_CHECKS or gate.status != "failed" or not gate.commit:
                continue
            paths = list(dict.fromkeys(f.node_id.split(":", 1)[0] for f in gate.failures))
            ours = repo.blob_ids(gate.commit, paths)
            before = repo.blob_ids(record.fork.head_before, paths)
            same = [p for p in paths if p in ours and ours[p] == before.get(p)]
            changed = [p for p in paths if p not in same]
            lines.append(
                f"- {gate.name} ({gate.tier}): {len(same)} of {len(paths)} failing files are byte-identical on the "
                "fork head before the merge (already failing there)"
                + (f"; changed by the merge: {', '.join(changed)}" if changed else "")
            )
    return lines


def _tier_lines(record: RunRecord) -> list[str]:
    out = []
    for tier, result in record.results.gates.items():
        out.append(f"- tier {tier}: {result.line()}")
        for gate in result.gates:
            env = gate.details.environment or "?"
            out.append(f"  - {gate.name} [{env}]: {gate.status}, {gate.counts.summary()}; {gate.reason[:300]}")
    return out or ["- no gate tier ran"]


def store_lines(predicted: int | None, prep: PrepResult, replay: StoreReplay | None) -> list[str]:
    """The store's numbers, as Markdown list items: predicted, recorded, replayed, left, byte-identical."""
    not_stored = ", ".join(f"{path} ({kind})" for path, kind in prep.not_stored)
    lines = [
        f"- conflicts predicted (git merge-tree of the fork branch and the sync's upstream commit): "
        f"{'unknown' if predicted is None else predicted}",
        f"- resolution store: {prep.entries} entries recorded from the person's result "
        f"({prep.conflicts} conflicted paths taken from it" + (f"; no entry for {not_stored})" if not_stored else ")"),
    ]
    if replay is None:
        return [*lines, "- nightly merge: not run"]
    lines.append(
        f"- nightly merge: {replay.conflicts} conflicted paths, {len(replay.replayed)} replayed from the store, "
        f"{len(replay.left)} left for a person"
        + (f" ({', '.join(f'{path} ({kind})' for path, kind in replay.left)})" if replay.left else "")
    )
    if replay.replayed:
        lines.append(
            f"- replayed files byte-identical to the person's result: {len(replay.identical)} of "
            f"{len(replay.replayed)}" + (f" (differing: {', '.join(replay.differing)})" if replay.differing else "")
        )
    return lines


def summary(
    record: RunRecord, *, store: list[str], sync: RealSync, to: str, wall_s: float, before: tuple[str, ...] = ()
) -> str:
    """What the nightly ran, as Markdown: the pair, the store's lines (:func:`store_lines`), phases, build, tiers
    with counts, the report's Remaining gate."""
    build = record.results.build
    merge = record.results.merge
    lines = [
        f"- fork branch `{record.fork.branch}` ({record.fork.head_before[:12]}), upstream `main` at {to[:12]}",
        f"- person's result: `{sync.after}` at {sync.after_head[:12]} "
        f"({sync.carried}/{sync.total} commits carried, {sync.upstream_commits} upstream commits)",
        *store,
        f"- run {record.run_id}: {record.status} in {wall_s:.0f} s (wall)",
        "",
        "Phases:",
        *(
            f"- {name}: {state.status}" + (f" ({state.message[:300]})" if state.message else "")
            for name, state in record.phases.items()
        ),
        "",
    ]
    if merge is not None:
        how: dict[str, int] = {}
        for conflict in merge.conflicts:
            how[conflict.resolution or "unresolved"] = how.get(conflict.resolution or "unresolved", 0) + 1
        lines.append(
            f"Merge: {merge.upstream_commits} upstream commits, {len(merge.conflicts)} conflicted paths"
            + (f" ({', '.join(f'{n} {k}' for k, n in how.items())})" if how else "")
        )
    lines.append(
        "Build: "
        + ("not run" if build is None else f"{build.status} ({build.profile}) {build.summary or build.message}")
    )
    if build is not None and build.status != "passed":
        failed = [i for i in (build.proof.items if build.proof else ()) if i.status != "passed" and not i.optional]
        why = [
            f"{i.kind} {i.name}: {i.status}: {i.detail.split(' ', 1)[0]} ...{i.detail.rsplit('`', 1)[-1]}"
            for i in failed
        ]
        why = why or list(build.first_errors[:5] or build.tail[-5:])
        lines += [f"  - failed step: {build.failed_step}", *(f"  - {t}" for t in why)]
    lines += ["", "Gates:", *_tier_lines(record), *before, "", "Remaining gate (the report's):"]
    lines += [f"- {item.text}" for item in build_view(record).remaining]
    return "\n".join(line for line in lines if line is not None)


def _scrub(text: str, names: dict[str, str]) -> str:
    for path, name in sorted(names.items(), key=lambda kv: -len(kv[0])):
        if path:
            text = text.replace(path, name)
    # Scratch folders of the proof and the gates (under the system's temporary folder): no machine path either.
    return re.sub(re.escape(tempfile.gettempdir()) + r"/[^\s:)`'\"]+", "TMP", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", required=True, help="path or URL of the fork's mirror (main = upstream)")
    parser.add_argument("--branch", default=None, help="the fork branch to sync (default: picked, see --conflicts)")
    parser.add_argument(
        "--conflicts",
        default=f"{CONFLICTS[0]}-{CONFLICTS[1]}",
        help="without --branch: pick the newest pair whose merge predicts MIN-MAX conflicted paths",
    )
    parser.add_argument("--to", default=None, help="upstream commit to sync to (default: the person's new base)")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a new temporary one)")
    parser.add_argument("--serving-python", default=os.environ.get("DS4SYNC_SERVING_PYTHON", ""))
    parser.add_argument("--budget-s", type=float, default=None, help="the nightly's time budget (gates past it stop)")
    parser.add_argument("--out", type=Path, default=None, help="also write the result as Markdown here")
    args = parser.parse_args(argv)
    low, _, high = args.conflicts.partition("-")
    if not (low.isdigit() and high.isdigit() and int(low) <= int(high)):
        parser.error(f"--conflicts {args.conflicts}: expected MIN-MAX, e.g. 3-30")
    work = args.work or Path(tempfile.mkdtemp(prefix="mirror-nightly-"))
    work.mkdir(parents=True, exist_ok=True)
    log: list[str] = []
    start = time.monotonic()
    fork = _clone(args.mirror, work / "fork")
    pairs = find_real_syncs(fork, upstream="upstream/main")
    picked = pick_pair(fork, pairs, branch=args.branch, conflicts=(int(low), int(high)))
    if picked is None:
        print(
            f"no later branch of the mirror carries {args.branch or 'any branch'}'s commits: no person's result",
            file=sys.stderr,
        )
        return 2
    sync, predicted = picked
    to = fork.resolve_commit(args.to) if args.to else sync.new_base
    assert to is not None, f"--to {args.to} is not a commit of the mirror"
    if to != sync.new_base:
        predicted = predicted_conflicts(fork, sync.before_head, to)
    missing = _check_out(fork, sync.before, revs=(to, sync.after_head))
    profile = work / "profile"
    shutil.copytree(shipped_profile(), profile, ignore=shutil.ignore_patterns("__pycache__"))
    prep = prepare_store(args.mirror, work, sync, to, profile, log)
    config = _config(
        work / "nightly.yaml", branch=sync.before, to=to, profile=profile, build=True, budget_s=args.budget_s
    )
    env = {**os.environ, "DS4SYNC_SERVING_PYTHON": args.serving_python}
    night = time.monotonic()
    _ds4sync("nightly", "--repo", str(fork.path), "--config", str(config), "--no-notify", env=env, log=log)
    store = RecordStore(fork.path / ".git" / "ds4sync")
    record = store.load(store.run_ids()[-1])
    fixed = fix_as_person(record, sync.after_head, log)
    if fixed:
        os.environ["DS4SYNC_SERVING_PYTHON"] = args.serving_python
        left = args.budget_s - (time.monotonic() - night) if args.budget_s else None
        resume_within(fork.path, config, max(left, 60.0) if left is not None else None, log)
        record = store.load(record.run_id)
    store_text = store_lines(predicted, prep, store_replay(fork, record, sync.after_head))
    if fixed:
        store_text.append(
            f"- semantic breaks fixed as the person's result has the paths ({', '.join(fixed)}), committed in the "
            "sync worktree, then `ds4sync resume` within the rest of the budget"
        )
    wall = time.monotonic() - night
    text = summary(record, store=store_text, sync=sync, to=to, wall_s=wall, before=tuple(failing_before(fork, record)))
    if missing:
        text = f"- blobs the mirror lacks, read as placeholders (refs/replace): {', '.join(missing)}\n{text}"
    names = {str(work): "WORK", args.mirror: "MIRROR", args.serving_python: "SERVING_PYTHON", sys.executable: "PYTHON"}
    text = _scrub(text, names)
    print(text)
    print(_scrub("\n".join(log), names), file=sys.stderr)
    print(f"total {time.monotonic() - start:.0f} s", file=sys.stderr)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
