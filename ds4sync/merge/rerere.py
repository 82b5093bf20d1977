"""The shared resolution store: rerere preimages and postimages kept in the profile, with provenance.

git keeps recorded resolutions in ``rr-cache/<conflict-hash>/`` (git-rerere(1)), with
numbered ``preimage.N``/``postimage.N`` when one hash has several variants. ds4sync never
uses the user's own ``rr-cache``: each run has its own cache (see
:meth:`ds4sync.core.git.GitRepo.rerere`), filled only from this store, so anything rerere
replays in a sync came from a named store entry.

Layout: ``<store>/<hash>/`` (first variant) or ``<store>/<hash>.<k>/``, each with
``preimage``, ``postimage`` and ``meta.yaml`` (path, run, conflict id, time).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ds4sync.core import fault
from ds4sync.core.errors import ConfigError
from ds4sync.core.files import write_atomic
from ds4sync.core.git import GitRepo, has_conflict_hunk
from ds4sync.core.model import read_yaml
from ds4sync.core.record import now_iso

_IMAGES = ("preimage", "postimage")
#: Prefix of the folder an entry is written in before it is renamed into place (never an entry itself).
_STAGING = ".staging-"


def _image(name: str, variant: int) -> str:
    """rerere's file name of one image of a variant (``preimage``, ``preimage.1``...)."""
    return name if variant == 0 else f"{name}.{variant}"


def split_id(conflict_id: str) -> tuple[str, int]:
    """``<hash>`` or ``<hash>.<variant>`` (MERGE_RR's form) -> (hash, variant)."""
    digest, _, variant = conflict_id.partition(".")
    return digest, int(variant) if variant.isdigit() else 0


@dataclass
class ImportResult:
    """What :meth:`ResolutionStore.import_into` did.

    ``entries``: conflict hash -> the store entries now in the run's cache for it;
    ``rejected``: (store path, why) of entries that were not imported.
    """

    entries: dict[str, list[str]] = field(default_factory=dict)
    rejected: list[tuple[str, str]] = field(default_factory=list)

    @property
    def count(self) -> int:
        """How many store entries were imported."""
        return sum(len(v) for v in self.entries.values())


@dataclass(frozen=True)
class ResolutionStore:
    """Recorded resolutions in ``root`` (one folder per rerere conflict variant)."""

    root: Path

    def entry_names(self) -> list[str]:
        """Names of the complete entries (both images present), sorted."""
        if not self.root.is_dir():
            return []
        return sorted(
            p.name
            for p in self.root.iterdir()
            if not p.name.startswith(_STAGING) and all((p / n).is_file() for n in _IMAGES)
        )

    def hashes(self) -> set[str]:
        """Conflict hashes with at least one complete entry."""
        return {name.split(".")[0] for name in self.entry_names()}

    def meta(self, name: str) -> dict:
        """The ``meta.yaml`` of entry ``name`` (empty when absent or unreadable)."""
        try:
            data = read_yaml(self.root / name / "meta.yaml")
        except ConfigError:
            return {}
        return data if isinstance(data, dict) else {}

    def import_into(self, cache: Path, hashes: set[str], *, marker_size: dict[str, int] | None = None) -> ImportResult:
        """Copy the entries for ``hashes`` into a run's rerere ``cache``, each as a free variant.

        A postimage that still holds conflict markers (of the size git uses for the entry's
        path, ``marker_size``; 7 otherwise) is not imported: it is listed in ``rejected``
        with its store path.
        """
        result = ImportResult()
        sizes = marker_size or {}
        for name in self.entry_names():
            digest = name.split(".")[0]
            if digest not in hashes:
                continue
            source = self.root / name
            size = sizes.get(str(self.meta(name).get("path", "")), 7)
            if has_conflict_hunk((source / "postimage").read_bytes(), size):
                result.rejected.append((str(source / "postimage"), "the recorded postimage holds conflict markers"))
                continue
            target = cache / digest
            target.mkdir(parents=True, exist_ok=True)
            variant = 0
            while (target / _image("preimage", variant)).exists() or (target / _image("postimage", variant)).exists():
                variant += 1
            for image in _IMAGES:
                shutil.copyfile(source / image, target / _image(image, variant))
            result.entries.setdefault(digest, []).append(name)
        return result

    def export_from(self, cache: Path, conflict_id: str, *, path: str, run_id: str) -> tuple[str, bool] | None:
        """Store the resolution rerere recorded in ``cache`` for ``conflict_id``.

        Returns (entry name, whether it is a new entry); an identical entry already in the
        store is reused, not duplicated. None when the cache has no complete
        preimage/postimage for that id (rerere recorded nothing).
        """
        digest, variant = split_id(conflict_id)
        source = cache / digest
        images = {image: source / _image(image, variant) for image in _IMAGES}
        if not all(p.is_file() for p in images.values()):
            return None
        data = {image: p.read_bytes() for image, p in images.items()}
        for name in self.entry_names():
            if name.split(".")[0] == digest and all(
                (self.root / name / image).read_bytes() == data[image] for image in _IMAGES
            ):
                return name, False
        name, k = digest, 0
        while (self.root / name).exists():
            k += 1
            name = f"{digest}.{k}"
        # The entry is written whole in a staging folder (each file by the one atomic write), then appears by
        # one rename: a kill leaves no half entry for the profile to commit or a later merge to replay.
        self.drop_staging()
        staging = self.root / f"{_STAGING}{name}"
        meta = {"path": path, "recorded_at": now_iso(), "run": run_id, "conflict_id": conflict_id}
        for image in _IMAGES:
            write_atomic(staging / image, data[image])
        write_atomic(staging / "meta.yaml", yaml.safe_dump(meta, sort_keys=True))
        fault.point("store.export.before-rename")
        os.rename(staging, self.root / name)
        return name, True

    def drop_staging(self) -> list[str]:
        """Remove staging folders an export killed before its rename left behind; returns their names."""
        if not self.root.is_dir():
            return []
        left = [p for p in self.root.iterdir() if p.name.startswith(_STAGING) and p.is_dir()]
        for folder in left:
            shutil.rmtree(folder, ignore_errors=True)
        return [p.name for p in left]

    def replace(
        self, name: str, *, cache: Path, conflict_id: str | None, postimage: bytes, path: str, run_id: str
    ) -> Path:
        """Make entry ``name`` hold a person's new resolution of its conflict (they changed the replayed one):
        the preimage rerere recorded for ``conflict_id`` in this run's ``cache`` (else the entry's own) and
        ``postimage``, replaced in place, so that no older variant can be replayed instead; returns its folder."""
        target = self.root / name
        digest, variant = split_id(conflict_id or "")
        own = cache / digest / _image("preimage", variant)
        preimage = own.read_bytes() if digest and own.is_file() else (target / "preimage").read_bytes()
        write_atomic(target / "preimage", preimage)
        write_atomic(target / "postimage", postimage)
        meta = self.meta(name) | {"path": path, "changed_at": now_iso(), "changed_by_run": run_id}
        write_atomic(target / "meta.yaml", yaml.safe_dump(meta, sort_keys=True))
        return target

    def forget(self, name: str) -> None:
        """Remove entry ``name`` (its replayed resolution was deleted by a person: a person decides next time)."""
        shutil.rmtree(self.root / name, ignore_errors=True)


