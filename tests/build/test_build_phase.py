"""The build phase in the pipeline, and the shipped DS4 manifest."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from ds4sync.core.record import ForkRef, UpstreamRef
from ds4sync.demo.native_ext import demo_build_section, write_demo_extension
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.models.config import shipped_profile
from ds4sync.models.record import RunRecord
from ds4sync.native.manifest import load_manifest, write_manifest
from ds4sync.native.phase import BUILD_PHASES
from ds4sync.runner import RunContext, open_workspace, run_phases

pytestmark = pytest.mark.slow  # compiles, builds or runs a whole pipeline: seconds to minutes


def test_missing_tool_fails_the_phase_with_one_line(builder: RepoBuilder, tmp_path: Path) -> None:
    head = builder.commit({"setup.py": "raise SystemExit(1)\n"}, "tree")
    (builder.path / "ds4sync.yaml").write_text(
        yaml.safe_dump(
            {
                "build": {
                    "profile": "gpu",
                    "profiles": {
                        "gpu": {
                            "requires": ["nvcc"],
                            "env": {"CUDA_HOME": str(tmp_path / "no-cuda")},
                            "requires_torch": False,
                            "manifest": str(tmp_path / "manifest.yaml"),
                        }
                    },
                }
            }
        )
    )
    (tmp_path / "manifest.yaml").write_text("modules: []\n")
    ws = open_workspace(builder.path)
    record = RunRecord(
        run_id="r1",
        repo=str(builder.path),
        state_dir=str(ws.store.root),
        upstream=UpstreamRef(remote="upstream", ref="main", sha=head),
        fork=ForkRef(branch="main", head_before=head),
        sync_branch="sync/x",
        worktree=str(builder.path),
        backup_ref="refs/ds4sync/backup/r1",
    )
    outcome = run_phases(RunContext(ws, record), BUILD_PHASES)
    assert outcome.status == "failed"
    state = outcome.record.phases["build"]
    assert state.status == "failed"
    assert f"nvcc (not in $CUDA_HOME/bin = {tmp_path / 'no-cuda'}/bin)" in state.message
    assert ws.store.load("r1").phases["build"].status == "failed"


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_build_phase_builds_the_worktree_with_the_demo_section(builder: RepoBuilder, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    ext = write_demo_extension(builder.path, namespace="ds4demo", package="ds4phase_ext")
    head = builder.commit({rel: (ext.path / rel).read_text() for rel in ext.files}, "extension")
    profile = tmp_path / "profile"
    write_manifest(ext.manifest, profile / "kernels" / "manifest.yaml")
    (builder.path / "ds4sync.yaml").write_text(
        yaml.safe_dump({"profile": str(profile), "build": demo_build_section(python=sys.executable)})
    )
    ws = open_workspace(builder.path)
    worktree = ws.store.worktree_path("r2")
    ws.repo.worktree_add(worktree, "sync/phase", head)
    record = RunRecord(
        run_id="r2",
        repo=str(builder.path),
        state_dir=str(ws.store.root),
        upstream=UpstreamRef(remote="upstream", ref="main", sha=head),
        fork=ForkRef(branch="main", head_before=head),
        sync_branch="sync/phase",
        worktree=str(worktree),
        backup_ref="refs/ds4sync/backup/r2",
    )
    said: list[str] = []
    outcome = run_phases(RunContext(ws, record, said.append), BUILD_PHASES)
    assert outcome.status == "done", outcome.outcome.details if outcome.outcome else None
    steps = [line for line in said if line.startswith("build: ") and "," not in line]
    assert steps[1:4] == ["build: venv", "build: toolchain", "build: install"], said  # each step, as it starts
    assert "build: proof: 2 op schemas" in steps
    saved = ws.store.load("r2")
    assert saved.phases["build"].message == "build passed: 1/1 imports, 2/2 op schemas, deps passed"
    assert saved.results.build.checks["op schemas"] == {"passed": 2, "total": 2, "failed": []}
    assert saved.results.build.src == str(worktree)


def test_shipped_manifest_lists_the_ds4_modules_and_fused_ops() -> None:
    manifest = load_manifest(shipped_profile() / "kernels" / "manifest.yaml")
    required = [m.name for m in manifest.modules if not m.optional]
    assert len(required) == 7 and "vllm._C_stable_libtorch" in required
    fused = [op for op in manifest.ops if op.group == "dsv4-fused"]
    assert len(fused) == 4 and all(op.namespace == "_C" for op in fused)
    topk = next(op for op in manifest.ops if op.name == "topk_softplus_sqrt")
    assert topk.namespace == "_moe_C" and topk.signature.endswith("Tensor? tid2eid) -> ()")


def test_shipped_schemas_parse_as_torch_schemas() -> None:
    torch = pytest.importorskip("torch")
    manifest = load_manifest(shipped_profile() / "kernels" / "manifest.yaml")
    for op in manifest.ops:
        assert torch._C.parse_schema(op.qualified_schema).name == op.op


def test_demo_manifest_round_trips_through_yaml(tmp_path: Path) -> None:
    ext = write_demo_extension(tmp_path / "proj", namespace="ns1", package="pkg1")
    loaded = load_manifest(write_manifest(ext.manifest, tmp_path / "m.yaml"))
    assert (loaded.modules, loaded.ops) == (ext.manifest.modules, ext.manifest.ops)
    assert loaded.source == str(tmp_path / "m.yaml")
    assert "schema: scaled_add(Tensor x" in (tmp_path / "m.yaml").read_text()


def test_demo_names_must_be_identifiers(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="namespace 'bad-name'"):
        write_demo_extension(tmp_path, namespace="bad-name")
