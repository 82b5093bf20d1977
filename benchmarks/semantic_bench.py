"""The semantic check scored on a fork's real syncs, and timed beside ``git merge-tree --write-tree``.

Scoring (``score``): for each real sync of :mod:`realsyncs` (a branch before a rebase, paired with the
later branch carrying the same commits on a newer base), merge the new base into ``before_head`` with
``git merge-tree --write-tree`` (the clean merge ds4sync would have made; conflicted paths are
unknown to the check), run :func:`ds4sync.semantic.check_merge` on it, and compare each finding with
what the person kept (the ``after_head`` tree): a finding is *confirmed* when the person's result
changed that line relative to the clean merge, or changed that file with a hunk naming the finding's
symbol (an import added for an undefined name), or removed the file. Per sync it prints
findings, confirmed, unconfirmed blockers (possible false alarms) and lost-wiring warnings.

Timing (``time``): the check beside ``git merge-tree --write-tree`` of a fork branch into the
upstream branch (default: ``ds4-sm120-full`` into ``main``), wall seconds and CPU seconds (this
process and its git/ruff children), best of ``--repeat``; then the same for upstream points that
are N first-parent commits past the merge-base, to show how the check grows with the range.

    python benchmarks/semantic_bench.py score --repo CLONE [--syncs SYNCS.json] [--json OUT] [--only N]
    python benchmarks/semantic_bench.py time --repo CLONE [--fork origin/ds4-sm120-full] [--json OUT]

Proposals (``proposals``): the checks ``merge`` runs when a code model proposes resolutions, one per
conflicted file in turn (:class:`ds4sync.merge.validation.SemanticGuard`): check k sees the first k
conflicted files resolved (here to the fork's text, as an "ours" proposal) and the rest unknown. Each check
with a cache of parsed files of its own (the baseline) beside the checks sharing one cache (ours), each
mode in a child process of its own so that its peak memory is its own; prints the ratio.

    python benchmarks/semantic_bench.py proposals --repo CLONE [--fork ds4-sm120-full] [--upstream main] [--checks N]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ds4sync.core.errors import GitError
from ds4sync.core.git import GitRepo
from ds4sync.semantic import SemanticResult, check_merge

_HERE = Path(__file__).resolve().parent
_SPEC = importlib.util.spec_from_file_location("realsyncs", _HERE / "realsyncs.py")
assert _SPEC is not None and _SPEC.loader is not None
realsyncs = importlib.util.module_from_spec(_SPEC)
sys.modules["realsyncs"] = realsyncs
_SPEC.loader.exec_module(realsyncs)

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", re.MULTILINE)


def person_changes(repo: GitRepo, clean: str, person: str, path: str) -> tuple[set[int], str] | None:
    """What the person changed in ``path`` from the clean merge: (its lines there, the diff's text).

    None: the person removed the file.
    """
    if repo.blob_bytes(person, path) is None:
        return None
    out = repo.run("diff", "-U0", "--no-renames", "--end-of-options", clean, person, "--", path, strip=False)[1]
    lines: set[int] = set()
    for start, count in _HUNK.findall(out):
        first, n = int(start), int(count) if count else 1
        lines.update(range(first, first + n) if n else (first, first + 1))
    return lines, out


def _confirmed(repo: GitRepo, tree: str, person: str, result: SemanticResult) -> list[bool]:
    """Per finding: the person changed its line, or changed its file with a hunk naming its symbol.

    (An undefined name is fixed by an import line elsewhere in the file; a removed helper by a new import.)
    """
    cache: dict[str, tuple[set[int], str] | None] = {}
    verdicts = []
    for f in result.findings:
        if f.path not in cache:
            cache[f.path] = person_changes(repo, tree, person, f.path)
        changes = cache[f.path]
        if changes is None:
            verdicts.append(True)
            continue
        lines, diff = changes
        name = f.symbol.split()[-1].rsplit(".", 1)[-1]
        verdicts.append(f.line in lines or re.search(rf"\b{re.escape(name)}\b", diff) is not None)
    return verdicts


def score(repo: GitRepo, *, only: int | None, syncs_file: Path | None, resolved: bool = False) -> list[dict[str, Any]]:
    """Every real sync, scored; one dict per sync (the JSON rows).

    ``syncs_file``: the output of ``realsyncs.py --json`` (finding the pairs walks every branch: minutes).
    ``resolved``: check as ``verify`` would, the conflicted paths taken from the person's result.
    """
    if syncs_file is not None:
        syncs = [realsyncs.RealSync(**row) for row in json.loads(syncs_file.read_text())]
    else:
        syncs = realsyncs.find_real_syncs(repo)
    done: dict[tuple[str, str], tuple[str, list[str], SemanticResult, float]] = {}
    rows: list[dict[str, Any]] = []
    failed: dict[tuple[str, str], str] = {}
    for sync in syncs[:only]:
        key = (sync.before_head, sync.new_base)
        if key in failed:
            continue
        if key not in done:
            start = time.perf_counter()
            upstream = sync.new_base
            try:
                merge = repo.merge_tree(sync.before_head, upstream)
            except GitError as exc:  # an object the clone does not hold (a mirror may leave out its largest blobs)
                upstream = _without_unreadable(repo, upstream, exc.one_line())
                if upstream is None:
                    failed[key] = exc.one_line()
                    rows.append({"before": sync.before, "after": sync.after, "skipped": failed[key]})
                    print(f"{sync.before[:58]:58} skipped: {failed[key]}", flush=True)
                    continue
                merge = repo.merge_tree(sync.before_head, upstream)
            unknown = sorted({c.path for c in merge.conflicts} | {p for c in merge.conflicts for p in c.related})
            if resolved:  # verify: the conflicted paths as the person resolved them, the rest as git merged it
                tree = _with_resolutions(repo, merge.tree, sync.after_head, unknown)
                result = check_merge(repo, fork=sync.before_head, upstream=upstream, merged=tree)
            else:
                result = check_merge(repo, fork=sync.before_head, upstream=upstream, merged=merge.tree, unknown=unknown)
            done[key] = (merge.tree, unknown, result, time.perf_counter() - start)
        tree, unknown, result, seconds = done[key]
        verdicts = _confirmed(repo, tree, sync.after_head, result)
        findings = [
            {**f.model_dump(mode="json"), "confirmed": ok} for f, ok in zip(result.findings, verdicts, strict=True)
        ]
        blockers = [f for f in findings if f["severity"] == "blocker"]
        row = {
            "before": sync.before,
            "after": sync.after,
            "upstream_commits": sync.upstream_commits,
            "conflicted": len(unknown),
            "files_checked": result.files_checked,
            "seconds": round(seconds, 2),
            "findings": len(findings),
            "blockers": len(blockers),
            "confirmed": sum(1 for f in findings if f["confirmed"]),
            "blockers_confirmed": sum(1 for f in blockers if f["confirmed"]),
            "blockers_unconfirmed": [_brief(f) for f in blockers if not f["confirmed"]],
            "lost_wiring": sum(1 for f in findings if f["kind"] == "lost-wiring"),
            "lint_warnings": sum(1 for f in findings if f["kind"] == "lint" and f["severity"] == "warning"),
            "found": [_brief(f) for f in findings],
        }
        rows.append(row)
        print(
            f"{sync.before[:58]:58} +{sync.upstream_commits:<4} conflicted {len(unknown):3} checked "
            f"{result.files_checked:4}  findings {len(findings):3} (blockers {len(blockers)}, confirmed "
            f"{row['blockers_confirmed']}; unconfirmed {len(row['blockers_unconfirmed'])}) lost-wiring "
            f"{row['lost_wiring']:2}  {seconds:6.1f}s",
            flush=True,
        )
        for f in blockers:
            print(f"    {'confirmed  ' if f['confirmed'] else 'UNCONFIRMED'} {_brief(f)}", flush=True)
    return rows


def _with_resolutions(repo: GitRepo, tree: str, person: str, paths: list[str]) -> str:
    """``tree`` with each of ``paths`` as in the commit ``person`` (or removed where the person has none)."""
    with tempfile.TemporaryDirectory() as folder:
        env = {"GIT_INDEX_FILE": str(Path(folder) / "index")}
        repo.run("read-tree", tree, env=env)
        for path in paths:
            entry = repo.run("ls-tree", "-z", "--full-tree", person, "--", path, strip=False)[1].strip("\0")
            if entry:
                mode, _kind, oid = entry.split("\t", 1)[0].split()
                repo.run("update-index", "--add", "--cacheinfo", f"{mode},{oid},{path}", env=env)
            else:
                repo.run("rm", "--cached", "-q", "--ignore-unmatch", "--", path, env=env)
        return repo.run("write-tree", env=env)[1].strip()


def _without_unreadable(repo: GitRepo, commit: str, error: str) -> str | None:
    """A child of ``commit`` without the files whose blob the clone lacks (named in git's error), else None.

    Such blobs are large assets (an HTML page under docs/), never Python: the check reads none of them,
    and merge-tree needs them only to merge their content.
    """
    found = re.search(r"unable to read ([0-9a-f]{40})", error)
    if found is None:
        return None
    listing = repo.run("ls-tree", "-r", "-z", "--full-tree", commit, strip=False)[1]
    paths = [e.split("\t", 1)[1] for e in listing.split("\0") if found.group(1) in e.split("\t", 1)[0]]
    if not paths:
        return None
    with tempfile.TemporaryDirectory() as folder:
        env = {"GIT_INDEX_FILE": str(Path(folder) / "index")}
        repo.run("read-tree", commit, env=env)
        repo.run("rm", "--cached", "-q", "--", *paths, env=env)
        tree = repo.run("write-tree", env=env)[1].strip()
    return repo.commit_tree(tree, parents=[commit], message=f"bench: without {', '.join(paths)} (not in this clone)")


def _brief(f: dict[str, Any]) -> str:
    culprit = f["culprit"]
    who = f"#{culprit['pr']}" if culprit and culprit["pr"] else (culprit["commit"][:10] if culprit else f["origin"])
    return f"{f['path']}:{f['line']} {f['kind']} {f['symbol']} [{who}]"


def _clock(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and its children) of one call."""
    before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    fn()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before, strict=True))
    return wall, cpu


