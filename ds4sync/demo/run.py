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

import yaml

from ds4sync.core.errors import ExitCode, StateError
from ds4sync.core.git import clone_repository
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.models.merge_results import MergeSummary
from ds4sync.models.record import RunRecord
from ds4sync.runner import RunOutcome, Workspace, open_workspace

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
    return (
        f'"""DeepSeek V4 attention."""\n{header}\n\nclass DeepseekV4Attention:\n'
        "    def __init__(self, n_heads: int, head_dim: int) -> None:\n"
        "        self.n_heads = n_heads\n        self.head_dim = head_dim\n\n"
        "    def forward(self, q, kv):\n        return self._attend(q, kv)\n\n"
        "    def _attend(self, q, kv):\n        return q @ kv\n" + extra_methods
    )


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
    up.commit(
        {
            "README.md": "# vllm\n",
            "vllm/envs.py": _envs(),
            "docs/install.md": _doc("0.10"),
            "vllm/models/deepseek_v4/attention.py": _attention(),
            "vllm/legacy/eager_scratch.py": "SCRATCH_POOL_MB = 64\n",
            "requirements/cuda.txt": "torch==2.13.0\nflashinfer-python==0.6.12\n",
        },
        "Initial layout",
        date="2026-08-01T10:00:00",
    )
    up.commit({"vllm/config.py": "MAX_MODEL_LEN = 65536\n"}, "[Core] Add config module", date="2026-08-02T10:00:00")
    shas = {"base": up.head()}
    up.commit(
        {"vllm/envs.py": _envs('"VLLM_TRACE_PATH": lambda: os.getenv("VLLM_TRACE_PATH"),')},
        "[Core] Add VLLM_TRACE_PATH",
        date="2026-08-05T10:00:00",
    )
    up.commit(
        {"vllm/config.py": "MAX_MODEL_LEN = 131072\n"}, "[Core] Raise the default context", date="2026-08-06T10:00:00"
    )
    shas["u1"] = up.head()
    up.commit(
        {"docs/install.md": _doc("0.11", "Use uv for faster installs.")},
        "[Docs] Install with uv",
        date="2026-08-08T10:00:00",
    )
    up.commit(
        {"vllm/legacy/eager_scratch.py": None}, "[Cleanup] Remove the eager scratch pool", date="2026-08-09T10:00:00"
    )
    up.commit(
        {"vllm/models/deepseek_v4/attention.py": _attention(header="import math")},
        "[Model] DeepSeek V4: import math for scale",
        date="2026-08-10T10:00:00",
    )
    up.commit(
        {"requirements/cuda.txt": "torch==2.13.0\nflashinfer-python==0.6.18\n"},
        "[Deps] FlashInfer 0.6.18",
        date="2026-08-11T10:00:00",
    )
    shas["u2"] = up.head()
    return up, shas


def build_fork(path: Path, upstream: Path, base: str) -> RepoBuilder:
    """The fork: a clone of upstream with the fork branch and its carry commits."""
    clone_repository(upstream, path, origin="upstream")
    fork = RepoBuilder(path)
    fork.branch(FORK_BRANCH, base)
    fork.commit(
        {"vllm/envs.py": _envs('"VLLM_TRITON_MLA_SPARSE": lambda: os.getenv("VLLM_TRITON_MLA_SPARSE", "1"),')},
        "[SM120] Add VLLM_TRITON_MLA_SPARSE",
        date="2026-08-03T12:00:00",
    )
    fork.commit(
        {"docs/install.md": _doc("0.10", "SM120 builds need TORCH_CUDA_ARCH_LIST=12.0.")},
        "[SM120] Document the SM120 build",
        date="2026-08-03T13:00:00",
    )
    fork.commit(
        {"vllm/legacy/eager_scratch.py": "SCRATCH_POOL_MB = 128  # SM120 needs more\n"},
        "[SM120] Larger eager scratch pool",
        date="2026-08-04T12:00:00",
    )
    method = (
        "\n    def _forward_sparse_mla_decode_triton(self, q, kv):\n"
        "        # SM120: the Triton sparse-MLA decode path.\n        return self._attend(q, kv)\n"
    )
    fork.commit(
        {"vllm/models/deepseek_v4/attention.py": _attention(method)},
        "[SM120] Triton sparse-MLA decode path",
        date="2026-08-04T13:00:00",
    )
    return fork


