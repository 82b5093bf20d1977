"""Merging: merge-tree predictions, ``git merge`` in a worktree, and the index stages a conflict leaves."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

from ds4sync.core.errors import GitError
from ds4sync.core.git.env import FULL_SHA_RE, _literal
from ds4sync.core.git.mergetree import MergeTreeResult, parse_merge_tree
from ds4sync.core.git.objects import ObjectVerbs


class MergeVerbs(ObjectVerbs):
    """Merge and index-stage verbs of :class:`~ds4sync.core.git.GitRepo`."""

    def merge_tree(self, ours: str, theirs: str) -> MergeTreeResult:
        """Predict the merge of ``theirs`` into ``ours`` without touching any work tree.

        Uses ``git merge-tree --write-tree -z`` (git >= 2.38) and names each conflict's
        kind from git's own messages. Paths git writes beside a conflict are named as
        ``git merge`` names them in a worktree on ``ours`` (``path~HEAD``). Two full commit SHAs
        always merge alike: their result is kept on this object, so ``plan`` and its semantic check
        share one merge-tree.
        """
        key = (ours, theirs)
        if FULL_SHA_RE.match(ours) and FULL_SHA_RE.match(theirs) and key in self._merge_trees:
            return self._merge_trees[key]
        result = self._merge_tree(ours, theirs)
        if FULL_SHA_RE.match(ours) and FULL_SHA_RE.match(theirs):
            self._merge_trees[key] = result
        return result

    def _merge_tree(self, ours: str, theirs: str) -> MergeTreeResult:
        status, out, err = self.run(
            "merge-tree",
            "--write-tree",
            "-z",
            "--messages",
            "--end-of-options",
            ours,
            theirs,
            ok_codes=(0, 1, 128),
            strip=False,
        )
        if status == 128:
            raise GitError(
                f"git merge-tree failed ({err.strip() or out.strip()})",
                where=str(self.path),
                fix="git >= 2.38 is required",
            )
        return parse_merge_tree(out, ours=ours, theirs=theirs, ours_label="HEAD")

    def merge_file_clean(self, ours: bytes, base: bytes, theirs: bytes) -> bool:
        """Whether git's three-way file merge (``git merge-file``) of these contents has no conflict."""
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
                (Path(tmp) / name).write_bytes(data)
                files.append(str(Path(tmp) / name))
            status = self.run_bytes("merge-file", "-p", "--quiet", *files, ok_codes=range(0, 256))[0]
        return status == 0

    def merge_no_commit(self, sha: str) -> tuple[bool, str]:
        """``git merge --no-ff --no-commit`` of ``sha`` into HEAD; (clean, git's messages).

        rerere is off here: ds4sync runs it against its own resolution cache
        (:meth:`rerere`), never the user's ``rr-cache``.
        """
        args = [
            "-c",
            "rerere.enabled=false",
            "-c",
            "merge.conflictStyle=merge",
            "merge",
            "--no-ff",
            "--no-commit",
            "--no-edit",
            "--no-verify",
            "--end-of-options",
            sha,
        ]
        status, out, err = self.run(*args, ok_codes=(0, 1, 2, 128), env=self._identity_env())
        if status in (2, 128) or self.merge_head() is None:
            lines = (err or out).strip().splitlines() or [f"exit {status}"]
            fatal = next((line for line in lines if line.startswith(("fatal:", "error:"))), lines[-1])
            raise GitError(
                f"git merge could not start ({fatal})", where=str(self.path), fix="look at the worktree's state"
            )
        return status == 0, f"{out}\n{err}"

    def merge_head(self) -> str | None:
        """The commit being merged (MERGE_HEAD), or None when no merge is in progress."""
        path = self.git_dir / "MERGE_HEAD"
        return path.read_text().split()[0] if path.is_file() else None

    def staged_blob(self, path: str) -> str | None:
        """The blob id of ``path`` at stage 0 of the index (``git rev-parse :path``); None when not staged there."""
        status, out, _ = self.run("rev-parse", "--verify", "--quiet", f":{path}", ok_codes=(0, 1, 128))
        return (out.strip() or None) if status == 0 else None

    def unmerged_paths(self) -> list[str]:
        """Paths with conflict stages in the index (``git ls-files -u``)."""
        out = self.run("ls-files", "-u", "-z", strip=False)[1]
        return sorted({e.split("\t", 1)[1] for e in out.split("\0") if "\t" in e})

    def stage_entries(self, path: str) -> dict[int, tuple[str, str]]:
        """The index stages of ``path``: stage (1 base, 2 ours, 3 theirs) -> (mode, oid)."""
        out = self.run("ls-files", "-u", "-z", "--", path, strip=False)[1]
        entries = {}
        for entry in out.split("\0"):
            if "\t" in entry:
                meta, name = entry.split("\t", 1)
                if name == path:
                    mode, oid, stage = meta.split()
                    entries[int(stage)] = (mode, oid)
        return entries

    def stages(self, path: str) -> set[int]:
        """Which index stages (1 base, 2 ours, 3 theirs) ``path`` has."""
        return set(self.stage_entries(path))

    def take_side(self, path: str, side: str) -> None:
        """Resolve ``path`` with one side: ``ours`` or ``theirs``.

        The path is deleted only when that side deleted a path the merge-base had; a path
        only the other side added (a fork's new file moved by a directory rename) is kept.
        Submodules (gitlinks) get the commit of that side.
        """
        entries = self.stage_entries(path)
        stage = 2 if side == "ours" else 3
        if stage in entries:
            mode, oid = entries[stage]
            if mode == "160000":
                self.run("update-index", "--cacheinfo", f"{mode},{oid},{path}")
                return
            self.run("checkout", f"--{side}", "--", path)
            self.run("add", "--", path)
        elif 1 in entries:
            self.run("rm", "--quiet", "--cached", "--ignore-unmatch", "--", path)
            (self.path / path).unlink(missing_ok=True)
        else:
            self.run("add", "--", path)

    def union_merge(self, path: str) -> bool:
        """Resolve ``path`` keeping the lines of both sides; False when it has no three stages."""
        if self.stages(path) != {1, 2, 3}:
            return False
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for stage, name in ((2, "ours"), (1, "base"), (3, "theirs")):
                target = Path(tmp) / name
                target.write_bytes(self.blob(f":{stage}:{path}"))
                files.append(str(target))
            _status, merged, _ = self.run_bytes("merge-file", "-p", "--union", *files, ok_codes=range(0, 127))
        (self.path / path).write_bytes(merged)
        self.run("add", "--", path)
        return True

    def stage_resolved(self, path: str) -> None:
        """Stage a path a person resolved: add it, or record its deletion when it is gone."""
        if (self.path / path).exists() or (self.path / path).is_symlink():
            self.run("add", "--", path)
        else:
            self.run("rm", "--quiet", "--cached", "--ignore-unmatch", "--", path)

    def merge_quit(self) -> None:
        """Forget the merge in progress (MERGE_HEAD and friends), leaving index and work tree as they are."""
        self.run("merge", "--quit")

    def merge_abort(self) -> None:
        """Abort the merge in progress: index and work tree back to HEAD (``git merge --abort``).

        Raises:
            GitError: no merge is in progress.
        """
        self.run("merge", "--abort")

    def restore_conflict(self, path: str) -> None:
        """Put git's conflict back into ``path`` (markers in the file, its stages in the index:
        ``git checkout -m``), undoing a resolution.

        Raises:
            GitError: the merge has no conflict stages for ``path`` any more.
        """
        self.run("checkout", "-m", "--", path)

    def index_paths(self) -> list[str]:
        """Every path in the index, at any stage, in git's order (a conflicted path once per stage)."""
        out = self.run("ls-files", "-z", strip=False)[1]
        return [p for p in out.split("\0") if p]

    def index_entries(self, paths: Iterable[str]) -> dict[str, tuple[str, str]]:
        """The stage-0 index entries of exactly ``paths`` (each matched literally): path -> (mode, oid).

        A conflicted path (stages 1-3 only) and a path not in the index are left out.
        """
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return {}
        out = self.run("ls-files", "--stage", "-z", "--", *_literal(wanted), strip=False)[1]
        entries = {}
        for entry in out.split("\0"):
            if "\t" not in entry:
                continue
            meta, path = entry.split("\t", 1)
            mode, oid, stage = meta.split()
            if stage == "0" and path in wanted:
                entries[path] = (mode, oid)
        return entries
