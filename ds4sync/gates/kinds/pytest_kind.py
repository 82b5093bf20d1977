"""The ``pytest`` kind: run pytest in the target environment, read JUnit XML, classify, rerun.

Command shape (the write-up's form, then what ds4sync adds to read results)::

    <python> -m pytest <args> [--maxfail=N] <paths> [--deselect=X ...] [-k EXPR] [-m EXPR] [-n N]
        --junitxml=<log_dir>/<tier>-<name>.xml -o junit_family=xunit1

Failed tests are rerun by node id ``rerun_failures`` times; a test that then passes is
flaky (counted apart, never as a failure or a pass). A failure whose text matches an
environment-only rule counts in ``env_only`` and makes the gate ``incomplete``.
"""

from __future__ import annotations

import re
import shlex
import time
from typing import Any

from pydantic import Field

from ds4sync.core.files import redact_file
from ds4sync.core.model import FrozenModel
from ds4sync.core.redact import is_secret_name
from ds4sync.gates.definition import Gate
from ds4sync.gates.envrules import classify
from ds4sync.gates.junit import CaseResult, JUnitError, read_junit, summary_counts
from ds4sync.gates.kinds import GateContext
from ds4sync.gates.model import GateResult, GateStatus, TestCounts, TestFailure

# pytest's exit codes: https://docs.pytest.org/en/stable/reference/exit-codes.html
_EXIT_MEANING = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}
_PROGRESS = re.compile(r"^(?:\S+\.py )?([.FEsxX]+)\s*(?:\[\s*\d+%\])?$")
MAX_MESSAGE = 2000
SLOWEST = 10


class Spec(FrozenModel):
    """The ``run:`` section of a pytest gate.

    ``paths``: test files, folders or node ids; ``k``/``m``: pytest's ``-k``/``-m``
    expressions; ``deselect``: node ids or paths for ``--deselect``; ``maxfail``;
    ``workers``: ``-n`` for pytest-xdist; ``args``: inserted right after ``-m pytest``;
    ``python``: interpreter for this gate (default: the target environment's).
    """

    paths: tuple[str, ...] = Field(min_length=1)
    k: str | None = None
    m: str | None = None
    deselect: tuple[str, ...] = ()
    maxfail: int | None = Field(default=None, ge=1)
    workers: int | str | None = None
    args: tuple[str, ...] = ("-q",)
    python: str | None = None


def build_argv(spec: Spec, python: str, *, node_ids: tuple[str, ...] | None = None) -> list[str]:
    """The pytest argv without ds4sync's JUnit options; ``node_ids`` replaces paths and selection (reruns)."""
    argv = [python, "-m", "pytest", *spec.args]
    if node_ids is not None:
        return [*argv, *node_ids]
    if spec.maxfail:
        argv.append(f"--maxfail={spec.maxfail}")
    argv += list(spec.paths)
    argv += [f"--deselect={item}" for item in spec.deselect]
    if spec.k:
        argv += ["-k", spec.k]
    if spec.m:
        argv += ["-m", spec.m]
    if spec.workers is not None:
        argv += ["-n", str(spec.workers)]
    return argv


def progress_count(line: str) -> int:
    """How many test outcomes one line of pytest's progress output shows (``..F.s [ 40%]`` -> 5)."""
    match = _PROGRESS.match(line.strip())
    return len(match.group(1)) if match else 0


def run_gate(gate: Gate, ctx: GateContext) -> GateResult:
    """Run one pytest gate and return its result (never raises for test failures or bad JUnit)."""
    spec: Spec = gate.spec  # type: ignore[assignment]
    start = time.monotonic()
    python = spec.python or ctx.python
    xml = ctx.log_path(gate, "xml")
    log = ctx.log_path(gate)
    base = build_argv(spec, python)
    argv = [*base, f"--junitxml={xml}", "-o", "junit_family=xunit1"]
    env = ctx.env_overrides(gate)
    res = ctx.run(argv, gate=gate, log_path=log, env_overrides=env)
    common: dict[str, Any] = dict(
        name=gate.name,
        tier=gate.tier,
        kind="pytest",
        required=gate.definition.required,
        command=tuple(argv),
        cwd=str(ctx.cwd),
        env_overrides=env,
        devices=ctx.devices,
        log_path=str(log),
        duration_s=res.duration_s,
        details={"display_command": shlex.join(base), "junit": str(xml)},
    )
    if res.timed_out or res.interrupted:
        return _stopped(gate, res, xml, ctx, common)
    # pytest wrote it: a failure text can quote a secret
    redact_file(xml, extra=tuple(v for k, v in env.items() if is_secret_name(k)))
    try:
        cases = read_junit(xml)
    except JUnitError as exc:
        return GateResult(status="error", reason=f"{exc} (pytest exit {res.returncode})", **common)
    deselected = summary_counts(res.output).get("deselected", 0)
    failures, counts = _tally(gate, cases, res.output, deselected)
    flaky: list[str] = []
    real = [f for f in failures if not f.env_category]
    for attempt in range(1, gate.definition.rerun_failures + 1):
        if not real:
            break
        passed_now = _rerun(gate, ctx, spec, python, tuple(f.node_id for f in real), attempt)
        flaky += [f.node_id for f in real if f.node_id in passed_now]
        real = [f for f in real if f.node_id not in passed_now]
    failures = [f for f in failures if f.node_id not in flaky]
    counts = counts.model_copy(
        update={
            "failed": sum(1 for f in real if f.kind == "failure"),
            "errors": sum(1 for f in real if f.kind == "error"),
            "flaky": len(flaky),
        }
    )
    status, reason = _status(res.returncode, counts, cases)
    common["details"]["tests"] = len(cases)
    slowest = sorted(cases, key=lambda c: c.duration_s, reverse=True)[:SLOWEST]
    common["details"]["slowest"] = [[c.node_id, round(c.duration_s, 3)] for c in slowest]
    common["duration_s"] = time.monotonic() - start
    return GateResult(
        status=status, reason=reason, counts=counts, failures=tuple(failures), flaky=tuple(flaky), **common
    )


