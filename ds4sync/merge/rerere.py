"""The shared resolution store: rerere preimages and postimages kept in the profile.

git keeps recorded resolutions in ``<git-common-dir>/rr-cache/<conflict-hash>/``
(git-rerere(1)). ds4sync copies them to and from ``<profile>/patches/resolutions/`` so
the team and the nightly job replay the same resolutions: imported before each merge,
exported after a person resolves.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from ds4sync.core.record import now_iso

_IMAGES = ("preimage", "postimage")


@dataclass(frozen=True)
class ResolutionStore:
    """Recorded resolutions in ``root`` (one folder per rerere conflict hash)."""

    root: Path

    def hashes(self) -> set[str]:
        """Conflict hashes with both images stored."""
        if not self.root.is_dir():
            return set()
        return {p.name for p in self.root.iterdir() if all((p / n).is_file() for n in _IMAGES)}

    def import_into(self, rr_cache: Path) -> int:
        """Copy stored resolutions into a repository's rr-cache; returns how many were new there."""
        added = 0
        for digest in sorted(self.hashes()):
            target = rr_cache / digest
            if (target / "postimage").is_file():
                continue
            target.mkdir(parents=True, exist_ok=True)
            for name in _IMAGES:
                shutil.copyfile(self.root / digest / name, target / name)
            added += 1
        return added

    def export_from(self, rr_cache: Path, entries: dict[str, str], *, run_id: str) -> list[str]:
        """Store the resolutions of ``entries`` (path -> hash) found complete in rr-cache.

        Returns the paths whose resolution was stored.
        """
        stored = []
        for path, digest in sorted(entries.items()):
            source = rr_cache / digest
            if not all((source / n).is_file() for n in _IMAGES):
                continue
            target = self.root / digest
            target.mkdir(parents=True, exist_ok=True)
            for name in _IMAGES:
                shutil.copyfile(source / name, target / name)
            (target / "meta.yaml").write_text(
                yaml.safe_dump({"path": path, "recorded_at": now_iso(), "run": run_id}, sort_keys=True)
            )
            stored.append(path)
        return stored


def forget(rr_cache: Path, digests: set[str]) -> None:
    """Drop the local postimages of ``digests`` so they are not replayed as recorded resolutions."""
    for digest in digests:
        (rr_cache / digest / "postimage").unlink(missing_ok=True)
