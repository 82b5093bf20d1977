"""Affected-gate selection, table-driven against vLLM CI's rules (ci-infra pipeline_generator)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.gates.definition import Gate, GateDef
from ds4sync.gates.kinds.command_kind import Spec as CommandSpec
from ds4sync.gates.selection import changed_files, depends_on, matches_entry, run_all_trigger, select
from ds4sync.models.gates_settings import VLLM_RUN_ALL_EXCLUDE_PATTERNS, VLLM_RUN_ALL_PATTERNS


@pytest.mark.parametrize(
    ("entry", "path", "expected"),
    [
        ("vllm/v1/core/", "vllm/v1/core/sched.py", True),
        ("vllm/v1/core", "vllm/v1/core/sched.py", True),
        ("vllm/v1/core", "vllm/v1/core", True),  # equal to the entry
        ("vllm/v1/core/", "vllm/v1/core", True),  # trailing slash stripped first
        ("vllm/v1/core", "vllm/v1/core_utils.py", False),  # a prefix of a name is not "under"
        ("vllm/v1/core", "tests/vllm/v1/core/x.py", False),  # no substring test (older generators had one)
        ("setup.py", "setup.py", True),
        ("setup.py", "setup.pyc", False),
        ("", "anything.py", False),
        ("/", "anything.py", False),
        ("tests/kernels/moe/test_topk.py", "tests/kernels/moe/test_topk.py", True),
    ],
)
def test_matches_entry(entry: str, path: str, expected: bool) -> None:
    assert matches_entry(entry, path) is expected


@pytest.mark.parametrize(
    ("entries", "changed", "expected"),
    [
        (["vllm/"], ["vllm/a.py"], "vllm/a.py"),
        (["vllm/"], ["docs/a.md"], None),
        (["vllm/", "!vllm/distributed/kv_transfer/"], ["vllm/distributed/kv_transfer/x.py"], None),
        (["vllm/", "!vllm/distributed/kv_transfer/"], ["vllm/distributed/kv_transfer/x.py", "vllm/b.py"], "vllm/b.py"),
        (["vllm/", "!vllm/distributed/kv_transfer"], ["vllm/distributed/kv_transfer"], None),
        (["!vllm/x/"], ["vllm/x/a.py", "vllm/y.py"], None),
        (["tests/kernels/", "csrc/"], ["csrc/moe/topk.cu"], "csrc/moe/topk.cu"),
    ],
)
def test_depends_on(entries: list[str], changed: list[str], expected: str | None) -> None:
    assert depends_on(entries, changed) == expected


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        (["csrc/attention/x.cu"], "csrc/attention/x.cu"),
        (["csrc/cpu/x.cpp"], None),  # excluded: csrc/cpu/
        (["csrc/rocm/x.cu"], None),
        (["CMakeLists.txt"], "CMakeLists.txt"),
        (["setup.py"], "setup.py"),
        (["docker/Dockerfile"], "docker/Dockerfile"),
        (["docker/Dockerfile.cpu"], None),  # excluded: docker/Dockerfile.
        (["cmake/utils.cmake"], "cmake/utils.cmake"),
        (["cmake/hipify.py"], None),
        (["cmake/cpu_extension.cmake"], None),
        (["requirements/cuda.txt"], "requirements/cuda.txt"),
        (["requirements/test/cuda.txt"], "requirements/test/cuda.txt"),
        (["requirements/rocm.txt"], None),
        (["vllm/setup.py"], None),  # re.match anchors at the start
        (["vllm/x.py", "csrc/cpu/a.cpp", "cmake/x.cmake"], "cmake/x.cmake"),
    ],
)
def test_run_all_patterns(changed: list[str], expected: str | None) -> None:
    assert run_all_trigger(changed, VLLM_RUN_ALL_PATTERNS, VLLM_RUN_ALL_EXCLUDE_PATTERNS) == expected


def _gate(name: str, deps: tuple[str, ...]) -> Gate:
    definition = GateDef(name=name, kind="command", run={"argv": ["true"]}, source_file_dependencies=deps)
    return Gate(definition=definition, spec=CommandSpec(argv=("true",)), tier="unit", source=Path("unit.yaml"))


GATES = [
    _gate("core", ("vllm/v1/core/",)),
    _gate("offload", ("vllm/v1/kv_offload/", "!vllm/v1/kv_offload/docs/")),
    _gate("always", ()),
]


@pytest.mark.parametrize(
    ("changed", "run_all", "runs"),
    [
        (["vllm/v1/core/a.py"], False, {"core", "always"}),
        (["vllm/v1/kv_offload/cpu/m.py"], False, {"offload", "always"}),
        (["vllm/v1/kv_offload/docs/x.md"], False, {"always"}),
        (["README.md"], False, {"always"}),
        (["csrc/ops.cu"], False, {"core", "offload", "always"}),
        (["csrc/cpu/ops.cpp"], False, {"always"}),
        (["README.md"], True, {"core", "offload", "always"}),
        (None, False, {"core", "offload", "always"}),
    ],
)
def test_select(changed: list[str] | None, run_all: bool, runs: set[str]) -> None:
    decisions, _ = select(
        GATES, changed, run_all=run_all, patterns=VLLM_RUN_ALL_PATTERNS, excludes=VLLM_RUN_ALL_EXCLUDE_PATTERNS
    )
    assert {d.gate.name for d in decisions if d.runs} == runs
    assert all(d.skip_reason for d in decisions if not d.runs)


def test_changed_files_since_merge_base_plus_uncommitted(builder: RepoBuilder) -> None:
    builder.commit({"vllm/a.py": "a\n", "vllm/b.py": "b\n"}, "base")
    base = builder.head()
    builder.branch("upstream-next")
    builder.commit({"csrc/up.cu": "x\n"}, "upstream only: not in the fork's change list")
    builder.checkout("main")
    builder.commit({"vllm/a.py": "a2\n", "vllm/old.py": "o\n"}, "fork change")
    builder.commit({"vllm/old.py": None}, "delete")
    (builder.path / "vllm" / "b.py").write_text("b2\n")
    changed = changed_files(GitRepo(builder.path), "upstream-next")
    assert sorted(changed) == ["vllm/a.py", "vllm/b.py"]
    assert "csrc/up.cu" not in changed
    assert sorted(changed_files(GitRepo(builder.path), base)) == ["vllm/a.py", "vllm/b.py"]
