"""One real nightly on a clone of the fork's public mirror: merge, build (cpu-overlay), static and unit tiers.

    python benchmarks/mirror_nightly.py --mirror PATH_OR_URL [--branch B] [--to REF] [--work DIR]
        [--serving-python PY] [--budget-s S] [--out FILE.md]

1. Two clones of the mirror: ``prep`` and ``fork`` (upstream = the mirror's ``main``).
2. The person's result: the mirror's later branch that carries ``--branch``'s commits on a newer upstream base
   (:func:`realsyncs.find_real_syncs`); the sync goes to that base (``--to`` another upstream commit instead).
3. The resolution store, prepared from that result: ``ds4sync merge`` in ``prep`` stops for a person; each
   conflicted path is taken as the person's later branch has it, and ``ds4sync resume`` records the resolutions
   into the profile's store (a copy of the shipped profile).
4. ``ds4sync nightly`` in ``fork`` with ``build: {profile: cpu-overlay}`` and ``gates: {tiers: [static, unit]}``:
   its merge replays the store; then it prints what ran: each phase, the build, both tiers with their counts per
   gate, and the report's Remaining gate. The cpu-overlay build needs an environment with an installed vLLM CPU
   wheel (``--serving-python``, default ``$DS4SYNC_SERVING_PYTHON``); without one the build says so and the unit
   tier, which runs in the build's venv, is an ``error`` that names it.

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
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from realsyncs import RealSync, find_real_syncs

from ds4sync.core.git import GitRepo
from ds4sync.models.config import shipped_profile
from ds4sync.models.record import RecordStore, RunRecord
from ds4sync.report.build import build_view

DS4SYNC = [sys.executable, "-m", "ds4sync.cli"]
DEFAULT_BRANCH = "codex/triton-sparse-mla-component-prototype-20260608"


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _clone(mirror: str, path: Path, branch: str, *, revs: tuple[str, ...] = ()) -> tuple[GitRepo, list[str]]:
    """A clone with the fork branch checked out and the mirror as remote ``upstream`` too; returns it and the
    paths of the blobs the mirror lacks (:func:`_stand_in_for_missing_blobs`) in the trees of ``revs``."""
    _git("clone", "-q", "--no-checkout", mirror, str(path))
    _git("remote", "add", "upstream", mirror, cwd=path)
    _git("fetch", "-q", "upstream", "+refs/heads/main:refs/remotes/upstream/main", cwd=path)
    missing = _stand_in_for_missing_blobs(path, (f"origin/{branch}", *revs))
    _git("checkout", "-q", "-B", branch, f"origin/{branch}", cwd=path)
    return GitRepo(path), missing


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


def prepare_store(mirror: str, work: Path, sync: RealSync, to: str, profile: Path, log: list[str]) -> int:
    """Record the person's resolutions of ``sync`` into ``profile``'s store; returns the number of entries made."""
    repo, _ = _clone(mirror, work / "prep", sync.before, revs=(to, sync.after_head))
    config = _config(work / "prep.yaml", branch=sync.before, to=to, profile=profile, build=False, budget_s=None)
    store = profile / "patches" / "resolutions"
    before = len(list(store.iterdir())) if store.is_dir() else 0
    common = ["--repo", str(repo.path), "--config", str(config)]
    code = _ds4sync("merge", to, "--branch", sync.before, *common, log=log)
    if code != 4:  # nothing for a person: no conflict to learn
        return 0
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
    return (len(list(store.iterdir())) if store.is_dir() else 0) - before


def _tier_lines(record: RunRecord) -> list[str]:
    out = []
    for tier, result in record.results.gates.items():
        out.append(f"- tier {tier}: {result.line()}")
        for gate in result.gates:
            env = gate.details.environment or "?"
            out.append(f"  - {gate.name} [{env}]: {gate.status}, {gate.counts.summary()}; {gate.reason[:300]}")
    return out or ["- no gate tier ran"]


def summary(record: RunRecord, *, prep_entries: int, sync: RealSync, to: str, wall_s: float) -> str:
    """What the nightly ran, as Markdown: phases, build, tiers with counts, the report's Remaining gate."""
    build = record.results.build
    merge = record.results.merge
    lines = [
        f"- fork branch `{record.fork.branch}` ({record.fork.head_before[:12]}), upstream `main` at {to[:12]}",
        f"- person's result: `{sync.after}` at {sync.after_head[:12]} "
        f"({sync.carried}/{sync.total} commits carried, {sync.upstream_commits} upstream commits)",
        f"- resolution store: {prep_entries} entries recorded from that result",
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
    lines += ["", "Gates:", *_tier_lines(record), "", "Remaining gate (the report's):"]
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
    parser.add_argument("--branch", default=DEFAULT_BRANCH, help="the fork branch to sync")
    parser.add_argument("--to", default=None, help="upstream commit to sync to (default: the person's new base)")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a new temporary one)")
    parser.add_argument("--serving-python", default=os.environ.get("DS4SYNC_SERVING_PYTHON", ""))
    parser.add_argument("--budget-s", type=float, default=None, help="the nightly's time budget (gates past it stop)")
    parser.add_argument("--out", type=Path, default=None, help="also write the result as Markdown here")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="mirror-nightly-"))
    work.mkdir(parents=True, exist_ok=True)
    log: list[str] = []
    start = time.monotonic()
    fork, missing = _clone(args.mirror, work / "fork", args.branch)
    pairs = [s for s in find_real_syncs(fork, upstream="upstream/main") if s.before == args.branch]
    if not pairs:
        print(f"no later branch of the mirror carries {args.branch}'s commits: no person's result", file=sys.stderr)
        return 2
    sync = pairs[0]
    to = fork.resolve_commit(args.to) if args.to else sync.new_base
    assert to is not None, f"--to {args.to} is not a commit of the mirror"
    missing = sorted({*missing, *_stand_in_for_missing_blobs(fork.path, (to, sync.after_head))})
    profile = work / "profile"
    shutil.copytree(shipped_profile(), profile, ignore=shutil.ignore_patterns("__pycache__"))
    entries = prepare_store(args.mirror, work, sync, to, profile, log)
    config = _config(
        work / "nightly.yaml", branch=args.branch, to=to, profile=profile, build=True, budget_s=args.budget_s
    )
    env = {**os.environ, "DS4SYNC_SERVING_PYTHON": args.serving_python}
    night = time.monotonic()
    _ds4sync("nightly", "--repo", str(fork.path), "--config", str(config), "--no-notify", env=env, log=log)
    store = RecordStore(fork.path / ".git" / "ds4sync")
    record = store.load(store.run_ids()[-1])
    text = summary(record, prep_entries=entries, sync=sync, to=to, wall_s=time.monotonic() - night)
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