def _stopped(gate: Gate, res: Any, xml: Any, ctx: GateContext, common: dict[str, Any]) -> GateResult:
    """A run stopped for its timeout (or Ctrl-C): the tests that finished, from the JUnit pytest
    wrote on SIGINT, and the test that was still running, from pytest's KeyboardInterrupt line."""
    what = f"timed out after {gate.definition.timeout:g}s" if res.timed_out else "interrupted"
    redact_file(xml)
    try:
        cases = [c for c in read_junit(xml) if c.node_id]  # the interrupted test has an empty <testcase/>
    except JUnitError:
        cases = []
    failures, counts = _tally(gate, cases, res.output, 0)
    hung = hung_test(res.output, ctx.cwd)
    failures.append(TestFailure(node_id=hung or "(unknown test)", kind="error", message=f"{what} while this test ran"))
    counts = counts.model_copy(
        update={"errors": counts.errors + 1, "failed": sum(f.kind == "failure" for f in failures)}
    )
    common["details"]["tests"] = len(cases)
    reason = f"{what}; still running: {hung or 'unknown test'} ({len(cases)} tests finished)"
    return GateResult(status="error", reason=reason, counts=counts, failures=tuple(failures), **common)


_INTERRUPTED_AT = re.compile(r"^(?P<path>\S.*?\.py):(?P<line>\d+): KeyboardInterrupt$", re.MULTILINE)


def hung_test(output: str, cwd: Any) -> str | None:
    """The node id of the test pytest was running when it got SIGINT (``path::Class::test``), from the
    ``<file>:<line>: KeyboardInterrupt`` line it prints; ``file:line`` when that line is not inside a test."""
    import ast
    from pathlib import Path

    found = list(_INTERRUPTED_AT.finditer(output))
    if not found:
        return None
    path, line = Path(found[-1]["path"]), int(found[-1]["line"])
    try:
        rel = path.resolve().relative_to(Path(cwd).resolve()).as_posix()
    except ValueError:
        rel = path.as_posix()
    try:
        tree = ast.parse((path if path.is_absolute() else Path(cwd) / path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return f"{rel}:{line}"
    chain: list[str] = []
    body = tree.body
    while True:
        inner = next(
            (
                node
                for node in body
                if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and node.lineno <= line <= (node.end_lineno or node.lineno)
            ),
            None,
        )
        if inner is None:
            break
        chain.append(inner.name)
        if not isinstance(inner, ast.ClassDef):
            break
        body = inner.body
    if not chain or not chain[-1].startswith("test"):
        return f"{rel}:{line}"
    return "::".join([rel, *chain])


def _tally(gate: Gate, cases: list[CaseResult], log_text: str, deselected: int) -> tuple[list[TestFailure], TestCounts]:
    failures: list[TestFailure] = []
    passed = skipped = env_only = 0
    for case in cases:
        if case.outcome == "passed":
            passed += 1
        elif case.outcome == "skipped":
            skipped += 1
        else:
            rule = classify(gate.rules, failure_text=f"{case.message}\n{case.text}", log_text=log_text)
            env_only += rule is not None
            failures.append(
                TestFailure(
                    node_id=case.node_id,
                    kind="error" if case.outcome == "error" else "failure",
                    message=(case.message or case.text)[:MAX_MESSAGE],
                    duration_s=case.duration_s,
                    env_category=rule.category if rule else None,
                    env_rule=rule.name if rule else None,
                )
            )
    counts = TestCounts(passed=passed, skipped=skipped, deselected=deselected, env_only=env_only)
    return failures, counts


def _rerun(gate: Gate, ctx: GateContext, spec: Spec, python: str, node_ids: tuple[str, ...], attempt: int) -> set[str]:
    """Node ids that passed when rerun on their own."""
    xml = ctx.log_path(gate, f"rerun{attempt}.xml")
    argv = [*build_argv(spec, python, node_ids=node_ids), f"--junitxml={xml}", "-o", "junit_family=xunit1"]
    res = ctx.run(argv, gate=gate, log_path=ctx.log_path(gate, f"rerun{attempt}.log"))
    redact_file(xml)
    if res.timed_out or res.interrupted:
        return set()
    try:
        return {case.node_id for case in read_junit(xml) if case.outcome == "passed"}
    except JUnitError:
        return set()


def _status(returncode: int | None, counts: TestCounts, cases: list[CaseResult]) -> tuple[GateStatus, str]:
    if counts.failed or counts.errors:
        return "failed", counts.summary()
    if returncode in (3, 4) or (returncode == 2 and not cases):
        return "error", f"pytest exit {returncode} ({_EXIT_MEANING[returncode]})"
    if not cases:
        return "error", "no tests ran" + (f" ({counts.deselected} deselected)" if counts.deselected else "")
    if counts.env_only:
        return "incomplete", counts.summary()
    if returncode not in (0, 1):  # e.g. exit 1 with no failing case is possible after a flaky rerun
        return "error", f"pytest exit {returncode} ({_EXIT_MEANING.get(returncode or 0, 'unknown')})"
    return "passed", counts.summary()
