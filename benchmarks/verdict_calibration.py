"""Verdict calibration: the DS4 catalogue's verdict per patch-set on every fork branch, before and after a change.

For each fork branch of a clone this runs ds4sync's own check (``check_path``, the library call behind
``ds4sync patches check --repo CLONE --rev origin/B --branch B --json``, so ``catalogue.yaml`` branches and
``carried_when.since`` count exactly as they do in a sync) with two profiles: the baseline (``--before-profile
DIR``, or ``--before-rev REV`` whose ``patches/`` and ``gates/`` are read from this repository's git) and ours
(``--profile``, default this checkout). It prints a patch-set x branch table of verdicts, each cell ``before>after``
where they differ, the counts per verdict, and every changed cell with the invariants that decided it.

Branches: ``--branch`` (repeatable), else every remote-tracking branch of the clone whose name starts with
``codex/``, ``ds4-`` or ``backup/`` (``--prefix`` to change), optionally thinned to ``--sample N`` spread evenly
over the history by commit date.

Verdicts: H holds, V violated, N not-carried, A advisory violations only, L landed-upstream, - not applicable.

Usage:
  python benchmarks/verdict_calibration.py --repo CLONE --before-rev main [--profile DIR] [--sample 20] \\
      [--out benchmarks/results/verdict-calibration.md] [--json FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from ds4sync.core.git import GitRepo  # noqa: E402
from ds4sync.models.patchsets_results import CheckReport, PatchSetCheck  # noqa: E402
from ds4sync.patchsets.commands import check_path  # noqa: E402

PREFIXES = ("codex/", "ds4-", "backup/")
LETTER = {
    "holds": "H",
    "violated": "V",
    "not-carried": "N",
    "advisory-violations": "A",
    "landed-upstream": "L",
    "not-applicable": "-",
}


def fork_branches(repo: GitRepo, prefixes: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """``(branch, sha, commit date)`` of every ``origin/<prefix>...`` branch, oldest commit first."""
    out = subprocess.run(
        [
            "git",
            "-C",
            str(repo.path),
            "for-each-ref",
            "refs/remotes/origin",
            "--format=%(refname:lstrip=3)%09%(objectname)%09%(committerdate:iso-strict)",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = []
    for line in out.splitlines():
        name, sha, date = line.split("\t")
        if name != "HEAD" and name.startswith(prefixes):
            rows.append((name, sha, date))
    return sorted(rows, key=lambda r: (r[2], r[0]))


def spread(rows: list[tuple[str, str, str]], n: int) -> list[tuple[str, str, str]]:
    """``n`` rows spread evenly over ``rows`` (ordered by date), first and last included."""
    if n <= 0 or n >= len(rows):
        return rows
    picks = sorted({round(i * (len(rows) - 1) / (n - 1)) for i in range(n)}) if n > 1 else [len(rows) - 1]
    return [rows[i] for i in picks]


def profile_at(rev: str, into: Path) -> Path:
    """This repository's ``patches/`` and ``gates/`` at ``rev``, unpacked under ``into`` (a profile folder)."""
    data = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", rev, "patches", "gates"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def check(clone: Path, profile: Path, branch: str) -> CheckReport:
    """``ds4sync patches check --repo clone --rev origin/<branch> --branch <branch>`` with ``profile``."""
    return check_path(clone, profile=profile, rev=f"origin/{branch}", branch=branch)


def why(ps: PatchSetCheck) -> str:
    """The invariants that decided a verdict: the violated ones, else the patch-set's own detail."""
    bad = [r for r in ps.invariants if r.status == "violated"]
    if ps.status in ("violated", "advisory-violations") and bad:
        return "; ".join(f"{r.invariant}: {r.detail}" for r in bad)
    if ps.status == "holds":
        live = [r for r in ps.invariants if any(e.startswith("live: ") for e in r.evidence)]
        return "holds" + ("; " + "; ".join(f"{r.invariant}: {r.detail}" for r in live) if live else "")
    return ps.detail


def cell(before: str | None, after: str) -> str:
    b = LETTER.get(before or "", "?") if before is not None else None
    a = LETTER.get(after, "?")
    return a if b is None or b == a else f"{b}>{a}"


