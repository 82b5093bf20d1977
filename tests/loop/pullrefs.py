"""A generated upstream with open pull requests as ``refs/pull/N/head``, and a fork of it, for drift.

Upstream (``upstream/``) is a plain repository whose ``main`` has a base and a few commits; each pull
request is one commit on top of a ``main`` commit, written straight to ``refs/pull/N/head`` with
``git fast-import`` (that is where GitHub keeps them). The fork (``fork/``) is a clone with upstream as
remote ``upstream`` and a ``fork`` branch that changes ``vllm/attn.py`` and ``vllm/envs.py``, adds a file,
and carries one patch-set whose invariant reads an upstream file (``vllm/hooks.py``).
"""

from __future__ import annotations

import random
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import git
import yaml

from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.runner import Workspace, open_workspace

FileSpec = Mapping[str, str | None]
_WHO = "upstream dev <dev@upstream.invalid>"

ATTN = "".join(f"ATTN_{i} = {i}\n" for i in range(40))
HOOKS = "def on_load():\n    return 'loaded'\n\n\ndef other():\n    return 1\n"
ENVS = "A = 1\nB = 2\nC = 3\n"
BASE: dict[str, str] = {
    "vllm/attn.py": ATTN,
    "vllm/hooks.py": HOOKS,
    "vllm/envs.py": ENVS,
    "README.md": "upstream\n",
}
# The fork edits ATTN_5 and B, and adds a file of its own.
FORK = {
    "vllm/attn.py": ATTN.replace("ATTN_5 = 5\n", "ATTN_5 = 'fork'\n"),
    "vllm/envs.py": ENVS.replace("B = 2", "B = 'fork'"),
    "vllm/fork_feature.py": "ON = True\n",
}

# What each kind of planted pull request changes (on top of base).
CONFLICTS_TWO = {
    "vllm/attn.py": ATTN.replace("ATTN_5 = 5\n", "ATTN_5 = 'upstream'\n"),
    "vllm/envs.py": ENVS.replace("B = 2", "B = 'upstream'"),
}
OVERLAPS_CLEANLY = {"vllm/attn.py": ATTN.replace("ATTN_35 = 35\n", "ATTN_35 = 'upstream'\n")}
REMOVES_SYMBOL = {"vllm/hooks.py": HOOKS.replace("def on_load():", "def on_startup():")}
DELETES_FORK_FILE = {"vllm/envs.py": None}
UNRELATED = {"docs/notes.md": "notes\n"}
# Upstream's main changes ATTN_20 after the fork's base; a PR on main that changes it again is no conflict of
# the fork's (the fork never touched that line), though the fork changed the file.
MAIN_ATTN = ATTN.replace("ATTN_20 = 20\n", "ATTN_20 = 'main'\n")
REEDITS_UPSTREAM_LINE = {"vllm/attn.py": MAIN_ATTN.replace("ATTN_20 = 'main'\n", "ATTN_20 = 'pr'\n")}


@dataclass
class PlantedPull:
    """One pull request to generate: its files, its forge fields, and whether its ref exists upstream."""

    number: int
    files: FileSpec
    title: str = ""
    draft: bool = False
    labels: tuple[str, ...] = ()
    state: str = "open"
    fetchable: bool = True
    updated_at: str = "2026-12-01T10:00:00Z"
    on_main: bool = False  # based on upstream's main (after it moved on) instead of the fork's base


@dataclass
class PullHistory:
    """The two repositories, the PR head SHAs by number, and the profile folder."""

    root: Path
    upstream: Path
    fork: Path
    heads: dict[int, str] = field(default_factory=dict)
    planted: dict[int, PlantedPull] = field(default_factory=dict)

    def workspace(self, *, extra: dict | None = None) -> Workspace:
        config = self.fork / "ds4sync.yaml"
        data = {"upstream": {"remote": "upstream", "ref": "main", "name": "up/vllm"}, "fork": {"branch": "fork"}}
        config.write_text(yaml.safe_dump({**data, **(extra or {})}))
        return open_workspace(
            self.fork, config_path=config, profile=self.root / "profile", state_dir=self.root / "state"
        )

    def pulls_json(self, api_repo: str = "up/vllm") -> list[dict]:
        """The planted PRs as GitHub's REST list returns them (newest update first)."""
        rows = []
        for pull in sorted(self.planted.values(), key=lambda p: p.updated_at, reverse=True):
            rows.append(
                {
                    "number": pull.number,
                    "state": pull.state,
                    "title": pull.title or f"upstream PR {pull.number}",
                    "html_url": f"https://github.com/{api_repo}/pull/{pull.number}",
                    "user": {"login": f"dev{pull.number}"},
                    "updated_at": pull.updated_at,
                    "draft": pull.draft,
                    "labels": [{"name": name} for name in pull.labels],
                    "head": {
                        "sha": self.heads.get(pull.number, "f" * 40),
                        "ref": f"pr-{pull.number}",
                        "repo": {"full_name": f"dev{pull.number}/vllm", "clone_url": None},
                    },
                    "base": {"ref": "main"},
                }
            )
        return rows


