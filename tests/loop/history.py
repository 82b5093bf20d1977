"""Long upstream histories in a second: ``git fast-import`` streams written by the tests themselves."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git
import yaml

from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.runner import Workspace, open_workspace

FileSpec = Mapping[str, str | None]
_WHO = "upstream dev <dev@upstream.invalid>"


def fast_import(repo: Path, *, branch: str, parent: str | None, commits: Sequence[tuple[str, FileSpec]]) -> list[str]:
    """Append ``commits`` (message, files; None deletes) to ``branch`` on top of ``parent``; their SHAs in order."""
    chunks: list[bytes] = []
    for index, (message, files) in enumerate(commits, 1):
        msg = message.encode()
        chunks.append(f"commit refs/heads/{branch}\nmark :{index}\n".encode())
        chunks.append(f"committer {_WHO} {1_700_000_000 + index} +0000\n".encode())
        chunks.append(b"data %d\n%s\n" % (len(msg), msg))
        if index == 1 and parent:
            chunks.append(f"from {parent}\n".encode())
        for path, text in files.items():
            if text is None:
                chunks.append(f"D {path}\n".encode())
            else:
                body = text.encode()
                chunks.append(f"M 100644 inline {path}\n".encode() + b"data %d\n%s\n" % (len(body), body))
    chunks.append(b"done\n")
    subprocess.run(
        ["git", "fast-import", "--quiet", "--done"], cwd=repo, input=b"".join(chunks), check=True, capture_output=True
    )
    out = subprocess.run(
        ["git", "rev-list", "--first-parent", "--reverse", branch, *([f"^{parent}"] if parent else [])],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()


# -- a fork with patch-sets, and upstream commits that break it in each way a sync can break --
SCHED = "".join(f"LINE_{i} = {i}\n" for i in range(30))
PAD = "".join(f"# {i}\n" for i in range(8))
HOOKS = "def on_load():\n    return 'loaded'\n" + PAD + "VALUE = 'base'\n"
BASE = {
    "vllm/hooks.py": HOOKS,
    "vllm/sched.py": SCHED,
    "vllm/version.py": "VERSION = 1\n",
    "vllm/envs.py": "A = 1\nB = 2\nC = 3\n",
}
TWEAKED = SCHED.replace("LINE_15 = 15\n", "LINE_15 = 15\nSCHED_TWEAK = True\n")

# What each kind of planted upstream commit changes.
BREAK_INVARIANT = {"vllm/hooks.py": HOOKS.replace("def on_load():", "def on_startup():")}
BREAK_PATCH = {"vllm/sched.py": SCHED.replace("LINE_14 = 14\nLINE_15 = 15\nLINE_16 = 16\n", "LINES_14_TO_16 = ()\n")}
BREAK_GATE = {"vllm/version.py": "VERSION = 5\n"}
# The fork edits VALUE in hooks.py (a file the invariants read) and B in envs.py (one they do not).
CONFLICT = {"vllm/hooks.py": HOOKS.replace("VALUE = 'base'", "VALUE = 'upstream'")}
RESTORE = {"vllm/hooks.py": HOOKS}
CONFLICT_ELSEWHERE = {"vllm/envs.py": "A = 1\nB = 'upstream'\nC = 3\n"}


@dataclass
class History:
    """A fork repository with upstream's first-parent line on ``main`` and the fork on ``fork``."""

    root: Path
    base: str
    upstream: list[str]  # the N upstream commits after base, oldest first

    def workspace(self, *, rules: list[dict] | None = None) -> Workspace:
        config = self.root / "ds4sync.yaml"
        config.write_text(yaml.safe_dump({"merge": {"rules": rules or []}}))
        return open_workspace(
            self.root,
            config_path=config,
            branch="fork",
            profile=self.root.parent / "profile",
            state_dir=self.root.parent / "state",
        )


def _patchset(folder: Path, data: dict, patch: str | None = None) -> None:
    folder.mkdir(parents=True)
    if patch is not None:
        (folder / "0001.patch").write_text(patch)
        data = {**data, "patches": ["0001.patch"]}
    (folder / "patchset.yaml").write_text(yaml.safe_dump(data))


def _profile(root: Path, base_repo: RepoBuilder) -> None:
    patches = root / "patches"
    _patchset(
        patches / "hooks-used",
        {
            "id": "hooks-used",
            "title": "the fork's loader calls upstream's on_load hook",
            "kind": "fork-feature",
            "invariants": [
                {"id": "on-load-hook", "kind": "contains", "files": "vllm/hooks.py", "pattern": r"^def on_load\("}
            ],
        },
    )
    (base_repo.path / "vllm/sched.py").write_text(TWEAKED)
    diff = git.Repo(base_repo.path).git.diff("--", "vllm/sched.py") + "\n"
    git.Repo(base_repo.path).git.checkout("--", "vllm/sched.py")
    _patchset(
        patches / "sched-tweak",
        {
            "id": "sched-tweak",
            "title": "a carry patch replayed on every sync",
            "kind": "fork-feature",
            "invariants": [
                {
                    "id": "sched-tweak-flag",
                    "kind": "contains",
                    "files": "vllm/sched.py",
                    "pattern": "^SCHED_TWEAK = True$",
                }
            ],
        },
        patch=diff,
    )
    (root / "gates").mkdir()
    check = "import runpy, sys; v = runpy.run_path('vllm/version.py')['VERSION']; sys.exit(0 if v < 5 else 1)"
    (root / "gates" / "unit.yaml").write_text(
        yaml.safe_dump(
            {
                "tier": "unit",
                "gates": [{"name": "version-check", "kind": "command", "run": {"argv": ["{python}", "-c", check]}}],
            }
        )
    )


def make_history(tmp_path: Path, n: int, planted: dict[int, dict]) -> History:
    """Base, then ``n`` upstream commits on main (``planted[i]`` added to the i-th); the fork edits envs.py."""
    repo = RepoBuilder(tmp_path / "fork")
    base = repo.commit(BASE, "base")
    _profile(tmp_path / "profile", repo)
    commits = [
        (f"upstream change {i} (#{1000 + i})", {f"log/{i:04}.txt": f"{i}\n", **planted.get(i, {})}) for i in range(n)
    ]
    upstream = fast_import(repo.path, branch="main", parent=base, commits=commits) if n else []
    git.Repo(repo.path).git.reset("-q", "--hard", "main")
    repo.branch("fork", base)
    fork_files = {"vllm/envs.py": "A = 1\nB = 'fork'\nC = 3\n", "vllm/fork_feature.py": "ON = True\n"}
    repo.commit({**fork_files, "vllm/hooks.py": HOOKS.replace("'base'", "'fork'")}, "fork feature")
    repo.checkout("main")
    return History(repo.path, base, upstream)