def render(
    branches: list[tuple[str, str, str]],
    ids: list[str],
    before: dict[str, dict[str, PatchSetCheck]] | None,
    after: dict[str, dict[str, PatchSetCheck]],
    *,
    command: str,
    seconds: float,
) -> str:
    """The markdown report: branches, the verdict matrix, counts, changed cells."""
    lines = [
        "# Verdict calibration",
        "",
        f"`{command}`",
        "",
        "H holds, V violated, N not-carried, A advisory violations only, L landed-upstream; `B>A`: baseline B, ours A.",
        "",
        "## Branches",
        "",
        "| # | branch | head | commit date |",
        "|---|---|---|---|",
    ]
    lines += [f"| b{i} | `{name}` | `{sha[:9]}` | {date[:10]} |" for i, (name, sha, date) in enumerate(branches, 1)]
    lines += ["", "## Verdicts (patch-set x branch)", ""]
    head = "| patch-set | " + " | ".join(f"b{i}" for i in range(1, len(branches) + 1)) + " |"
    lines += [head, "|---|" + "---|" * len(branches)]
    for ps_id in ids:
        cells = []
        for name, _sha, _date in branches:
            b = before[name].get(ps_id) if before is not None else None
            a = after[name].get(ps_id)
            cells.append(cell(b.status if b else ("?" if before is not None else None), a.status if a else "?"))
        lines.append(f"| {ps_id} | " + " | ".join(cells) + " |")
    lines += ["", "## Counts", ""]
    total_after = Counter(ps.status for name, *_ in branches for ps in after[name].values())
    if before is not None:
        total_before = Counter(ps.status for name, *_ in branches for ps in before[name].values())
        lines += ["| verdict | baseline | ours |", "|---|---|---|"]
        for status in LETTER:
            if total_before[status] or total_after[status]:
                lines.append(f"| {status} | {total_before[status]} | {total_after[status]} |")
        lines.append(f"| cells | {sum(total_before.values())} | {sum(total_after.values())} |")
    else:
        lines += ["| verdict | ours |", "|---|---|"]
        lines += [f"| {s} | {total_after[s]} |" for s in LETTER if total_after[s]]
    lines += ["", "Per branch (ours): holds / violated / not-carried / other", ""]
    lines += ["| branch | H | V | N | other |", "|---|---|---|---|---|"]
    for i, (name, *_rest) in enumerate(branches, 1):
        c = Counter(ps.status for ps in after[name].values())
        other = sum(c.values()) - c["holds"] - c["violated"] - c["not-carried"]
        lines.append(f"| b{i} `{name}` | {c['holds']} | {c['violated']} | {c['not-carried']} | {other} |")
    if before is not None:
        lines += ["", "## Changed cells", ""]
        changed = [
            (i, name, ps_id)
            for i, (name, *_rest) in enumerate(branches, 1)
            for ps_id in ids
            if before[name].get(ps_id) is not None
            and after[name].get(ps_id) is not None
            and before[name][ps_id].status != after[name][ps_id].status
        ]
        if not changed:
            lines.append("none")
        for i, name, ps_id in changed:
            b, a = before[name][ps_id], after[name][ps_id]
            lines.append(f"- b{i} `{name}` {ps_id}: {b.status} -> {a.status}")
            lines.append(f"  - baseline: {why(b)}")
            lines.append(f"  - ours: {why(a)}")
    lines += ["", f"{len(branches)} branches checked in {seconds:.1f} s.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True, help="a clone of the fork (its branches as origin/*)")
    parser.add_argument("--profile", type=Path, default=REPO_ROOT, help="our profile folder (default: this checkout)")
    base = parser.add_mutually_exclusive_group()
    base.add_argument("--before-profile", type=Path, help="the baseline profile folder (holding patches/)")
    base.add_argument("--before-rev", help="the baseline: this repository's patches/ at that commit (e.g. main)")
    parser.add_argument("--branch", action="append", default=[], help="a fork branch to check (repeatable)")
    parser.add_argument("--prefix", action="append", default=[], help=f"branch name prefixes (default {PREFIXES})")
    parser.add_argument("--sample", type=int, default=0, help="at most N branches, spread over the history by date")
    parser.add_argument("--out", type=Path, help="write the markdown report here")
    parser.add_argument("--json", type=Path, help="write every verdict (and its reason) as JSON here")
    args = parser.parse_args()

    repo = GitRepo(args.repo)
    every = fork_branches(repo, tuple(args.prefix) or PREFIXES)
    if args.branch:
        by_name = {r[0]: r for r in every}
        missing = [b for b in args.branch if b not in by_name]
        if missing:
            every = every + fork_branches(repo, tuple(missing))
            by_name = {r[0]: r for r in every}
        branches = [by_name[b] for b in args.branch if b in by_name]
    else:
        branches = spread(every, args.sample)
    if not branches:
        sys.exit("no branch to check")

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        before_profile = args.before_profile or (profile_at(args.before_rev, Path(tmp)) if args.before_rev else None)
        before: dict[str, dict[str, PatchSetCheck]] | None = {} if before_profile else None
        after: dict[str, dict[str, PatchSetCheck]] = {}
        ids: list[str] = []
        for name, _sha, _date in branches:
            report = check(args.repo, args.profile, name)
            after[name] = {ps.id: ps for ps in report.patchsets}
            ids += [ps.id for ps in report.patchsets if ps.id not in ids]
            if before is not None and before_profile is not None:
                old = check(args.repo, before_profile, name)
                before[name] = {ps.id: ps for ps in old.patchsets}
                ids += [ps.id for ps in old.patchsets if ps.id not in ids]
            print(f"{name}: " + " ".join(f"{LETTER[ps.status]}" for ps in report.patchsets), file=sys.stderr)
    seconds = time.perf_counter() - start

    baseline = (
        f"--before-rev {args.before_rev}"
        if args.before_rev
        else (f"--before-profile {args.before_profile}" if args.before_profile else "")
    )
    which = " ".join(f"--branch {b}" for b in args.branch) or (f"--sample {args.sample}" if args.sample else "")
    command = " ".join(p for p in ("python benchmarks/verdict_calibration.py --repo CLONE", baseline, which) if p)
    text = render(branches, ids, before, after, command=command, seconds=seconds)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    if args.json:
        rows = [
            {
                "branch": name,
                "head": sha,
                "date": date,
                "patchset": ps_id,
                "before": before[name][ps_id].status if before is not None and ps_id in before[name] else None,
                "after": after[name][ps_id].status if ps_id in after[name] else None,
                "why_before": why(before[name][ps_id]) if before is not None and ps_id in before[name] else None,
                "why_after": why(after[name][ps_id]) if ps_id in after[name] else None,
            }
            for name, sha, date in branches
            for ps_id in ids
        ]
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
