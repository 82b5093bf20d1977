"""Exact counts on every test shape pytest and its common plugins write, each from a real pytest run.

Every case runs real pytest (with pytest-rerunfailures and pytest-xdist where the shape needs
them) through the pytest gate kind, asserts pytest's own summary line (so the shape is what we
think it is) and compares ds4sync's counts with it. Where they differ on purpose the case says
why: ds4sync counts logical tests (a test that fails and errors in teardown is one failure,
pytest's summary counts it twice; a rerun that passed is one flaky test, pytest says passed
plus "rerun").
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from gates_helpers import PYTHON, workspace, write_gates

from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.gates.junit import summary_counts
from ds4sync.gates.runner import TierOptions, run_tier
from ds4sync.models.gates_results import GateResult
from tests.timing import scaled_s

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # each case is a real pytest run (about a second; xdist more)

FIXTURES = """
import pytest

@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown boom")

@pytest.fixture
def bad_setup():
    raise RuntimeError("setup boom")
"""


@dataclass(frozen=True)
class Shape:
    """A pytest project, the gate's extra args, pytest's own summary (without the time), ds4sync's counts.

    ``folds``: ds4sync counts logical tests where pytest's summary counts reports (a teardown
    error of a test that also has an outcome, reruns); otherwise every count must be pytest's.
    """

    files: dict[str, str]
    args: str
    pytest_says: str
    counts: dict[str, int]
    failing: frozenset[str] = frozenset()
    folds: bool = False


def _a(body: str, **more: str) -> dict[str, str]:
    return {"tests/test_a.py": body, **more}


SHAPES: dict[str, Shape] = {
    "plain pass/fail/skip": Shape(
        _a("import pytest\ndef test_ok(): pass\ndef test_bad(): assert 1 == 2\ndef test_skip(): pytest.skip('gpu')\n"),
        "",
        "1 failed, 1 passed, 1 skipped",
        {"passed": 1, "failed": 1, "skipped": 1},
        frozenset({"tests/test_a.py::test_bad"}),
    ),
    "failure then teardown error": Shape(
        _a("def test_t(bad_teardown): assert 0\n", **{"tests/conftest.py": FIXTURES}),
        "",
        "1 failed, 1 error",  # pytest counts the call and the teardown
        {"failed": 1},  # one logical test: failed, the teardown error attached
        frozenset({"tests/test_a.py::test_t"}),
        folds=True,
    ),
    "pass then teardown error": Shape(
        _a("def test_t(bad_teardown): pass\n", **{"tests/conftest.py": FIXTURES}),
        "",
        "1 passed, 1 error",  # pytest counts the passing call and the teardown error
        {"errors": 1},  # not a pass: its teardown failed
        frozenset({"tests/test_a.py::test_t"}),
        folds=True,
    ),
    "setup error": Shape(
        _a("def test_t(bad_setup): pass\ndef test_ok(): pass\n", **{"tests/conftest.py": FIXTURES}),
        "",
        "1 passed, 1 error",
        {"passed": 1, "errors": 1},
        frozenset({"tests/test_a.py::test_t"}),
    ),
    "xfail, xpass, strict xpass": Shape(
        _a(
            "import pytest\n"
            "@pytest.mark.xfail(reason='known')\ndef test_xf(): assert 0\n"
            "@pytest.mark.xfail(reason='maybe')\ndef test_xp(): pass\n"
            "@pytest.mark.xfail(reason='strict', strict=True)\ndef test_strict(): pass\n"
            "def test_ok(): pass\n"
        ),
        "",
        "1 failed, 1 passed, 1 xfailed, 1 xpassed",
        {"passed": 1, "failed": 1, "xfailed": 1, "xpassed": 1},
        frozenset({"tests/test_a.py::test_strict"}),
    ),
    "rerunfailures: flaky and always failing": Shape(
        _a(
            "import pathlib, pytest\n"
            "@pytest.mark.flaky(reruns=2)\ndef test_flaky():\n"
            "    mark = pathlib.Path(__file__).with_name('ran-once')\n"
            "    if not mark.exists():\n        mark.write_text('x')\n        assert 0\n"
            "@pytest.mark.flaky(reruns=2)\ndef test_always(): assert 0\n"
            "def test_ok(): pass\n"
        ),
        "-p rerunfailures",
        "1 failed, 2 passed, 3 rerun",
        {"passed": 1, "failed": 1, "flaky": 1},  # the flaky test once, as flaky, not as a pass
        frozenset({"tests/test_a.py::test_always"}),
        folds=True,
    ),
    "xdist workers": Shape(
        _a(
            "import pytest\n"
            + "".join(f"def test_ok{i}(): pass\n" for i in range(6))
            + "def test_bad(): assert 0\ndef test_td(bad_teardown): assert 0\n"
            + "@pytest.mark.xfail\ndef test_xf(): assert 0\n",
            **{"tests/conftest.py": FIXTURES},
        ),
        "-p xdist -n 2",
        "2 failed, 6 passed, 1 xfailed, 1 error",
        {"passed": 6, "failed": 2, "xfailed": 1},
        frozenset({"tests/test_a.py::test_bad", "tests/test_a.py::test_td"}),
        folds=True,
    ),
    "collection error names the file": Shape(
        _a("def test_ok(): pass\n", **{"tests/test_broken.py": "import no_such_module_here\n"}),
        "",
        "1 error",
        {"errors": 1},
        frozenset({"tests/test_broken.py"}),
    ),
    "deselected": Shape(
        _a("def test_one(): pass\ndef test_two(): pass\ndef test_three(): pass\n"),
        "-k 'not two'",
        "2 passed, 1 deselected",
        {"passed": 2, "deselected": 1},
    ),
    "a line printed after pytest's summary": Shape(
        _a(
            "def test_one(): pass\ndef test_two(): assert 0\n",
            **{"tests/conftest.py": "import atexit\natexit.register(lambda: print('9 passed in 0.01s'))\n"},
        ),
        "",
        "1 failed, 1 passed",
        {"passed": 1, "failed": 1},
        frozenset({"tests/test_a.py::test_two"}),
    ),
}


def _gate_yaml(args: str, rules: str = "") -> str:
    extra = ", ".join(json.dumps(a) for a in ["-q", "-p", "no:cacheprovider", *shlex.split(args)])
    return (
        f"tier: unit\n{rules}gates:\n  - name: shape\n    kind: pytest\n    timeout: {scaled_s(120)}\n"
        f"    run: {{paths: [tests], args: [{extra}]}}\n"
    )


def run_shape(tmp_path: Path, shape: Shape, rules: str = "") -> tuple[GateResult, str]:
    """Run the shape's project through the pytest gate; returns the gate result and pytest's output."""
    repo = RepoBuilder(tmp_path / "project")
    repo.commit({**shape.files, "pytest.ini": "[pytest]\n"}, "project")
    # its own temporary root: a pytest run cleans old numbered folders under the shared one while this
    # suite's other workers are using theirs
    args = f"{shape.args} --basetemp={shlex.quote(str(tmp_path / 'inner-tmp'))}"
    write_gates(repo, "unit", _gate_yaml(args, rules))
    result = run_tier(workspace(repo), TierOptions(tier="unit", python=PYTHON, use_cache=False))
    gate = result.gates[0]
    assert gate.log_path is not None
    return gate, Path(gate.log_path).read_text()


@pytest.mark.parametrize("name", list(SHAPES))
def test_counts_against_pytests_own_summary(tmp_path: Path, name: str) -> None:
    shape = SHAPES[name]
    gate, output = run_shape(tmp_path, shape)
    # pytest's own line, from its terminal reporter (the plugin); the printed one is the same text
    own = json.loads(Path(gate.log_path or "").with_suffix(".counts.json").read_text())["line"]
    assert own == shape.pytest_says, output[-2000:]
    assert any(line.strip().startswith(own + " in ") for line in output.splitlines())
    pytest_line = own
    counts = {k: v for k, v in gate.counts.model_dump().items() if v}
    assert counts == shape.counts, f"pytest: {pytest_line}; ds4sync: {gate.counts.summary()}"
    assert {f.node_id for f in gate.failures} == shape.failing
    summary = summary_counts(f"{own} in 0s")
    assert gate.counts.deselected == summary.get("deselected", 0)
    assert gate.counts.xpassed == summary.get("xpassed", 0)
    if not shape.folds:  # nothing to fold: every count is pytest's own
        for key in ("passed", "failed", "errors", "skipped", "xfailed"):
            assert getattr(gate.counts, key) == summary.get(key, 0), (key, pytest_line, gate.counts.summary())
    assert (gate.status == "passed") == (not gate.counts.failed and not gate.counts.errors)


def test_the_collection_error_is_a_failure_naming_the_file(tmp_path: Path) -> None:
    gate, _ = run_shape(tmp_path, SHAPES["collection error names the file"])
    assert gate.status == "failed"
    assert gate.failures[0].message.startswith("collection error in tests/test_broken.py")
    assert "no_such_module_here" in gate.failures[0].message


def test_a_teardown_error_is_attached_to_its_failing_test(tmp_path: Path) -> None:
    gate, _ = run_shape(tmp_path, SHAPES["failure then teardown error"])
    (failure,) = gate.failures
    assert failure.kind == "failure" and "also failed on teardown" in failure.message


def test_one_gated_model_failure_leaves_the_real_failure_real(tmp_path: Path) -> None:
    """The shipped unit tier's rules; one test hits the hub's gated repo, one fails for real after a 403 elsewhere."""
    rules = yaml.safe_load((ROOT / "gates" / "unit.yaml").read_text())["env_failures"]
    body = (
        "import httpx, httpx2\n"
        "from huggingface_hub.utils import hf_raise_for_status\n"
        "def test_gated():  # the hub client's own error for a gated repository, built from a response in memory\n"
        "    url = 'https://huggingface.co/meta-llama/x/resolve/main/c.json'\n"
        "    request = httpx2.Request('GET', url)\n"
        "    hf_raise_for_status(httpx2.Response(403, headers={'X-Error-Code': 'GatedRepo'}, request=request))\n"
        "def test_quoted():\n"
        "    assert 'ok' == 'Cannot access gated repo for url https://huggingface.co/meta-llama/x/resolve/main/c.json'\n"
        "def test_real():\n"
        "    response = httpx.Response(403, request=httpx.Request('GET', 'http://127.0.0.1:9/v1/models'))\n"
        "    response.raise_for_status()\n"
        "def test_wrong(): assert 1 + 1 == 3\n"
    )
    shape = Shape(_a(body), "", "4 failed", {})
    gate, _ = run_shape(tmp_path, shape, rules="env_failures: " + json.dumps(rules) + "\n")
    assert gate.status == "failed"
    assert (gate.counts.failed, gate.counts.env_only) == (3, 1)
    by_node = {f.node_id: f.env_category for f in gate.failures}
    assert by_node == {
        "tests/test_a.py::test_gated": "gated-model-403",
        "tests/test_a.py::test_quoted": None,  # an assertion quoting the hub's line is a real failure
        "tests/test_a.py::test_real": None,
        "tests/test_a.py::test_wrong": None,
    }