_REPLAYED = re.compile(r"^Resolved '(.+)' using previous resolution\.$", re.MULTILINE)


@dataclass(frozen=True)
class MergeReplay:
    """A ``git merge --no-commit`` with recorded resolutions replayed from the shared store only.

    ``clean``: git merged without conflict; ``said``: git's messages; ``ids``: path -> rerere
    conflict id (MERGE_RR, before the replay); ``replayed``: path -> the store entries its
    resolution came from (staged); ``still_marked``: replays that left conflict markers (the
    conflict was put back for a person); ``imported``: what was imported, and rejected.
    """

    clean: bool
    said: str
    ids: dict[str, str]
    replayed: dict[str, list[str]]
    still_marked: tuple[str, ...]
    imported: ImportResult


def merge_with_store(wt: GitRepo, sha: str, store: ResolutionStore, cache: Path) -> MergeReplay:
    """Merge ``sha`` into the worktree ``wt`` (no commit) and replay the shared store's resolutions.

    rerere runs twice against ``cache`` (emptied first; never the user's rr-cache): on the
    empty cache it records each conflict's preimage and id; then, with the store's entries
    for those ids imported, it replays them. A replayed file is staged only when git finds
    no conflict marker in it; otherwise git's conflict is put back (``git checkout -m``).
    """
    shutil.rmtree(cache, ignore_errors=True)
    clean, said = wt.merge_no_commit(sha)
    wt.rerere(cache)
    ids = wt.merge_rr()
    metas = {str(store.meta(n).get("path", "")) for n in store.entry_names()} - {""}
    imported = store.import_into(
        cache, {split_id(i)[0] for i in ids.values()}, marker_size=wt.marker_sizes(sorted(metas))
    )
    replayed = set(_REPLAYED.findall(wt.rerere(cache))) if imported.count else set()
    still_marked = set(wt.paths_with_markers(sorted(replayed)))
    for path in sorted(still_marked):
        wt.restore_conflict(path)  # put git's conflict back: a person decides
    sources: dict[str, list[str]] = {}
    for path in sorted(replayed - still_marked):
        wt.add_paths([path])
        candidates = imported.entries.get(split_id(ids.get(path, ""))[0], [])
        sources[path] = _replayed_entry(store, candidates, wt, path)
    return MergeReplay(clean, said, ids, sources, tuple(sorted(still_marked)), imported)


def _replayed_entry(store: ResolutionStore, names: list[str], wt: GitRepo, path: str) -> list[str]:
    """The store entry rerere replayed for ``path``: of several variants, the one whose postimage is the file."""
    if len(names) < 2:
        return names
    data = (wt.path / path).read_bytes()
    exact = [n for n in names if (store.root / n / "postimage").read_bytes() == data]
    return exact or names
