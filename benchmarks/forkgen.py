"""Generate realistic fork history on top of any repository, for benchmarks and trials.

Given a checkout on a fork branch at ``base`` and an upstream commit ahead of it, this
commits fork edits that an upstream sync then has to deal with, the way a long-lived
downstream fork does: edits inside hunks upstream also changed (content conflicts),
additions at the end of files upstream changed elsewhere (semantic overlaps), edits to
files upstream deleted (modify/delete), deletions of files upstream changed
(delete/modify), a file both sides added (add/add), and new fork-only modules. All
content is generated here; nothing is copied from anywhere.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

import git

HOT = re.compile(
    r"^(vllm/(model_executor/models/deepseek|v1/attention|v1/core|config|envs|compilation|"
    r"model_executor/layers/(fused_moe|quantization))|csrc/|requirements/)"
)
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", re.MULTILINE)


@dataclass(frozen=True)
class ForkPlan:
    """How many of each kind of fork edit to make."""

    in_hunk: int = 30
    appended: int = 20
    modify_deleted: int = 3
    delete_modified: int = 2
    add_add: int = 1
    new_modules: int = 15
    commits: int = 30


def _text_files(repo: git.Repo, base: str, paths: list[str]) -> list[str]:
    keep = []
    for path in paths:
        if not path.endswith((".py", ".cu", ".cuh", ".cpp", ".h", ".txt", ".cmake", ".yaml")):
            continue
        try:
            repo.git.cat_file("-e", f"{base}:{path}")
        except git.GitCommandError:
            continue
        keep.append(path)
    return keep


def generate_fork(checkout: Path, *, base: str, upstream: str, plan: ForkPlan = ForkPlan(), seed: int = 7) -> int:
    """Commit fork edits on the checked-out branch (which must be at ``base``); returns commits made."""
    repo = git.Repo(checkout)
    rng = random.Random(seed)
    status = repo.git.diff("--name-status", "--no-renames", base, upstream).splitlines()
    modified = sorted(p for s, p in (line.split("\t", 1) for line in status) if s == "M")
    deleted = sorted(p for s, p in (line.split("\t", 1) for line in status) if s == "D")
    added = sorted(p for s, p in (line.split("\t", 1) for line in status) if s == "A")
    hot = _text_files(repo, base, [p for p in modified if HOT.match(p)])
    cold = _text_files(repo, base, [p for p in modified if not HOT.match(p)])
    rng.shuffle(hot)
    rng.shuffle(cold)
    pool = hot + cold
    edits: list[tuple[str, str]] = []
    for path in pool[: plan.in_hunk]:
        edits.append((path, "in-hunk"))
    for path in pool[plan.in_hunk : plan.in_hunk + plan.appended]:
        edits.append((path, "append"))
    for path in pool[plan.in_hunk + plan.appended : plan.in_hunk + plan.appended + plan.delete_modified]:
        edits.append((path, "delete"))
    for path in _text_files(repo, base, deleted)[: plan.modify_deleted]:
        edits.append((path, "append"))
    for path in [p for p in added if p.endswith(".py")][: plan.add_add]:
        edits.append((path, "add"))
    for i in range(plan.new_modules):
        edits.append((f"vllm/sm120/fork_feature_{i:02d}.py", "add"))
    rng.shuffle(edits)
    per_commit = max(1, len(edits) // plan.commits)
    made = 0
    for start in range(0, len(edits), per_commit):
        batch = edits[start : start + per_commit]
        for path, how in batch:
            _apply(repo, checkout, path, how, base=base, upstream=upstream, rng=rng)
        repo.git.add("-A")
        repo.git.commit("-q", "-m", f"[SM120] fork carry {made:02d}: {', '.join(p for p, _ in batch)[:60]}")
        made += 1
    return made


def _apply(
    repo: git.Repo, checkout: Path, path: str, how: str, *, base: str, upstream: str, rng: random.Random
) -> None:
    target = checkout / path
    tag = f"fork carry {rng.randrange(10**6):06d}"
    comment = "//" if path.endswith((".cu", ".cuh", ".cpp", ".h")) else "#"
    if how == "delete":
        repo.git.rm("-q", path)
        return
    if how == "add":
        target.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(f"def sm120_op_{i}(x):\n    return x * {i + 1}  # {tag}\n\n" for i in range(rng.randint(3, 12)))
        target.write_text(f'"""SM120 fork module ({tag})."""\n\n{body}')
        return
    lines = target.read_text(errors="replace").splitlines(keepends=True)
    if how == "append":
        lines.append(f"\n{comment} {tag}: SM120 fork hook\n")
    else:
        diff = repo.git.diff("-U0", base, upstream, "--", path)
        hunks = [int(m.group(1)) for m in HUNK.finditer(diff)]
        at = max(0, min(len(lines) - 1, (rng.choice(hunks) if hunks else len(lines) // 2) - 1))
        lines[at : at + 1] = [f"{comment} {tag}: SM120 variant of the next line\n", *lines[at : at + 1]]
        if at < len(lines) - 1 and path.endswith(".py"):
            lines[at + 1] = lines[at + 1].rstrip("\n") + f"  {comment} {tag}\n"
    target.write_text("".join(lines))
