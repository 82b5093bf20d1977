"""The demo's unattended loop: two nights of `ds4sync nightly` against a local stand-in for GitHub.

Night 1: upstream moved; the sync runs (a docs conflict resolved by a path rule, a unit gate), the
duplicate-work check lists the fork's open PRs (#44 and #46, someone else's work), the sync branch is
pushed to the fork's remote (a bare repository) and a draft PR is opened; one notification.
The same night again: nothing moved, a quiet skip (timed). Night 2: upstream moved again; the same
PR is updated (new description, a comment of what changed since the last push), the green sync is
promoted; one notification. Then the trend page over the recorded runs.

Everything the stand-in received is written under ``<workdir>/forge/`` for a person to read.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ds4sync.core.errors import ExitCode
from ds4sync.core.git import clone_repository, init_repository
from ds4sync.demo.forge_standin import ForgeStandin
from ds4sync.demo.repobuild import RepoBuilder

FORK_REPO = "demo/vllm-ds4"
BRANCH = "ds4-sm120"
DEMO_TOKEN = "demo-token-for-the-local-stand-in"


@dataclass
class LoopDemoResult:
    """What the loop demo did: lines to print, files it wrote, the quiet skip's time, the exit code."""

    workdir: Path
    lines: list[str] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    skip_s: float | None = None
    exit_code: ExitCode = ExitCode.OK


def run_loop_demo(workdir: Path, *, progress: Callable[[str], None] | None = None) -> LoopDemoResult:
    """Build a small upstream and fork, then run the nightly loop twice against the local stand-in."""
    from ds4sync.loop.nightly import run_nightly
    from ds4sync.report.trend import write_trend
    from ds4sync.runner import open_workspace

    say = progress or (lambda _m: None)
    workdir.mkdir(parents=True, exist_ok=True)
    result = LoopDemoResult(workdir=workdir)
    upstream, fork_path = _repos(workdir)
    with ForgeStandin(FORK_REPO) as forge, _token():
        forge.state.add_pull(
            44,
            "deepseek_v4: SM12x MQA dispatch fix",
            head="mqa-dispatch",
            base=BRANCH,
            author="contributor-a",
            updated_at="2026-09-09T18:02:00Z",
        )
        forge.state.add_pull(
            46,
            "CPU mmap registration",
            head="cpu-mmap",
            base="main",
            author="contributor-b",
            updated_at="2026-09-08T07:45:00Z",
        )
        config = _config(workdir, fork_path, forge, promote=False)

        say("loop night 1: upstream moved; nightly syncs, checks open PRs, opens a draft PR, notifies")
        upstream.commit(
            {"docs/install.md": "# Install\n\nvLLM 0.11 with pip.\n", "vllm/sched.py": "QUEUE = 'fcfs'\n"},
            "upstream: 0.11 docs, scheduler",
        )
        first = run_nightly(open_workspace(fork_path, config_path=config))
        result.lines.append(f"loop night 1: {first.message} (exit {int(first.exit_code)})")

        say("loop night 1, again: nothing moved; a quiet skip")
        start = time.perf_counter()
        again = run_nightly(open_workspace(fork_path, config_path=config))
        result.skip_s = time.perf_counter() - start
        result.lines.append(f"loop skip: {again.message} ({result.skip_s:.2f} s, exit {int(again.exit_code)})")

        say("loop night 2: upstream moved again; the same PR is updated, the green sync promoted")
        config = _config(workdir, fork_path, forge, promote=True)
        upstream.commit({"vllm/sched.py": "QUEUE = 'priority'\n"}, "upstream: priority scheduling")
        second = run_nightly(open_workspace(fork_path, config_path=config))
        result.lines.append(f"loop night 2: {second.message} (exit {int(second.exit_code)})")
        if second.promoted:
            result.lines.append(f"loop promoted {second.promoted}")
        _write_seen(result, forge)
        trend = workdir / "trend.html"
        runs = write_trend(open_workspace(fork_path, config_path=config).store, trend)
        result.files["trend"] = trend
        result.lines.append(f"loop trend of {runs} runs: {trend}")
    _check(result, first, again, second, forge)
    return result


def _check(result: LoopDemoResult, first, again, second, forge: ForgeStandin) -> None:
    pulls = [p for p in forge.state.pulls.values() if p["user"]["login"] == "ds4sync-bot"]
    problems = []
    if first.exit_code or second.exit_code or again.exit_code:
        problems.append("a night did not exit 0")
    if not again.skipped:
        problems.append("the unchanged night was not a skip")
    if len(pulls) != 1 or not pulls[0]["draft"]:
        problems.append(f"expected one draft PR, the stand-in has {len(pulls)}")
    if len(forge.state.notifications) != 2:
        problems.append(f"expected 2 notifications, got {len(forge.state.notifications)}")
    if not second.promoted:
        problems.append("night 2 was not promoted")
    if problems:
        result.lines.append("loop demo: " + "; ".join(problems))
        result.exit_code = ExitCode.FAILED