def write_config(fork: Path, upstream: Path, profile: Path, *, build: dict | None = None) -> Path:
    """The fork's ds4sync.yaml: upstream remote, fork branch, profile, path rules, gates, and the build."""
    config: dict = {
        "upstream": {"remote": "upstream", "url": str(upstream), "ref": "main", "name": "demo/upstream"},
        "fork": {"branch": FORK_BRANCH, "name": "demo/fork"},
        "profile": str(profile),
        "gates": {"tiers": ["unit"]},
        "merge": {
            "backup_branch": "backup/{branch}-{date}-pre-sync",
            "rules": [
                {"glob": "docs/*", "strategy": "theirs", "reason": "docs follow upstream; fork notes live in the PR"},
                {"glob": "vllm/legacy/*", "strategy": "theirs", "reason": "upstream removed the legacy modules"},
            ],
        },
    }
    if build is not None:
        config["build"] = build
    path = fork / "ds4sync.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def add_native_ops(fork: RepoBuilder, profile: Path) -> dict | None:
    """Commit the fork's native ops (a real C++ torch extension) and the manifest its build must satisfy.

    Returns the ``build:`` config section, or None when this machine cannot build it
    (no torch or no C++ compiler): the demo then records the build as not configured.
    """
    import importlib.util
    import shutil
    import sys

    from ds4sync.demo.native_ext import demo_build_section, write_demo_extension
    from ds4sync.native.manifest import write_manifest

    ext = write_demo_extension(fork.path, namespace="ds4demo", package="ds4demo_ext")
    fork.repo.add_paths(ext.files)
    fork.commit({}, "[SM120] Native DS4 demo ops (C++ torch extension)", date="2026-08-04T14:00:00")
    write_manifest(ext.manifest, profile / "kernels" / "manifest.yaml")
    if importlib.util.find_spec("torch") is None or shutil.which("g++") is None:
        return None
    return demo_build_section(python=sys.executable)


def resolve_like_a_person(worktree: Path) -> None:
    """What the maintainer does in sync 1: keep both new variables in envs.py."""
    (worktree / "vllm/envs.py").write_text(
        _envs(
            '"VLLM_TRITON_MLA_SPARSE": lambda: os.getenv("VLLM_TRITON_MLA_SPARSE", "1"),',
            '"VLLM_TRACE_PATH": lambda: os.getenv("VLLM_TRACE_PATH"),',
        )
    )


def write_demo_gates(profile: Path) -> None:
    """The demo profile's ``unit`` tier: real gates that run on the merged tree with this python."""
    check_envs = (
        'import runpy; env = runpy.run_path("vllm/envs.py")["environment_variables"]; '
        'missing = {"VLLM_TRITON_MLA_SPARSE", "VLLM_TRACE_PATH"} - set(env); '
        'assert not missing, f"lost in the merge: {sorted(missing)}"'
    )
    tier = {
        "tier": "unit",
        "gates": [
            {
                "name": "compileall",
                "kind": "command",
                "description": "every Python file of the merged tree compiles",
                "run": {"argv": ["{python}", "-m", "compileall", "-q", "vllm"], "expect_exit": 0},
                "timeout": 120,
            },
            {
                "name": "envs-kept",
                "kind": "command",
                "description": "envs.py keeps the fork's and upstream's variables after the merge",
                "run": {"argv": ["{python}", "-c", check_envs], "expect_exit": 0},
                "timeout": 60,
            },
            {
                "name": "diff-check",
                "kind": "static",
                "description": "git diff --check over the sync range",
                "run": {"check": "diff-check"},
                "timeout": 60,
            },
        ],
    }
    (profile / "gates").mkdir(parents=True, exist_ok=True)
    (profile / "gates" / "unit.yaml").write_text(yaml.safe_dump(tier, sort_keys=False))


