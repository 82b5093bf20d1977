"""Gate results produced elsewhere (CI artefacts, another host), read back into the run record.

Each file is what ``ds4sync gate --json`` printed (the envelope, whose ``data`` is a tier result) or a
bare tier result. A result counts for a run only when it ran on the run's exact commit: promote compares
the commit every required gate ran on with the one it moves the fork to, so a result of another commit
is refused here, by name, instead of being merged and then refused later.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ds4sync.core.errors import ConfigError
from ds4sync.core.model import updated
from ds4sync.gates.model import GateResult, TierResult


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


def check_commit(file: Path, result: TierResult, head: str) -> None:
    """Refuse a result that ran on another commit than ``head`` (or says nothing of its commit).

    Raises:
        ConfigError: the commits differ, or the result names none.
    """
    if result.head != head:
        ran = result.head[:12] if result.head else "an unnamed commit"
        raise ConfigError(
            f"tier {result.tier} ran on {ran}, the run's head is {head[:12]}",
            where=str(file),
            fix="run the gates on the run's sync branch head, or drop this artefact",
        )