def _stream(ref: str, parent: str, message: str, files: FileSpec, mark: int, when: int) -> bytes:
    msg = message.encode()
    out = [f"commit {ref}\nmark :{mark}\ncommitter {_WHO} {when} +0000\n".encode()]
    out.append(b"data %d\n%s\n" % (len(msg), msg))
    out.append(f"from {parent}\n".encode())
    for path, text in files.items():
        if text is None:
            out.append(f"D {path}\n".encode())
        else:
            body = text.encode()
            out.append(f"M 100644 inline {path}\n".encode() + b"data %d\n%s\n" % (len(body), body))
    return b"".join(out)


def write_pull_refs(upstream: Path, pulls: list[tuple[int, FileSpec, str]]) -> dict[int, str]:
    """Write one commit per PR (number, files, parent) to ``refs/pull/N/head`` in one fast-import; number -> SHA."""
    chunks = [
        _stream(f"refs/pull/{n}/head", parent, f"PR {n}", files, i + 1, 1_700_100_000 + i)
        for i, (n, files, parent) in enumerate(pulls)
    ]
    subprocess.run(
        ["git", "fast-import", "--quiet", "--force"],
        cwd=upstream,
        input=b"".join(chunks) + b"done\n",
        check=True,
        capture_output=True,
    )
    out = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname) %(objectname)", "refs/pull/"],
        cwd=upstream,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    heads = {}
    for line in out.splitlines():
        ref, sha = line.split()
        heads[int(ref.split("/")[2])] = sha
    return heads


def _profile(root: Path) -> None:
    folder = root / "profile" / "patches" / "hooks-used"
    folder.mkdir(parents=True)
    (folder / "patchset.yaml").write_text(
        yaml.safe_dump(
            {
                "id": "hooks-used",
                "title": "the fork's loader calls upstream's on_load hook",
                "kind": "fork-feature",
                "invariants": [
                    {"id": "on-load-hook", "kind": "contains", "files": "vllm/hooks.py", "pattern": r"^def on_load\("}
                ],
            }
        )
    )


def make_pull_history(tmp_path: Path, planted: list[PlantedPull], *, extra_files: int = 0) -> PullHistory:
    """Upstream with ``planted`` PRs (an unfetchable one gets no ref) and the fork; see the module docstring."""
    up = RepoBuilder(tmp_path / "upstream")
    base = up.commit({**BASE, **{f"pkg/m{i:04}.py": f"X = {i}\n" for i in range(extra_files)}}, "base")
    main = up.commit({"CHANGELOG.md": "one\n", "vllm/attn.py": MAIN_ATTN}, "upstream moves on (#1)")
    clone = git.Repo.clone_from(str(up.path), str(tmp_path / "fork"), origin="upstream")
    clone.close()
    fork = RepoBuilder(tmp_path / "fork")
    fork.branch("fork", base)
    fork.commit(FORK, "fork feature")
    fork.checkout("main")
    heads = write_pull_refs(up.path, [(p.number, p.files, main if p.on_main else base) for p in planted if p.fetchable])
    _profile(tmp_path)
    return PullHistory(tmp_path, up.path, fork.path, heads, {p.number: p for p in planted})


def random_pulls(count: int, *, touching: float = 0.1, files: int = 200, seed: int = 3) -> list[PlantedPull]:
    """``count`` PRs over ``pkg/`` files; a ``touching`` share of them edits a fork file too (some conflict)."""
    rng = random.Random(seed)
    pulls = []
    for i in range(count):
        change: dict[str, str | None] = {f"pkg/m{rng.randrange(files):04}.py": f"X = 'pr{i}'\n"}
        if rng.random() < touching:
            line = rng.choice((5, 5, 20, 35))
            change["vllm/attn.py"] = ATTN.replace(f"ATTN_{line} = {line}\n", f"ATTN_{line} = 'pr{i}'\n")
        pulls.append(PlantedPull(10_000 + i, change, updated_at=f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"))
    return pulls
