"""The gate result cache: a gate that passed is not run again while its inputs are unchanged.

Key = SHA-256 over the gate's definition (kind spec and rules included), the git tree
hash of its dependency paths at HEAD (``GitRepo.tree_of``; the whole tree when it has
none), and the target environment's fingerprint (python, torch and CUDA versions).
A dependency path with uncommitted changes disables the cache for that gate. Entries
live under ``<state-dir>/gate-cache/<key>.json``.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from ds4sync.core import proc
from ds4sync.core.files import write_json_atomic
from ds4sync.core.git import GitRepo
from ds4sync.gates.definition import Gate
from ds4sync.models.gates_results import GateResult

# Reads versions without importing torch (an import costs seconds): package metadata and torch/version.py.
_FINGERPRINT_SCRIPT = r"""
import importlib.metadata as md, importlib.util, json, platform, re, sys
info = {"python": platform.python_version(), "executable": sys.executable}
try:
    info["torch"] = md.version("torch")
    spec = importlib.util.find_spec("torch")
    loc = spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None
    text = open(loc + "/version.py").read() if loc else ""
    m = re.search(r"^cuda\s*(?::\s*\S+)?\s*=\s*['\"]?([^'\"\n]+)", text, re.M)
    info["cuda"] = m.group(1).strip() if m else "none"
except Exception:
    info["torch"] = "absent"
print(json.dumps(info))
"""


@lru_cache(maxsize=16)
def environment_fingerprint(python: str) -> tuple[tuple[str, str], ...]:
    """(name, version) pairs of the target environment: python, executable, torch, CUDA of torch.

    Raises:
        ToolMissingError: ``python`` does not exist.
    """
    res = proc.run([python, "-c", _FINGERPRINT_SCRIPT], cwd=Path.cwd(), timeout_s=60)
    try:
        data = json.loads(res.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        data = {"python": "unknown", "error": res.output.strip()[-200:]}
    return tuple(sorted((str(k), str(v)) for k, v in data.items()))


def dependency_paths(gate: Gate) -> list[str]:
    """The include entries of the gate's dependencies (excludes only widen the key, so they are left in)."""
    return [e.rstrip("/") for e in gate.definition.source_file_dependencies if not e.startswith("!")]


def cache_key(gate: Gate, repo: GitRepo, fingerprint: tuple[tuple[str, str], ...]) -> str | None:
    """The cache key of ``gate`` in ``repo`` now, or None when a dependency path has uncommitted changes."""
    paths = dependency_paths(gate)
    if repo.has_uncommitted(paths):
        return None
    payload = {"gate": gate.fingerprint_data(), "tree": repo.tree_of("HEAD", paths), "env": list(fingerprint)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class GateCache:
    """Passed gate results by key, one JSON file each (written atomically)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, key: str) -> GateResult | None:
        """The stored result for ``key`` (None when absent or unreadable)."""
        path = self.root / f"{key}.json"
        try:
            return GateResult.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, key: str, result: GateResult) -> None:
        """Store a passed result under ``key``; other statuses are never cached."""
        if result.status == "passed":
            write_json_atomic(self.root / f"{key}.json", result.model_dump(mode="json"))
