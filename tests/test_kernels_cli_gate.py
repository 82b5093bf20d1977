"""``ds4sync kernels check`` and the ``kernel`` gate kind, end to end on the CPU (Triton interpreter)."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # before triton's first import: it reads the flag then
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from ds4sync.cli import main  # noqa: E402
from ds4sync.gates.kernelsuite import KernelSuiteResult, kernels_dir  # noqa: E402
from ds4sync.models.gates_details import KernelDetails  # noqa: E402
from tests.cli_json import data as cli_data  # noqa: E402
from tests.timing import scaled_s  # noqa: E402


@pytest.mark.slow
def test_cli_check_prints_json_and_exits_zero(capsys: pytest.CaptureFixture[str]):
    code = main(["kernels", "check", "--op", "routing", "--device", "cpu", "--json"])
    data = cli_data(capsys.readouterr().out)
    assert code == 0
    result = KernelSuiteResult.model_validate(data)
    assert [op.op for op in result.ops] == ["routing"] and result.ok


@pytest.mark.slow
def test_cli_exit_codes_for_a_failing_candidate_and_a_bad_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cand = tmp_path / "badtopk.py"
    cand.write_text(
        textwrap.dedent("""
        import torch

        def topk(logits, starts, ends, k):  # ignores the row ranges: indices are not request-local
            return torch.arange(k, dtype=torch.int32).repeat(logits.shape[0], 1)
    """)
    )
    assert main(["kernels", "check", "--op", "topk", "--device", "cpu", "--candidate", f"{cand}:topk"]) == 1
    assert "FAILED" in capsys.readouterr().out
    assert main(["kernels", "check", "--op", "nope", "--device", "cpu"]) == 2
    assert "'nope' is not one of 'prefill'" in capsys.readouterr().err


def _profile(tmp_path: Path, run: str) -> Path:
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    shutil.copytree(kernels_dir(), profile / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    (profile / "gates" / "kernel.yaml").write_text(
        textwrap.dedent(f"""
        tier: kernel
        gates:
          - name: deepseek-ops
            kind: kernel
            run: {run}
            timeout: {scaled_s(600)}
    """)
    )
    return profile


@pytest.mark.slow
def test_kernel_gate_kind_runs_the_suite_in_a_child_and_keeps_per_op_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    definition = pytest.importorskip("ds4sync.gates.tiers")
    kinds = pytest.importorskip("ds4sync.gates.kinds")
    monkeypatch.setitem(kinds.KIND_MODULES, "kernel", "ds4sync.gates.kinds.kernel")
    # two of the cheapest ops under the interpreter (every op's CI grid passes in-process in
    # tests/test_kernels_interpreter.py): what this checks is the child and the per-op results it keeps
    profile = _profile(tmp_path, "{ops: [routing, mhc_post], device: cpu}")
    (gate,) = definition.load_tier(profile, "kernel")
    ctx = kinds.GateContext(cwd=tmp_path, python=sys.executable, log_dir=tmp_path / "logs")
    result = kinds.runner_for("kernel")(gate, ctx)
    assert result.status == "passed", result.reason
    assert isinstance(result.details, KernelDetails) and result.details.kernel is not None
    kept = result.details.kernel.ops
    assert [op.op for op in kept] == ["routing", "mhc_post"]
    assert all(case.status == "pass" for op in kept for case in op.cases)
    assert result.counts.passed == sum(len(op.cases) for op in kept) >= 19 and result.counts.failed == 0
    assert "--op" in result.command and "interpreter" not in result.reason


@pytest.mark.slow
def test_kernel_gate_kind_fails_with_op_case_node_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    definition = pytest.importorskip("ds4sync.gates.tiers")
    kinds = pytest.importorskip("ds4sync.gates.kinds")
    monkeypatch.setitem(kinds.KIND_MODULES, "kernel", "ds4sync.gates.kinds.kernel")
    cand = tmp_path / "cand.py"
    cand.write_text("def route(**kw):\n    raise RuntimeError('boom')\n")
    profile = _profile(tmp_path, f"{{ops: [routing], device: cpu, candidate: '{cand}:route'}}")
    (gate,) = definition.load_tier(profile, "kernel")
    ctx = kinds.GateContext(cwd=tmp_path, python=sys.executable, log_dir=tmp_path / "logs")
    result = kinds.runner_for("kernel")(gate, ctx)
    assert result.status == "failed"
    assert result.counts.errors == len(result.failures) > 0
    assert result.failures[0].node_id.startswith("routing::") and "boom" in result.failures[0].message


@pytest.mark.slow
def test_kernel_gate_bench_flag_reaches_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    definition = pytest.importorskip("ds4sync.gates.tiers")
    kinds = pytest.importorskip("ds4sync.gates.kinds")
    monkeypatch.setitem(kinds.KIND_MODULES, "kernel", "ds4sync.gates.kinds.kernel")
    profile = _profile(tmp_path, "{ops: [routing], device: cpu}")
    (gate,) = definition.load_tier(profile, "kernel")
    ctx = kinds.GateContext(cwd=tmp_path, python=sys.executable, log_dir=tmp_path / "logs", extra={"bench": True})
    result = kinds.runner_for("kernel")(gate, ctx)
    assert "--bench" in result.command
    assert result.status == "error"  # benchmarks need a CUDA device: the child refuses, no result file
    assert "benchmarks need a CUDA device" in result.failures[0].message


SKIPPED_OP = {"op": "topk", "impl": "cand", "cases": [{"name": f"c{i}", "status": "skip"} for i in range(2)]}


@pytest.mark.parametrize("ops", [(), (SKIPPED_OP,)], ids=["no-op", "every-case-skipped"])
def test_a_suite_that_checked_no_case_is_not_run_never_green(tmp_path: Path, ops: tuple) -> None:
    """The suite's JSON says it ran, but no case was checked (no op selected, or every case skipped)."""
    from ds4sync.gates.definition import Gate, GateDef
    from ds4sync.gates.kinds import GateContext
    from ds4sync.gates.kinds.kernel import Spec, to_gate_result

    env = {"device": "cpu", "torch": "2.13.0", "triton": "3.6.0", "date": "2026-12-04", "interpreter": True}
    suite = KernelSuiteResult.model_validate({"environment": env, "scale": "small", "repeats": 1, "ops": ops})
    spec = Spec(ops=("topk",))
    gate = Gate(definition=GateDef(name="ops", kind="kernel"), spec=spec, tier="kernel", source=Path("k.yaml"))
    run = GateContext(cwd=tmp_path, python=sys.executable, log_dir=tmp_path / "logs").start(gate, "kernel")
    result = to_gate_result(suite, spec, run)
    assert result.status == "not-run" and result.counts.passed == 0, result.reason
    assert result.reason.startswith("the suite checked no case (") and "for topk; nothing checked" in result.reason
    assert isinstance(result.details, KernelDetails) and result.details.kernel == suite
