"""A small pytest project written from code: passing, failing, skipped, deselected, flaky,
gated-403, host-topology and hanging tests, plus its ``gates/`` profile.

Used by the tests, the gate benchmark and the GPU run (``cuda=True`` adds CUDA tests that
run on the device named by CUDA_VISIBLE_DEVICES). Nothing here touches the network: the
"gated" test raises the error text a Hugging Face 403 produces.
"""

from __future__ import annotations

from pathlib import Path

from tests.procs import IDENTITY

EXPECTED_MAIN = {
    "passed": 6,
    "failed": 1,
    "errors": 0,
    "skipped": 2,
    "deselected": 5,
    "env_only": 2,
    "flaky": 1,
    "xfailed": 0,
    "xpassed": 0,
}

_FILES: dict[str, str] = {
    ".gitignore": "__pycache__/\n.pytest_cache/\n*.pyc\n",
    "pytest.ini": "[pytest]\nmarkers =\n    slow: slow tests\n    cuda: needs a GPU\n",
    "calc/__init__.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n",
    "tests/__init__.py": "",
    "tests/test_pass.py": """\
import pytest

from calc import add, mul


@pytest.mark.parametrize("a,b,c", [(1, 2, 3), (2, 2, 4), (0, 0, 0)])
def test_add(a, b, c):
    assert add(a, b) == c


class TestMul:
    def test_mul(self):
        assert mul(3, 4) == 12

    def test_mul_zero(self):
        assert mul(5, 0) == 0


def test_slow_big():  # deselected with -k 'not slow'
    assert add(10**6, 1) == 10**6 + 1
""",
    "tests/test_fail.py": """\
from calc import add


def test_add_is_wrong():
    assert add(2, 2) == 5, "calc.add disagrees"


def test_add_ok():
    assert add(1, 1) == 2
""",
    "tests/test_skip.py": """\
import pytest


@pytest.mark.skip(reason="not on this host")
def test_skipped():
    raise AssertionError("never runs")


def test_skipped_inside():
    pytest.skip("feature off")
""",
    "tests/test_deselect.py": """\
def test_only_on_big_hosts():
    raise AssertionError("deselected by --deselect")


def test_slow_second():
    raise AssertionError("deselected by --deselect and -k")
""",
    "tests/test_flaky.py": """\
import os
from pathlib import Path


def test_flaky_once():
    marker = Path(os.environ["SAMPLE_FLAKY_DIR"]) / "seen"
    if not marker.exists():
        marker.write_text("1")
        raise AssertionError("first attempt fails")
""",
    "tests/test_env.py": """\
def test_gated_model_fixture():
    raise OSError(
        "401/403 Client Error: Forbidden for url: https://huggingface.co/meta-llama/Llama-3.2-1B/resolve/main/"
        "config.json. Access to model meta-llama/Llama-3.2-1B is restricted.")


def test_pipeline_parallel_4():
    raise ValueError("pipeline_parallel_size=4 requires 4 GPUs but only 2 are available on this host")
""",
    "tests/test_hang.py": """\
import os
import subprocess
import sys
import time
from pathlib import Path
"""
    + IDENTITY
    + """


def test_before_the_hang():
    assert True


def test_hangs_with_a_child():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path(os.environ["SAMPLE_PID_FILE"]).write_text(f"{identity(os.getpid())} {identity(child.pid)}")
    time.sleep(600)
""",
}

_CUDA_TEST = """\
import os

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def test_sees_only_its_devices():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    assert torch.cuda.device_count() == len([d for d in visible.split(",") if d])


@pytest.mark.parametrize("n", [256, 1024, 4096])
def test_matmul_matches_cpu(n):
    a = torch.randn(n, n, generator=torch.Generator().manual_seed(n))
    b = torch.randn(n, n, generator=torch.Generator().manual_seed(n + 1))
    got = (a.cuda().double() @ b.cuda().double()).cpu()
    torch.testing.assert_close(got, a.double() @ b.double())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_softmax_rows_sum_to_one(dtype):
    x = torch.randn(64, 4096, device="cuda", dtype=getattr(torch, dtype))
    s = torch.softmax(x.float(), dim=-1)
    torch.testing.assert_close(s.sum(-1), torch.ones(64, device="cuda"))


def test_device_name_recorded(record_property):
    record_property("device", torch.cuda.get_device_name(0))
    assert torch.cuda.get_device_capability(0) >= (7, 0)


def test_gated_weights():
    raise OSError("403 Client Error: Forbidden for url: https://huggingface.co/deepseek-ai/DeepSeek-V4/resolve/main/"
                  "config.json")


def test_needs_four_gpus():
    if torch.cuda.device_count() < 4:
        raise RuntimeError(f"world_size=4 needs 4 GPUs; this host gives {torch.cuda.device_count()}")
"""

UNIT_YAML = """\
tier: unit
env_failures:
  - {name: hf-gated-403, category: gated-model-403, pattern: "403 Client Error|GatedRepoError|is restricted"}
  - {name: too-few-gpus, category: host-topology,
     pattern: "(pipeline_parallel_size|world_size)=\\\\d+ (requires|needs) \\\\d+ GPUs"}
gates:
  - name: main
    kind: pytest
    run:
      args: [-q, --tb=short]
      paths: [tests]
      deselect: [tests/test_hang.py, tests/test_deselect.py]
      k: not slow
    rerun_failures: 1
    source_file_dependencies: [calc/, tests/]
  - name: hang
    kind: pytest
    run: {paths: [tests/test_hang.py]}
    timeout: 4
    required: false
    source_file_dependencies: [tests/test_hang.py]
"""

GPU_YAML = """\
tier: gpu
env_failures:
  - {name: hf-gated-403, category: gated-model-403, pattern: "403 Client Error|GatedRepoError"}
  - {name: too-few-gpus, category: host-topology, pattern: "world_size=\\\\d+ needs \\\\d+ GPUs"}
gates:
  - name: cuda-a
    kind: pytest
    run: {args: [-q, -rs], paths: [tests_cuda/test_cuda.py], k: "not gated and not four"}
    devices: 1
    source_file_dependencies: [tests_cuda/]
  - name: cuda-b
    kind: pytest
    run: {args: [-q], paths: [tests_cuda/test_cuda.py], k: "matmul or gated or four"}
    devices: 1
    source_file_dependencies: [tests_cuda/]
  - name: cuda-pp4
    kind: pytest
    run: {paths: [tests_cuda/test_cuda.py]}
    devices: 4
    source_file_dependencies: [tests_cuda/]
"""


def write_sample_project(root: Path, *, cuda: bool = False) -> Path:
    """Write the sample project (and its ``profile/gates/``) under ``root``; returns ``root``.

    The ``main`` unit gate yields exactly :data:`EXPECTED_MAIN` on its first run when
    ``SAMPLE_FLAKY_DIR`` points at an empty folder; ``hang`` hits its 4 s timeout.
    """
    files = dict(_FILES)
    files["profile/gates/unit.yaml"] = UNIT_YAML
    if cuda:
        files["tests_cuda/__init__.py"] = ""
        files["tests_cuda/test_cuda.py"] = _CUDA_TEST
        files["profile/gates/gpu.yaml"] = GPU_YAML
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