def timing(repo: GitRepo, *, fork_ref: str, upstream_ref: str, repeat: int, points: list[int]) -> dict[str, Any]:
    """The check beside merge-tree on ``fork_ref`` into ``upstream_ref``, then at ``points`` upstream commits."""
    fork = repo.resolve_commit(fork_ref)
    upstream = repo.resolve_commit(upstream_ref)
    assert fork and upstream, "unknown ref"
    base = repo.merge_base(fork, upstream)
    assert base
    line = repo.out("rev-list", "--first-parent", "--reverse", f"{base}..{upstream}").split()
    rows = []
    for n in [*points, len(line)]:
        if n > len(line):
            continue
        target = line[n - 1]
        mt = [_clock(lambda t=target: repo.merge_tree(fork, t)) for _ in range(repeat)]  # type: ignore[misc]
        merge = repo.merge_tree(fork, target)
        unknown = sorted({c.path for c in merge.conflicts} | {p for c in merge.conflicts for p in c.related})
        results: list[SemanticResult] = []

        def run(
            t: str = target, tree: str = merge.tree, u: list[str] = unknown, out: list[SemanticResult] = results
        ) -> None:
            out.append(check_merge(repo, fork=fork, upstream=t, merged=tree, unknown=u))

        ck = [_clock(run) for _ in range(repeat)]
        best_mt, best_ck = min(mt), min(ck)
        row = {
            "upstream_commits": n,
            "merge_tree_wall_s": round(best_mt[0], 3),
            "merge_tree_cpu_s": round(best_mt[1], 3),
            "check_wall_s": round(best_ck[0], 3),
            "check_cpu_s": round(best_ck[1], 3),
            "ratio_wall": round(best_ck[0] / best_mt[0], 2),
            "ratio_cpu": round(best_ck[1] / max(best_mt[1], 1e-3), 2),
            "files_checked": results[-1].files_checked,
            "findings": len(results[-1].findings),
        }
        rows.append(row)
        print(
            f"upstream +{n:<5} merge-tree {row['merge_tree_wall_s']:7.2f}s wall {row['merge_tree_cpu_s']:6.2f}s cpu   "
            f"check {row['check_wall_s']:7.2f}s wall {row['check_cpu_s']:6.2f}s cpu   ratio wall "
            f"{row['ratio_wall']:5.1f}x cpu {row['ratio_cpu']:5.1f}x   findings {row['findings']}",
            flush=True,
        )
    return {"fork": fork_ref, "upstream": upstream_ref, "fork_sha": fork, "merge_base": base, "rows": rows}


