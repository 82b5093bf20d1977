"""Gate results produced elsewhere (CI artefacts, another host), read back into the run record.

Each file is what ``ds4sync gate --json`` printed (the envelope, whose ``data`` is a tier result) or a
bare tier result. A result counts for a run only when it proves the run's head: the same commit, and the same
tree (nothing uncommitted, no untracked file the commit lacks). Promote compares the commit every required gate
ran on with the one it moves the fork to, so a result of another commit or tree is refused here, in one line,
instead of being merged and then refused later. The same holds for a tier run by hand in the worktree of a run
that is no longer active (a failed run, say): :func:`run_of_worktree` finds it, :func:`check_proof` decides.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ds4sync.core.errors import ConfigError, StateError
from ds4sync.core.git import GitRepo
from ds4sync.core.model import updated
from ds4sync.models.gates_results import GateResult, TierResult
from ds4sync.models.record import RecordStore, RunRecord


def read_results(paths: Iterable[Path]) -> list[tuple[Path, TierResult]]:
    """Every tier result under ``paths`` (files, or folders searched for ``*.json``), in path order.

    Raises:
        ConfigError: a file that is not JSON, or JSON that is no tier result; the line names the file.
    """
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(path.rglob("*.json")))
        elif path.is_file():
            files.append(path)
        else:
            raise ConfigError("no such file or folder", where=str(path), fix="check --merge-results")
    found = []
    for file in files:
        try:
            data: Any = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"not a JSON gate result ({exc})", where=str(file)) from exc
        if isinstance(data, dict) and "data" in data and "command" in data:
            data = data["data"]  # the --json envelope
        if not isinstance(data, dict) or "tier" not in data or "gates" not in data:
            continue  # other artefacts (a JUnit summary, a bench file) are not gate results
        data = {k: v for k, v in data.items() if k in TierResult.model_fields}
        try:
            found.append((file, TierResult.model_validate(data)))
        except ValidationError as exc:
            raise ConfigError(f"not a tier result: {exc.errors()[0]['msg']}", where=str(file)) from exc
    return found


def merge_into(existing: TierResult | None, incoming: TierResult) -> TierResult:
    """``incoming``'s gates replace same-named gates of ``existing`` (a tier run in pieces, one job per gate)."""
    if existing is None:
        return incoming
    by_name: dict[str, GateResult] = {g.name: g for g in existing.gates}
    by_name.update({g.name: g for g in incoming.gates})
    return updated(existing, gates=tuple(by_name.values()), duration_s=existing.duration_s + incoming.duration_s)


def run_of_worktree(store: RecordStore, checkout: Path) -> RunRecord | None:
    """The run (active or not, latest first) whose worktree is ``checkout``; None when it is no run's."""
    here = checkout.resolve()
    for run_id in reversed(store.run_ids()):
        record = store.load(run_id)
        if Path(record.worktree).resolve() == here:
            return record
    return None


def run_head(repo: GitRepo, record: RunRecord) -> tuple[str, str]:
    """(commit, tree id) of the run's head: its worktree's HEAD (else its sync branch) and that commit's tree.

    Raises:
        StateError: neither the worktree nor the sync branch is there any more.
    """
    worktree = Path(record.worktree)
    head = GitRepo(worktree).head() if worktree.is_dir() else repo.resolve_commit(f"refs/heads/{record.sync_branch}")
    if head is None:
        raise StateError(
            f"run {record.run_id} has neither its worktree nor its sync branch {record.sync_branch}",
            where=str(worktree),
            fix="gate results can only be added to a run whose head is still there",
        )
    return head, repo.tree_id(head)


def check_proof(where: str, result: TierResult, *, run_id: str, head: str, tree: str) -> None:
    """Refuse ``result`` unless it, and each of its gates, proves the run's head: commit ``head``, tree ``tree``.

    Raises:
        ConfigError: another commit, a tree with changes the commit lacks, or a result naming neither.
    """
    proofs = [(f"tier {result.tier}", result.head, result.tree)]
    proofs += [(f"gate {result.tier}/{g.name}", g.commit, g.tree) for g in result.gates if g.commit or g.tree]
    for what, commit, ran_tree in proofs:
        if commit != head:
            ran = commit[:12] if commit else "an unnamed commit"
            raise ConfigError(
                f"not added to run {run_id}: {what} ran on {ran}, the run's head is {head[:12]}",
                where=where,
                fix="run the gates on the run's sync branch head, or drop this result",
            )
        if ran_tree != tree:
            ran = f"tree {ran_tree[:12]}" if ran_tree else "no named tree"
            raise ConfigError(
                f"not added to run {run_id}: {what} ran on {head[:12]} with {ran}, the commit's tree is {tree[:12]}"
                " (changes or untracked files no commit has)",
                where=where,
                fix="commit them to the sync branch (or remove them) and run the gates again",
            )
