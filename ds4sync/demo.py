"""The embedded sample fork behind ``ds4sync demo``: a real scenario, run end to end.

An upstream project and a fork of it are generated with realistic history (our own
content, shaped like vLLM's tree). Two nightly syncs then run through the real
pipeline:

1. Sync 1 merges an older upstream SHA. ``vllm/envs.py`` conflicts; the demo plays
   the person who resolves it, and ``ds4sync resume`` records that resolution into
   the profile's shared rerere store.
2. Sync 2 (the next night, the fork branch still unpromoted) merges a newer upstream
   SHA. The same ``envs.py`` conflict recurs and replays from the store; a path rule
   resolves the docs conflict and the modify/delete of a file upstream removed; a file
   changed on both sides merges cleanly and is listed as a semantic overlap.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import git
import yaml

from ds4sync.errors import ExitCode
from ds4sync.mergeplan import MergeSummary
from ds4sync.pipeline import Workspace, open_workspace
from ds4sync.repobuild import RepoBuilder

FORK_BRANCH = "ds4-sm120"

_ENVS_BASE = '''"""Environment variables read by the engine."""
import os

environment_variables = {
    "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
    "VLLM_PORT": lambda: int(os.getenv("VLLM_PORT", "8000")),
    "VLLM_USE_BREAKABLE_CUDAGRAPH": lambda: os.getenv("VLLM_USE_BREAKABLE_CUDAGRAPH", "0") == "1",
}
'''


def _envs(*extra: str) -> str:
    lines = _ENVS_BASE.rstrip("}\n").splitlines()
    return "\n".join(lines + [f"    {entry}" for entry in extra] + ["}", ""])


def _attention(extra_methods: str = "", header: str = "") -> str:
    return (f'"""DeepSeek V4 attention."""\n{header}\n\nclass DeepseekV4Attention:\n'
            '    def __init__(self, n_heads: int, head_dim: int) -> None:\n'
            '        self.n_heads = n_heads\n        self.head_dim = head_dim\n\n'
            '    def forward(self, q, kv):\n        return self._attend(q, kv)\n\n'
            '    def _attend(self, q, kv):\n        return q @ kv\n' + extra_methods)


def _doc(version: str, extra: str = "") -> str:
    return f"# Installation\n\nInstall vLLM {version} with pip.\n\n{extra}\n"


@dataclass
class DemoResult:
    """What the demo did: summaries to render, lines to print, and the exit code."""

    workdir: Path
    summaries: list[tuple[str, MergeSummary]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    exit_code: ExitCode = ExitCode.OK


def build_upstream(path: Path) -> tuple[RepoBuilder, dict[str, str]]:
    """The upstream project; returns the builder and the SHAs the syncs use (``base``, ``u1``, ``u2``)."""
    up = RepoBuilder(path)
    up.commit({"README.md": "# vllm\n", "vllm/envs.py": _envs(), "docs/install.md": _doc("0.10"),
               "vllm/models/deepseek_v4/attention.py": _attention(),
               "vllm/legacy/eager_scratch.py": "SCRATCH_POOL_MB = 64\n",
               "requirements/cuda.txt": "torch==2.13.0\nflashinfer-python==0.6.12\n"},
              "Initial layout", date="2026-08-01T10:00:00")
    up.commit({"vllm/config.py": "MAX_MODEL_LEN = 65536\n"}, "[Core] Add config module", date="2026-08-02T10:00:00")
    shas = {"base": up.head()}
    up.commit({"vllm/envs.py": _envs('"VLLM_TRACE_PATH": lambda: os.getenv("VLLM_TRACE_PATH"),')},
              "[Core] Add VLLM_TRACE_PATH", date="2026-08-05T10:00:00")
    up.commit({"vllm/config.py": "MAX_MODEL_LEN = 131072\n"}, "[Core] Raise the default context",
              date="2026-08-06T10:00:00")
    shas["u1"] = up.head()
    up.commit({"docs/install.md": _doc("0.11", "Use uv for faster installs.")}, "[Docs] Install with uv",
              date="2026-08-08T10:00:00")
    up.commit({"vllm/legacy/eager_scratch.py": None}, "[Cleanup] Remove the eager scratch pool",
              date="2026-08-09T10:00:00")
    up.commit({"vllm/models/deepseek_v4/attention.py": _attention(header="import math")},
              "[Model] DeepSeek V4: import math for scale", date="2026-08-10T10:00:00")
    up.commit({"requirements/cuda.txt": "torch==2.13.0\nflashinfer-python==0.6.18\n"},
              "[Deps] FlashInfer 0.6.18", date="2026-08-11T10:00:00")
    shas["u2"] = up.head()
    return up, shas


def build_fork(path: Path, upstream: Path, base: str) -> RepoBuilder:
    """The fork: a clone of upstream with the fork branch and its carry commits."""
    git.Repo.clone_from(str(upstream), str(path), origin="upstream")
    fork = RepoBuilder(path)
    fork.branch(FORK_BRANCH, base)
    fork.commit({"vllm/envs.py": _envs('"VLLM_TRITON_MLA_SPARSE": lambda: os.getenv("VLLM_TRITON_MLA_SPARSE", "1"),')},
                "[SM120] Add VLLM_TRITON_MLA_SPARSE", date="2026-08-03T12:00:00")
    fork.commit({"docs/install.md": _doc("0.10", "SM120 builds need TORCH_CUDA_ARCH_LIST=12.0.")},
                "[SM120] Document the SM120 build", date="2026-08-03T13:00:00")
    fork.commit({"vllm/legacy/eager_scratch.py": "SCRATCH_POOL_MB = 128  # SM120 needs more\n"},
                "[SM120] Larger eager scratch pool", date="2026-08-04T12:00:00")
    method = ("\n    def _forward_sparse_mla_decode_triton(self, q, kv):\n"
              "        # SM120: the Triton sparse-MLA decode path.\n        return self._attend(q, kv)\n")
    fork.commit({"vllm/models/deepseek_v4/attention.py": _attention(method)},
                "[SM120] Triton sparse-MLA decode path", date="2026-08-04T13:00:00")
    return fork


def write_config(fork: Path, upstream: Path, profile: Path) -> Path:
    """The fork's ds4sync.yaml: upstream remote, fork branch, profile, and path rules."""
    config = {
        "upstream": {"remote": "upstream", "url": str(upstream), "ref": "main", "name": "demo/upstream"},
        "fork": {"branch": FORK_BRANCH, "name": "demo/fork"},
        "profile": str(profile),
        "merge": {"backup_branch": "backup/{branch}-{date}-pre-sync", "rules": [
            {"glob": "docs/*", "strategy": "theirs", "reason": "docs follow upstream; fork notes live in the PR"},
            {"glob": "vllm/legacy/*", "strategy": "theirs", "reason": "upstream removed the legacy modules"},
        ]},
    }
    path = fork / "ds4sync.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def resolve_like_a_person(worktree: Path) -> None:
    """What the maintainer does in sync 1: keep both new variables in envs.py."""
    (worktree / "vllm/envs.py").write_text(_envs(
        '"VLLM_TRITON_MLA_SPARSE": lambda: os.getenv("VLLM_TRITON_MLA_SPARSE", "1"),',
        '"VLLM_TRACE_PATH": lambda: os.getenv("VLLM_TRACE_PATH"),'))