def run_demo(workdir: Path | None = None, *, progress: Callable[[str], None] | None = None) -> DemoResult:
    """Generate the repositories and run both syncs through the real pipeline, end to end."""
    from ds4sync.demo.patchsets import adapt_like_a_person, write_demo_patchsets

    say = progress or (lambda _m: None)
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="ds4sync-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    result = DemoResult(workdir=root)
    say(f"building the demo upstream and fork in {root}")
    upstream, shas = build_upstream(root / "upstream")
    profile = root / "profile"
    (profile / "patches" / "resolutions").mkdir(parents=True, exist_ok=True)
    fork = build_fork(root / "fork", upstream.path, shas["base"])
    build = add_native_ops(fork, profile)
    patchsets = write_demo_patchsets(profile, fork, base=shas["base"])
    write_demo_gates(profile)
    config_path = write_config(fork.path, upstream.path, profile, build=build)
    ws = open_workspace(fork.path, config_path=config_path)

    say("sync 1: merge an older upstream SHA; envs.py needs a person")
    first = _drive(ws, shas["u1"], result, "sync 1", {"resolve": resolve_like_a_person}, say)
    result.summaries.append(
        (
            "sync 1 (a person resolved envs.py; recorded to the shared store)",
            _merged(first.record),
        )
    )

    say("sync 2: the next night; recorded resolution, path rules, overlap, a patch-set to adapt")
    second = _drive(ws, shas["u2"], result, "sync 2", {"replay": adapt_like_a_person}, say)
    summary = _merged(second.record)
    result.summaries.append(("sync 2 (the next night)", summary))
    replay = second.record.results.replay
    replayed = {e.id: e.status for e in replay.entries} if replay else {}
    result.lines.append("patch-sets: " + ", ".join(f"{pid} {status}" for pid, status in replayed.items()))
    if any(
        replayed.get(pid) != status for pid, status in patchsets.expected["u2"].items() if status != "needs-adaptation"
    ):
        result.lines.append(f"unexpected patch-set outcomes (expected {patchsets.expected['u2']})")
        result.exit_code = ExitCode.FAILED
    built = second.record.results.build
    result.lines.append(
        f"build: {built.summary or built.status}"
        if built
        else "build: not configured (install torch==2.13.0 and g++ to build the demo's native ops)"
    )
    for tier, tier_result in second.record.results.gates.items():
        result.lines.append(f"gates {tier}: {tier_result.line()}")
    result.lines += [
        f"sync 2: {second.status}; merge commit {summary.merge_commit}",
        f"fork branch {FORK_BRANCH} untouched at {ws.repo.branch_head(FORK_BRANCH)[:12]}",
        f"worktree: {second.record.worktree}",
        f"record: {ws.store.record_path(second.record.run_id)}",
        f"shared resolutions: {profile / 'patches' / 'resolutions'}",
        f"report: {second.record.results.report.path if second.record.results.report else '(not written)'}",
    ]
    if second.status != "done":
        result.exit_code = ExitCode.FAILED
    _loop_nights(root, result, say)
    return result


def _loop_nights(root: Path, result: DemoResult, say: Callable[[str], None]) -> None:
    """The unattended loop (publish, notify, promote, trend), in its own repositories: ds4sync.demo.loop."""
    from ds4sync.demo.loop import run_loop_demo

    loop = run_loop_demo(root / "loop", progress=say)
    result.lines += loop.lines
    if loop.exit_code:
        result.exit_code = loop.exit_code


def _drive(
    ws: Workspace,
    ref: str,
    result: DemoResult,
    name: str,
    person: dict[str, Callable[[Path], None]],
    say: Callable[[str], None],
) -> RunOutcome:
    """Start a sync and take it to the end: the demo plays the person where a phase stops for one."""
    from ds4sync.loop import sync

    outcome = sync.start_merge(_reopen(ws), ref, progress=say)
    while outcome.status in ("needs-person", "paused"):
        if outcome.status == "needs-person":
            act = person.get(outcome.last_phase or "")
            if act is None:
                break
            stopped = outcome.outcome.message if outcome.outcome is not None else ""
            result.lines.append(f"{name} stopped in {outcome.last_phase}: {stopped}")
            say(f"{name}: the demo acts as the person for {outcome.last_phase}, then resumes")
            act(Path(outcome.record.worktree))
            person = {k: v for k, v in person.items() if k != outcome.last_phase}
        outcome = sync.resume(_reopen(ws), progress=say)
    if outcome.status != "done":
        result.exit_code = ExitCode.FAILED
        result.lines.append(f"{name} ended {outcome.status}: {outcome.outcome.message if outcome.outcome else ''}")
    return outcome


def _reopen(ws: Workspace) -> Workspace:
    return open_workspace(ws.repo.path, config_path=ws.config.source)


def _merged(record: RunRecord) -> MergeSummary:
    if record.results.merge is None:
        raise StateError(f"run {record.run_id} has no merge result", where=record.worktree)
    return record.results.merge
