"""The build driver on a real CPU torch extension: real compiler, real log, real imports and op schemas."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.core.git import GitRepo
from ds4sync.core.record import ForkRef, UpstreamRef
from ds4sync.demo.native_ext import FILL, SCALED_ADD, DemoExtension, write_demo_extension
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.models.native_results import BuildResult
from ds4sync.models.record import RecordStore, RunRecord
from ds4sync.native.manifest import Manifest, ModuleSpec, OpSpec, normalize_schema
from ds4sync.native.phase import outcome_of
from ds4sync.native.proof import run_proof

pytestmark = [pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++"), pytest.mark.slow]


def test_cpu_build_passes_and_proves(built_demo: tuple[DemoExtension, BuildResult]) -> None:
    torch = pytest.importorskip("torch")
    ext, result = built_demo
    assert result.status == "passed", result.tail
    assert result.headline == "passed: 1/1 imports, 2/2 op schemas, deps passed"
    assert result.checks == {
        "imports": {"passed": 1, "total": 1, "failed": []},
        "op schemas": {"passed": 2, "total": 2, "failed": []},
        "deps": {"passed": 1, "total": 1, "failed": []},
    }
    assert result.command[-5:] == ("-e", ".", "--no-build-isolation", "--no-deps", "-v")
    assert result.duration_s == result.total_s > 0
    assert [s.name for s in result.steps] == ["venv", "install"]
    assert result.toolchain["torch"] == torch.__version__ and result.toolchain["torch_cuda"] == torch.version.cuda
    assert set(result.toolchain) == {"python", "torch", "torch_cuda", "nvcc", "gcc", "cmake", "ninja", "compiler_cache"}
    log = Path(result.log_path).read_text()
    assert "csrc/ops.cpp" in log and "==> install:" in log and "Successfully installed ds4demo-ext" in log
    imported = next(i for i in result.proof.items if i.kind == "import")
    assert imported.detail.startswith(str(ext.path)) and imported.detail.endswith(".so")
    fill = next(i for i in result.proof.items if i.name == "ds4demo::fill_")
    assert fill.actual is not None
    # torch prints `Tensor!` with an alias set, so only the parsed comparison can match it.
    assert normalize_schema(fill.actual) != normalize_schema(f"ds4demo::{FILL}")
    assert fill.status == "passed"
    assert BuildResult.model_validate(result.model_dump(mode="json")) == result


def test_wrong_schema_and_missing_module_are_failures(built_demo: tuple[DemoExtension, BuildResult]) -> None:
    _, result = built_demo
    manifest = Manifest(
        modules=(
            ModuleSpec(name="ds4demo_ext._C"),
            ModuleSpec(name="ds4demo_ext._C_gone"),
            ModuleSpec(name="ds4demo_ext._flash_C", optional=True),
        ),
        ops=(
            OpSpec(
                op="ds4demo::scaled_add", signature="scaled_add(Tensor x, Tensor y, int alpha) -> Tensor", group="fused"
            ),
            OpSpec(op="ds4demo::fill_", signature="fill_( Tensor!  out,\n float value ) -> ()", group="fused"),
            OpSpec(op="ds4demo::never_defined", signature="never_defined(Tensor x) -> Tensor", group="cache"),
        ),
    )
    proof = run_proof(result.python, manifest, env={"PATH": "/usr/bin:/bin"}, check_deps=False)
    status = {(i.kind, i.name): i.status for i in proof.items}
    assert status == {
        ("import", "ds4demo_ext._C"): "passed",
        ("import", "ds4demo_ext._C_gone"): "failed",
        ("import", "ds4demo_ext._flash_C"): "absent",
        ("schema", "ds4demo::scaled_add"): "failed",
        ("schema", "ds4demo::fill_"): "passed",
        ("schema", "ds4demo::never_defined"): "failed",
    }
    assert not proof.ok
    assert proof.summary == "1/2 imports, 1/3 op schemas, deps skipped, optional 0/1 present"
    assert proof.schema_groups == {"fused": "1/2", "cache": "0/1"}
    wrong = next(i for i in proof.items if i.name == "ds4demo::scaled_add")
    assert wrong.actual == f"ds4demo::{SCALED_ADD}"
    gone = next(i for i in proof.items if i.name == "ds4demo_ext._C_gone")
    assert "ModuleNotFoundError" in gone.detail


def _broken(path: Path) -> DemoExtension:
    ext = write_demo_extension(path, namespace="ds4broken", package="ds4broken_ext")
    source = path / "csrc" / "ops.cpp"
    source.write_text("#error ds4sync-broken-on-purpose\n" + source.read_text())
    return ext


def test_failing_build_exits_1_with_the_log_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    repo = RepoBuilder(tmp_path / "fork")
    ext = _broken(repo.path)
    repo.commit({**_files(ext), ".gitignore": "build/\n*.egg-info/\n"}, "broken extension")
    _write_config(repo.path)
    _manifest_file(tmp_path, ext.manifest)
    monkeypatch.chdir(tmp_path)  # a relative --manifest is read from the current folder
    code = main(["build", "--repo", str(repo.path), "--build-profile", "cpu", "--manifest", "manifest.yaml"])
    printed = capsys.readouterr().out
    assert code == 1
    assert "build failed: at step 'install'" in printed
    assert "ds4sync-broken-on-purpose" in printed
    log = next((repo.path / ".git" / "ds4sync" / "builds").glob("*-cpu/build.log"))
    assert f"log: {log}" in printed.replace("\n", "")
    assert "ds4sync-broken-on-purpose" in log.read_text()


def test_build_in_active_run_records_into_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_never_in_logs_123")
    monkeypatch.setenv("HF_TOKEN", "hf_never_in_logs_456")
    repo = RepoBuilder(tmp_path / "fork")
    ext = write_demo_extension(repo.path, namespace="ds4demo", package="ds4run_ext")
    head = repo.commit({**_files(ext), ".gitignore": "build/\n*.egg-info/\n*.so\nds4sync.yaml\n"}, "extension")
    _write_config(
        repo.path,
        pre_steps=[{"name": "show env", "run": ["{python}", "-c", "import os; print(sorted(os.environ.items()))"]}],
        keep_env=["HF_TOKEN"],
    )
    store = RecordStore(repo.path / ".git" / "ds4sync")
    worktree = store.worktree_path("run1")
    GitRepo(repo.path).worktree_add(worktree, "sync/test", head)
    store.save(
        RunRecord(
            run_id="run1",
            repo=str(repo.path),
            state_dir=str(store.root),
            status="paused",
            upstream=UpstreamRef(remote="upstream", ref="main", sha=head),
            fork=ForkRef(branch="main", head_before=head),
            sync_branch="sync/test",
            worktree=str(worktree),
            backup_ref="refs/ds4sync/backup/run1",
        )
    )
    manifest = _manifest_file(tmp_path, ext.manifest)
    code = main(["build", "--repo", str(repo.path), "--build-profile", "cpu", "--manifest", str(manifest), "--json"])
    assert code == 0
    record = store.load("run1")
    build = record.results.build
    assert build.proof.summary == "1/1 imports, 2/2 op schemas, deps passed"
    assert build.src == str(worktree)
    assert record.phases["build"].status == "done"
    assert list(worktree.glob("ds4run_ext/_C*.so")) and not list(repo.path.glob("ds4run_ext/_C*.so"))
    log = Path(build.log_path).read_text()
    saved = store.record_path("run1").read_text()
    assert "('HF_TOKEN', '[redacted]')" in log  # kept for the build, hidden in the log
    assert "GITHUB_TOKEN" not in log  # not passed on at all
    for secret in ("ghp_never_in_logs_123", "hf_never_in_logs_456"):
        assert secret not in log and secret not in saved
    assert outcome_of(BuildResult.model_validate(build)).status == "done"


def _files(ext: DemoExtension) -> dict[str, str]:
    return {rel: (ext.path / rel).read_text() for rel in ext.files}


def _write_config(repo: Path, **profile: object) -> None:
    cpu = {
        "requires": ["g++"],
        "venv": {"create": True, "python": sys.executable, "inherit_site_packages": True},
        **profile,
    }
    (repo / "ds4sync.yaml").write_text(yaml.safe_dump({"build": {"profile": "cpu", "profiles": {"cpu": cpu}}}))


def _manifest_file(folder: Path, manifest: Manifest) -> Path:
    path = folder / "manifest.yaml"
    path.write_text(yaml.safe_dump(json.loads(manifest.model_dump_json(by_alias=True))))
    return path


def test_broken_requirement_fails_the_dependency_check(
    built_demo: tuple[DemoExtension, BuildResult], tmp_path: Path
) -> None:
    """Last in this module: it leaves a package with a missing requirement in the shared venv."""
    _, result = built_demo
    needy = tmp_path / "needy"
    needy.mkdir()
    (needy / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "ds4sync-needy"\nversion = "1.0"\n'
        'dependencies = ["ds4sync-absent-requirement>=2"]\n[tool.setuptools]\npy-modules = []\n'
    )
    installed = subprocess.run(
        [result.python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", str(needy)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    proof = run_proof(result.python, Manifest(), env={"PATH": "/usr/bin:/bin"})
    deps = proof.items[0]
    assert (deps.kind, deps.name, deps.status) == ("deps", "pip check", "failed")
    assert "ds4sync-absent-requirement" in deps.detail
    assert not proof.ok and proof.summary == "0/0 imports, 0/0 op schemas, deps failed"
