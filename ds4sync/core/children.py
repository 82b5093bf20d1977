"""Process groups ds4sync started and must end: a registry on disk, so a killed ds4sync leaves no orphans.

Every long-lived child (a server) runs in its own process group (:func:`ds4sync.core.proc.spawn`).
When ds4sync itself is killed with SIGKILL, nothing ends that group: the server, its engine core
and its workers live on (on a GPU they hold the card's memory). So each group is registered in a
folder as ``<pgid>.json`` (pgid, command, who started it and when); the next command calls
:meth:`ChildRegistry.reap_orphans`, which ends, with the one stop routine
(:func:`ds4sync.core.proc.stop_process_group`), every group whose owner is gone and whose members
are still the processes that were registered (start times are compared, so a reused pid is left alone).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ds4sync.core import proc as _proc
from ds4sync.core.files import write_json_atomic
from ds4sync.core.proc import CHILD_MARK, group_members, stop_process_groups


class ChildEntry(BaseModel):
    """One registered process group.

    ``*_start_ticks`` are the processes' start times from /proc (clock ticks since boot), so a
    pid that the system reused for another process is never taken for ours.
    """

    model_config = ConfigDict(extra="ignore")

    pgid: int
    argv: tuple[str, ...]
    label: str = ""
    started_at: float
    leader_start_ticks: int | None = None
    owner_pid: int
    owner_start_ticks: int | None = None


def start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22), or None."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19])
    return None


def _same_process(pid: int, ticks: int | None) -> bool:
    now = start_ticks(pid)
    if now is None:
        return False
    return ticks is None or now == ticks


class ChildRegistry:
    """Registered process groups, one JSON file each under ``folder`` (created on first use).

    ``tag`` (default: the folder's parent's name, the run id for ``runs/<id>/children``) is put
    into every child's environment as ``DS4SYNC_CHILD_OF=<tag>:<owner pid>`` while the registry
    is active, so that a child a kill caught between its start and its registration is found too.
    """

    def __init__(self, folder: Path, *, tag: str | None = None) -> None:
        self.folder = folder
        self.tag = tag or folder.parent.name

    @property
    def mark(self) -> str:
        """The :data:`ds4sync.core.proc.CHILD_MARK` value children of this process get."""
        return f"{self.tag}:{os.getpid()}"

    def _path(self, pgid: int) -> Path:
        return self.folder / f"{pgid}.json"

    def register(self, pgid: int, argv: Sequence[str], *, label: str = "") -> ChildEntry:
        """Record that this process started group ``pgid`` running ``argv``."""
        entry = ChildEntry(
            pgid=pgid,
            argv=tuple(argv),
            label=label,
            started_at=time.time(),
            leader_start_ticks=start_ticks(pgid),
            owner_pid=os.getpid(),
            owner_start_ticks=start_ticks(os.getpid()),
        )
        write_json_atomic(self._path(pgid), entry.model_dump(mode="json"))
        return entry

    def forget(self, pgid: int) -> None:
        """Drop the entry of group ``pgid`` (after it was stopped)."""
        self._path(pgid).unlink(missing_ok=True)

    def entries(self) -> list[ChildEntry]:
        """Every readable entry (unreadable files are dropped: they cannot name a group safely)."""
        if not self.folder.is_dir():
            return []
        out = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                out.append(ChildEntry.model_validate(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError):
                path.unlink(missing_ok=True)
        return out

    def is_ours(self, entry: ChildEntry) -> bool:
        """Whether group ``entry.pgid`` still holds the processes that were registered.

        The leader alive with its registered start time, or (leader gone) members that started
        no earlier than the leader did.
        """
        members = group_members(entry.pgid)
        if not members:
            return False
        if _same_process(entry.pgid, entry.leader_start_ticks):
            return True
        if start_ticks(entry.pgid) is not None:  # the pid now belongs to another process
            return False
        floor = entry.leader_start_ticks or 0
        return all((start_ticks(pid) or 0) >= floor for pid in members)

    def owner_alive(self, entry: ChildEntry) -> bool:
        """Whether the ds4sync process that registered the group still runs."""
        return _same_process(entry.owner_pid, entry.owner_start_ticks)

    def reap_orphans(self, *, grace_s: float = 10.0) -> list[ChildEntry]:
        """End every registered group whose owner is gone; returns the entries whose groups were ended.

        Entries of groups already gone are dropped; groups of a live owner are left alone.
        """
        ended = []
        for entry in self.entries():
            if entry.owner_pid == os.getpid() or self.owner_alive(entry):
                continue
            if self.is_ours(entry):
                ended.append(entry)
            else:
                self.forget(entry.pgid)
        known = {entry.pgid for entry in self.entries()}
        for pgid, owner in marked_groups(self.tag):
            if pgid not in known and owner != os.getpid() and start_ticks(owner) is None:
                ended.append(
                    ChildEntry(
                        pgid=pgid, argv=tuple(_cmdline(pgid)), label=CHILD_MARK, started_at=time.time(), owner_pid=owner
                    )
                )
        stop_process_groups([entry.pgid for entry in ended], grace_s=grace_s)
        for entry in ended:
            self.forget(entry.pgid)
        return ended


def marked_groups(tag: str) -> list[tuple[int, int]]:
    """(pgid, owner pid) of live processes whose environment carries ``DS4SYNC_CHILD_OF=<tag>:<owner>``."""
    needle = f"{CHILD_MARK}={tag}:".encode()
    groups: dict[int, int] = {}
    root = Path("/proc")
    if not root.is_dir():
        return []
    for entry in root.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        for item in environ.split(b"\0"):
            if item.startswith(needle):
                owner = item[len(needle) :].decode(errors="replace")
                if fields[0] not in ("Z", "X") and owner.isdigit():
                    groups.setdefault(int(fields[2]), int(owner))
                break
    return sorted(groups.items())


def _cmdline(pid: int) -> list[str]:
    with contextlib.suppress(OSError):
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a][:8]
    return []


@contextlib.contextmanager
def registered_children(folder: Path) -> Iterator[ChildRegistry]:
    """While inside, every child :func:`ds4sync.core.proc.run` or :func:`~ds4sync.core.proc.spawn` starts
    is registered in ``folder`` (and carries the registry's mark in its environment)."""
    registry = ChildRegistry(folder)
    _proc.ACTIVE_REGISTRIES.append(registry)
    try:
        yield registry
    finally:
        _proc.ACTIVE_REGISTRIES.remove(registry)