def proposal_checks(repo: GitRepo, *, fork_ref: str, upstream_ref: str, checks: int, shared: bool) -> dict[str, Any]:
    """``checks`` semantic checks of the proposals loop (see the module's docstring), in this process."""
    from ds4sync.semantic.resolve import FactsCache

    fork, upstream = repo.resolve_commit(fork_ref), repo.resolve_commit(upstream_ref)
    assert fork and upstream, "unknown ref"
    merge = repo.merge_tree(fork, upstream)
    conflicted = sorted({c.path for c in merge.conflicts} | {p for c in merge.conflicts for p in c.related})
    caches = [FactsCache(repo)] if shared else []
    parsed, findings = 0, []
    wall, cpu = 0.0, 0.0
    for k in range(1, min(checks, len(conflicted)) + 1):
        tree = _with_resolutions(repo, merge.tree, fork, conflicted[:k])
        cache = caches[0] if shared else FactsCache(repo)
        before = cache.parsed
        out: list[SemanticResult] = []

        def run(
            t: str = tree, u: list[str] = conflicted[k:], f: FactsCache = cache, o: list[SemanticResult] = out
        ) -> None:
            o.append(check_merge(repo, fork=fork, upstream=upstream, merged=t, unknown=u, facts=f))

        w, c = _clock(run)
        wall, cpu, parsed = wall + w, cpu + c, parsed + cache.parsed - before
        findings.append(sorted(f.line_text() for f in out[0].findings))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "checks": len(findings),
        "wall_s": wall,
        "cpu_s": cpu,
        "parsed": parsed,
        "peak_mib": peak_kib / 1024,
        "findings": findings,
    }