def run_demo(workdir: Path | None = None, *, progress: Callable[[str], None] | None = None) -> DemoResult:
    """Generate the repositories and run both syncs through the real pipeline."""
    from ds4sync import sync

    say = progress or (lambda _m: None)
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="ds4sync-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    result = DemoResult(workdir=root)
    say(f"building the demo upstream and fork in {root}")
    upstream, shas = build_upstream(root / "upstream")
    profile = root / "profile"
    (profile / "patches" / "resolutions").mkdir(parents=True, exist_ok=True)
    fork = build_fork(root / "fork", upstream.path, shas["base"])
    from ds4sync.patchsets.demo import adapt_like_a_person, write_demo_patchsets

    patchsets = write_demo_patchsets(profile, fork, base=shas["base"])
    config_path = write_config(fork.path, upstream.path, profile)
    ws = open_workspace(fork.path, config_path=config_path)

    say("sync 1: merge an older upstream SHA; envs.py needs a person")
    first = sync.start_merge(ws, shas["u1"], progress=say)
    stopped = first.outcome.message if first.outcome is not None else ""
    result.lines.append(f"sync 1 stopped: {first.status} ({stopped})")
    resolve_like_a_person(Path(first.record.worktree))
    first = sync.resume(_reopen(ws), progress=say)
    result.summaries.append(("sync 1 (a person resolved envs.py; recorded to the shared store)",
                             MergeSummary.model_validate(first.record.results["merge"])))

    say("sync 2: merge a newer upstream SHA; recorded resolution, rules, overlap")
    second = sync.start_merge(_reopen(ws), shas["u2"], progress=say)
    if second.status == "needs-person" and second.last_phase == "replay":
        stopped = second.outcome.message if second.outcome is not None else ""
        result.lines.append(f"sync 2 stopped in replay: {stopped}")
        say("sync 2: a patch-set no longer applies; the demo adapts it like a person, then resumes")
        adapt_like_a_person(Path(second.record.worktree))
        second = sync.resume(_reopen(ws), progress=say)
    summary = MergeSummary.model_validate(second.record.results["merge"])
    result.summaries.append(("sync 2 (the next night)", summary))
    record_path = ws.store.record_path(second.record.run_id)
    from ds4sync.report import write_report

    report = write_report(ws.store, second.record, ws.profile)
    replayed = {e["id"]: e["status"] for e in second.record.results.get("replay", {}).get("entries", [])}
    result.lines.append("patch-sets: " + ", ".join(f"{pid} {status}" for pid, status in replayed.items()))
    if any(replayed.get(pid) != status for pid, status in patchsets.expected["u2"].items()
           if status != "needs-adaptation"):
        result.lines.append(f"unexpected patch-set outcomes (expected {patchsets.expected['u2']})")
        result.exit_code = ExitCode.FAILED
    result.lines += [
        f"sync 2: {second.status}; merge commit {summary.merge_commit}",
        f"fork branch {FORK_BRANCH} untouched at {ws.repo.branch_head(FORK_BRANCH)[:12]}",
        f"worktree: {second.record.worktree}",
        f"record: {record_path}",
        f"shared resolutions: {profile / 'patches' / 'resolutions'}",
        f"report: {report}",
    ]
    if second.status not in ("done", "paused"):
        result.exit_code = ExitCode.FAILED
    return result


def _reopen(ws: Workspace) -> Workspace:
    return open_workspace(ws.repo.path, config_path=ws.config.source)