def _write_seen(result: LoopDemoResult, forge: ForgeStandin) -> None:
    folder = result.workdir / "forge"
    folder.mkdir(exist_ok=True)
    state = forge.state
    for request in state.requests:
        body = request.get("json") or {}
        if request["method"] == "POST" and request["path"].endswith("/pulls") and "body" in body:
            result.files["pr_opened"] = _write(folder / "pr-opened.md", body["body"])
        if request["method"] == "PATCH" and "body" in body:
            result.files["pr_updated"] = _write(folder / "pr-updated.md", body["body"])
    for number, comments in state.comments.items():
        result.files["comment"] = _write(folder / f"pr-{number}-comment.md", comments[-1])
    result.files["notifications"] = _write(folder / "notifications.json", json.dumps(state.notifications, indent=2))
    result.files["requests"] = _write(
        folder / "requests.json",
        json.dumps([{k: r[k] for k in ("method", "path", "query")} for r in state.requests], indent=2),
    )
    seen = ", ".join(f"{r['method']} {r['path'].split('/', 4)[-1] or '/'}" for r in state.requests)
    result.lines.append(f"loop stand-in received {len(state.requests)} API requests: {seen}")
    for name in ("pr_opened", "pr_updated", "comment", "notifications"):
        if name in result.files:
            result.lines.append(f"loop {name.replace('_', ' ')}: {result.files[name]}")


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _repos(root: Path) -> tuple[RepoBuilder, Path]:
    upstream = RepoBuilder(root / "upstream")
    base = upstream.commit(
        {
            "README.md": "# vllm\n",
            "docs/install.md": "# Install\n\nvLLM 0.10 with pip.\n",
            "vllm/sched.py": "QUEUE = 'fcfs'\n",
        },
        "upstream: base",
    )
    clone_repository(upstream.path, root / "fork", origin="upstream")
    fork = RepoBuilder(root / "fork")
    fork.branch(BRANCH, base)
    fork.commit(
        {
            "docs/install.md": "# Install\n\nvLLM 0.10 with pip; SM120 wheels from the fork.\n",
            "vllm/ds4.py": "SM = 120\n",
        },
        "fork: SM120 install notes and the DS4 module",
    )
    fork.checkout("main")
    remote = root / "fork-remote.git"
    init_repository(remote, bare=True)
    fork.repo.add_remote("origin", str(remote))
    profile = root / "profile"
    (profile / "gates").mkdir(parents=True, exist_ok=True)
    (profile / "patches" / "resolutions").mkdir(parents=True, exist_ok=True)
    (profile / "gates" / "unit.yaml").write_text(
        yaml.safe_dump(
            {
                "tier": "unit",
                "gates": [
                    {
                        "name": "imports",
                        "kind": "command",
                        "run": {
                            "argv": [
                                "{python}",
                                "-c",
                                "import ast, pathlib; ast.parse(pathlib.Path('vllm/sched.py').read_text())",
                            ]
                        },
                    }
                ],
            }
        )
    )
    return upstream, fork.path


def _config(root: Path, fork: Path, forge: ForgeStandin, *, promote: bool) -> Path:
    path = root / "ds4sync.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "upstream": {"remote": "upstream", "ref": "main", "name": "vllm-project/vllm"},
                "fork": {"branch": BRANCH, "name": FORK_REPO},
                "profile": str(root / "profile"),
                "merge": {"rules": [{"glob": "docs/*", "strategy": "ours", "reason": "the fork's install notes win"}]},
                "gates": {"tiers": ["unit"], "python": sys.executable},
                "publish": {
                    "repo": FORK_REPO,
                    "api_url": forge.url,
                    "labels": ["upstream-sync", "ds4sync"],
                    "public": True,
                },
                "notify": {"urls": [forge.notify_url], "urls_env": None, "title_prefix": "ds4sync demo"},
                "nightly": {"promote": promote, "keep_runs": 10},
            },
            sort_keys=False,
        )
    )
    return path


@contextmanager
def _token() -> Iterator[None]:
    """The stand-in's token, set for the demo only (a real token is never needed nor read)."""
    saved = {name: os.environ.get(name) for name in ("GITHUB_TOKEN", "GH_TOKEN")}
    os.environ["GITHUB_TOKEN"] = DEMO_TOKEN
    os.environ.pop("GH_TOKEN", None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