def proposals(repo_path: Path, *, fork_ref: str, upstream_ref: str, checks: int) -> dict[str, Any]:
    """Both modes of :func:`proposal_checks`, each in a child process; the same findings or an AssertionError."""
    import subprocess

    rows = {}
    for mode in ("fresh", "shared"):
        argv = [
            sys.executable,
            __file__,
            "proposals-run",
            "--repo",
            str(repo_path),
            "--fork",
            fork_ref,
            "--upstream",
            upstream_ref,
            "--checks",
            str(checks),
            "--mode",
            mode,
        ]
        rows[mode] = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
        r = rows[mode]
        print(
            f"{mode:>6}: {r['checks']} checks {r['wall_s']:7.2f}s wall {r['cpu_s']:7.2f}s cpu   "
            f"{r['parsed']:5d} files parsed   peak {r['peak_mib']:7.0f} MiB",
            flush=True,
        )
    fresh, shared = rows["fresh"], rows["shared"]
    assert fresh["findings"] == shared["findings"], "a shared cache changed what a check finds"
    print(
        f" ratio: shared / fresh {shared['cpu_s'] / fresh['cpu_s']:.2f}x cpu, "
        f"{shared['wall_s'] / fresh['wall_s']:.2f}x wall, {shared['peak_mib'] / fresh['peak_mib']:.2f}x peak memory; "
        "the same findings in every check"
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("score")
    s.add_argument("--repo", type=Path, required=True)
    s.add_argument("--only", type=int)
    s.add_argument("--resolved", action="store_true", help="check as verify: conflicts as the person resolved them")
    s.add_argument("--syncs", type=Path, help="realsyncs.py --json output, instead of finding the pairs again")
    s.add_argument("--json", type=Path)
    t = sub.add_parser("time")
    t.add_argument("--repo", type=Path, required=True)
    t.add_argument("--fork", default="origin/ds4-sm120-full")
    t.add_argument("--upstream", default="main")
    t.add_argument("--repeat", type=int, default=2)
    t.add_argument("--points", default="50,200,600")
    t.add_argument("--json", type=Path)
    for name in ("proposals", "proposals-run"):
        q = sub.add_parser(name)
        q.add_argument("--repo", type=Path, required=True)
        q.add_argument("--fork", default="ds4-sm120-full")
        q.add_argument("--upstream", default="main")
        q.add_argument("--checks", type=int, default=8)
        q.add_argument("--json", type=Path)
        if name == "proposals-run":
            q.add_argument("--mode", choices=("fresh", "shared"), required=True)
    args = parser.parse_args(argv)
    repo = GitRepo(args.repo)
    if args.what == "proposals-run":
        kw = {"fork_ref": args.fork, "upstream_ref": args.upstream, "checks": args.checks}
        print(json.dumps(proposal_checks(repo, **kw, shared=args.mode == "shared")))
        return 0
    if args.what == "proposals":
        data: Any = proposals(args.repo, fork_ref=args.fork, upstream_ref=args.upstream, checks=args.checks)
    elif args.what == "score":
        data = score(repo, only=args.only, syncs_file=args.syncs, resolved=args.resolved)
    else:
        points = [int(p) for p in args.points.split(",") if p]
        data = timing(repo, fork_ref=args.fork, upstream_ref=args.upstream, repeat=args.repeat, points=points)
    if args.json:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
