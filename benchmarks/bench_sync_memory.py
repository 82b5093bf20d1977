"""Sync memory on a real fork history: two consecutive ds4sync syncs, conflicts replayed vs left for a person.

Given any fork repository (a local clone; nothing is downloaded), a fork branch and two upstream refs:

1. sync 1 (clone A): ``ds4sync merge FIRST``; it stops for a person; the conflicts are resolved by a
   generic scripted strategy (below), ``ds4sync resume`` commits the merge and records the person's
   resolutions into the profile's shared store; the fork branch is moved to the merge commit (what
   ``promote`` does after the gates).
2. sync 1 again on another machine (fresh clone D, empty rr-cache, the shared store only): how many of
   the same conflicts the store replays.
3. sync 2 (fresh clone B, empty rr-cache, the shared store only): ``ds4sync merge SECOND`` from the moved
   branch: conflicts git reports, how many the store replayed, how many rules took, how many are left
   for a person. Beside it, plain git on a fresh clone C: ``git worktree add`` + ``git merge --no-ff
   --no-commit`` (no rerere), its wall time and its unmerged-path count.

The scripted person, per unmerged path: the fork's side for fork-owned files (the fork added the file
since the merge base, or changed at least as many of its lines as upstream did), upstream's side
otherwise; a side that deleted the file deletes it. No file of the fork is read into this repository,
and only numbers are printed and written (``--out``): no path, no resolution.

Usage:
  python benchmarks/bench_sync_memory.py --fork-repo CLONE --fork-branch ds4-sm120-full \
      --first origin/main~400 --second origin/main [--sparse-exclude PATH ...] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DS4SYNC = [sys.executable, "-m", "ds4sync.cli"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(LC_ALL="C", PYTHONPATH=str(REPO_ROOT), GIT_CONFIG_NOSYSTEM="1")
    return env


def sh(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    """Run a command (clean git env); exit with its stderr unless its status is in ``ok``."""
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=_env())
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(argv[:6])} failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    return proc


def git(cwd: Path, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    """``git ARGS`` output, stripped."""
    return sh(["git", *args], cwd, ok).stdout.strip()


def timed_ds4sync(cwd: Path, *args: str, ok: tuple[int, ...] = (0, 4)) -> tuple[float, int, dict]:
    """(seconds, exit code, the --json envelope's data) of one ds4sync command."""
    start = time.perf_counter()
    proc = sh([*DS4SYNC, *args, "--json"], cwd, ok)
    elapsed = time.perf_counter() - start
    envelope = json.loads(proc.stdout)
    return elapsed, proc.returncode, envelope.get("data", envelope)


def clone(source: Path, dest: Path, branch: str, start: str, exclude: list[str]) -> Path:
    """A shared clone with ``branch`` at ``start`` and no files checked out (ds4sync makes its own worktree);
    worktrees made from it leave ``exclude`` out (sparse checkout, inherited by ``git worktree add``)."""
    git(source.parent, "clone", "-q", "--no-checkout", "--shared", str(source), str(dest))
    git(dest, "config", "user.name", "sync-bench")
    git(dest, "config", "user.email", "sync-bench@localhost")
    if exclude:
        git(dest, "config", "extensions.worktreeConfig", "true")
        git(dest, "config", "--worktree", "core.sparseCheckout", "true")
        git(dest, "config", "--worktree", "core.sparseCheckoutCone", "false")
        info = dest / ".git" / "info"
        info.mkdir(exist_ok=True)
        (info / "sparse-checkout").write_text("/*\n" + "".join(f"!/{p}\n" for p in exclude))
    git(dest, "update-ref", f"refs/heads/{branch}", start)
    git(dest, "symbolic-ref", "HEAD", f"refs/heads/{branch}")
    git(dest, "read-tree", branch)  # index = the branch, so the (empty) checkout is not seen as dirty
    return dest


def placeholder_missing_blobs(repo: Path, revs: list[str], paths: list[str]) -> int:
    """Loose placeholder objects for blobs of ``paths`` that the store lacks (a snapshot without its large files).

    git checks that every blob of a tree exists before it writes a commit, so without them no merge over such
    a tree can be committed. The placeholders are never checked out (the paths are sparse-excluded) and hold
    no content of the fork. Returns how many were written.
    """
    import zlib

    written = 0
    for rev in revs:
        for path in paths:
            line = git(repo, "ls-tree", rev, "--", path)
            if not line:
                continue
            oid = line.split()[2]
            if sh(["git", "cat-file", "-e", oid], repo, ok=(0, 1, 128)).returncode == 0:
                continue
            target = repo / ".git" / "objects" / oid[:2] / oid[2:]
            target.parent.mkdir(parents=True, exist_ok=True)
            body = b"placeholder: this blob is missing from the snapshot\n"
            target.write_bytes(zlib.compress(b"blob %d\0" % len(body) + body))
            written += 1
    return written


def write_config(path: Path, profile: Path, branch: str) -> Path:
    """A ds4sync.yaml outside the clone: upstream = the clone's origin, no gates, no build."""
    path.write_text(
        json.dumps(
            {
                "upstream": {"remote": "origin", "name": "upstream"},
                "fork": {"branch": branch, "name": "fork"},
                "profile": str(profile),
            }
        )
    )
    return path


def side_for(repo: Path, path: str, base: str, fork: str, upstream: str) -> str:
    """``ours`` for a fork-owned file, else ``theirs`` (see the module docstring)."""
    if not git(repo, "ls-tree", "--name-only", base, "--", path):
        return "ours" if git(repo, "ls-tree", "--name-only", fork, "--", path) else "theirs"

    def changed(rev: str) -> int:
        out = git(repo, "diff", "--numstat", "--no-renames", base, rev, "--", path)
        return sum(int(a) + int(b) for a, b, _ in (ln.split("\t", 2) for ln in out.splitlines()) if a.isdigit())

    return "ours" if changed(fork) >= changed(upstream) else "theirs"


def resolve_as_a_person(worktree: Path, base: str, fork: str, upstream: str) -> int:
    """Resolve every unmerged path of ``worktree`` by the scripted strategy; returns how many."""
    paths = sorted(set(git(worktree, "diff", "--name-only", "--diff-filter=U").splitlines()))
    for path in paths:
        side = side_for(worktree, path, base, fork, upstream)
        stages = {ln.split()[2] for ln in git(worktree, "ls-files", "-u", "--", path).splitlines()}
        stage = "2" if side == "ours" else "3"
        if stage in stages:
            git(worktree, "checkout", f"--{side}", "--", path)
            git(worktree, "add", "--", path)
        else:  # that side deleted it
            git(worktree, "rm", "-q", "--cached", "--", path)
            (worktree / path).unlink(missing_ok=True)
    return len(paths)


def conflict_counts(data: dict) -> dict[str, int]:
    """Conflicts of a ds4sync merge result by how they were resolved (recorded / rule / person / unresolved)."""
    conflicts = data.get("conflicts") or (data.get("merge") or {}).get("conflicts") or []
    out = {"conflicts": len(conflicts)}
    for c in conflicts:
        key = c.get("resolution") or "none"
        out[key] = out.get(key, 0) + 1
    return out


def plain_git_merge(source: Path, scratch: Path, branch: str, start: str, upstream: str, exclude: list[str]) -> dict:
    """Plain git on a fresh clone: worktree add + merge --no-ff --no-commit, rerere off."""
    repo = clone(source, scratch / "plain", branch, start, exclude)
    wt = scratch / "plain-wt"
    begin = time.perf_counter()
    git(repo, "worktree", "add", "-q", "-b", "bench-plain", str(wt), branch)
    git(wt, "-c", "rerere.enabled=false", "merge", "--no-ff", "--no-commit", "-q", upstream, ok=(0, 1))
    elapsed = time.perf_counter() - begin
    unmerged = len(set(git(wt, "diff", "--name-only", "--diff-filter=U").splitlines()))
    return {"wall_s": round(elapsed, 2), "unmerged_paths": unmerged}


def main() -> int:
    """Run the two syncs and print (and optionally write) the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fork-repo", type=Path, required=True, help="a local clone holding fork and upstream refs")
    parser.add_argument("--fork-branch", required=True, help="fork branch name (local, or origin/<name>)")
    parser.add_argument("--first", required=True, help="upstream ref of sync 1 (e.g. origin/main~400)")
    parser.add_argument("--second", required=True, help="upstream ref of sync 2 (e.g. origin/main)")
    parser.add_argument("--sparse-exclude", action="append", default=[], help="paths left out of checkouts")
    parser.add_argument("--scratch", type=Path, help="scratch folder (default: a temporary one, removed)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()

    source = args.fork_repo.resolve()
    branch = args.fork_branch.removeprefix("origin/")
    ref = next(r for r in (f"origin/{branch}", branch) if git(source, "rev-parse", "--verify", "-q", r, ok=(0, 1)))
    fork_head = git(source, "rev-parse", f"{ref}^{{commit}}")
    first = git(source, "rev-parse", f"{args.first}^{{commit}}")
    second = git(source, "rev-parse", f"{args.second}^{{commit}}")
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="sync-memory-"))
    scratch.mkdir(parents=True, exist_ok=True)
    profile = scratch / "profile"
    (profile / "patches" / "resolutions").mkdir(parents=True)
    exclude = args.sparse_exclude
    figures: dict = {
        "fork_head": fork_head,
        "first": first,
        "second": second,
        "upstream_first_parent_commits": {
            "sync1": int(git(source, "rev-list", "--count", "--first-parent", f"{fork_head}..{first}")),
            "sync2": int(git(source, "rev-list", "--count", "--first-parent", f"{first}..{second}")),
        },
    }
    try:
        # -- sync 1: a person resolves, the store records ------------------------------------------
        a = clone(source, scratch / "A", branch, fork_head, exclude)
        figures["placeholder_blobs"] = placeholder_missing_blobs(a, [fork_head, first, second], exclude)
        cfg_a = write_config(scratch / "a.yaml", profile, branch)
        t_merge, code, data = timed_ds4sync(a, "merge", first, "--repo", str(a), "--config", str(cfg_a))
        s1 = {"ds4sync_merge_s": round(t_merge, 2), "exit": code, **conflict_counts(data)}
        if code == 4:
            wt = Path(data["worktree"])
            base = git(a, "merge-base", fork_head, first)
            start = time.perf_counter()
            s1["resolved_by_script"] = resolve_as_a_person(wt, base, fork_head, first)
            s1["script_s"] = round(time.perf_counter() - start, 2)
            t_resume, code, data = timed_ds4sync(a, "resume", "--repo", str(a), "--config", str(cfg_a), ok=(0,))
            s1["ds4sync_resume_s"] = round(t_resume, 2)
        merge_commit = data.get("merge_commit") or (data.get("merge") or {}).get("merge_commit")
        if not merge_commit:
            raise SystemExit(f"sync 1 did not finish: {json.dumps(data)[:600]}")
        s1["stored_resolutions"] = sum(1 for p in (profile / "patches" / "resolutions").iterdir() if p.is_dir())
        git(a, "update-ref", f"refs/heads/{branch}", merge_commit)  # what promote does after the gates
        figures["sync1"] = s1

        # -- sync 1 again on another machine: only the shared store -------------------------------
        d = clone(a, scratch / "D", branch, fork_head, exclude)
        cfg_d = write_config(scratch / "d.yaml", profile, branch)
        t_merge, code, data = timed_ds4sync(d, "merge", first, "--repo", str(d), "--config", str(cfg_d))
        figures["sync1_again_fresh_clone"] = {
            "ds4sync_merge_s": round(t_merge, 2),
            "exit": code,
            **conflict_counts(data),
        }

        # -- sync 2 from the moved branch, fresh clone: only the shared store ---------------------
        b = clone(a, scratch / "B", branch, merge_commit, exclude)
        cfg_b = write_config(scratch / "b.yaml", profile, branch)
        t_merge, code, data = timed_ds4sync(b, "merge", second, "--repo", str(b), "--config", str(cfg_b))
        figures["sync2"] = {"ds4sync_merge_s": round(t_merge, 2), "exit": code, **conflict_counts(data)}
        figures["sync2_plain_git"] = plain_git_merge(a, scratch, branch, merge_commit, second, exclude)
    finally:
        if args.scratch is None:
            shutil.rmtree(scratch, ignore_errors=True)
    s2, plain = figures["sync2"], figures["sync2_plain_git"]
    print(json.dumps(figures, indent=2))
    print(
        f"sync 2: git reports {plain['unmerged_paths']} conflicted paths; ds4sync: {s2['conflicts']} conflicts, "
        f"{s2.get('recorded', 0)} replayed from the shared store, {s2.get('rule', 0)} by rules, "
        f"{s2.get('unresolved', 0)} left for a person; wall {s2['ds4sync_merge_s']} s vs plain git "
        f"{plain['wall_s']} s (ratio {s2['ds4sync_merge_s'] / max(plain['wall_s'], 1e-9):.2f})"
    )
    again = figures["sync1_again_fresh_clone"]
    print(
        f"sync 1 repeated on a fresh clone: {again['conflicts']} conflicts, {again.get('recorded', 0)} replayed, "
        f"{again.get('unresolved', 0)} left for a person"
    )
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
