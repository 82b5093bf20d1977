"""The ``pytest`` kind: run pytest in the target environment, read JUnit XML, classify, rerun.

Command shape (the write-up's form, then what ds4sync adds to read results)::

    <python> -m pytest <args> [--maxfail=N] <paths> [--deselect=X ...] [-k EXPR] [-m EXPR] [-n N]
        --junitxml=<log_dir>/<tier>-<name>.xml -o junit_family=xunit1

Failed tests are rerun by node id ``rerun_failures`` times; a test that then passes is
flaky (counted apart, never as a failure or a pass). A failure whose text matches an
environment-only rule counts in ``env_only`` and makes the gate ``incomplete``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ds4sync.core import proc
from ds4sync.core.files import redact_file
from ds4sync.core.model import FrozenModel, updated
from ds4sync.core.redact import is_secret_name
from ds4sync.gates import pytest_counts
from ds4sync.gates.definition import EnvFailureRule, Gate
from ds4sync.gates.envrules import classify, classify_startup
from ds4sync.gates.junit import CaseResult, JUnitError, read_junit, summary_counts
from ds4sync.gates.kinds import GateContext, GateRun
from ds4sync.models.gates_details import PytestDetails
from ds4sync.models.gates_results import GateResult, GateStatus, TestCounts, TestFailure, cause_line

# pytest's exit codes: https://docs.pytest.org/en/stable/reference/exit-codes.html
_EXIT_MEANING = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}
_PROGRESS = re.compile(r"^(?:\S+\.py )?([.FEsxX]+)\s*(?:\[\s*\d+%\])?$")
MAX_MESSAGE = 2000
SLOWEST = 10


class Deselect(FrozenModel):
    """One ``--deselect`` with the reason it is left out (``needs a CUDA GPU``), shown in the result."""

    node: str
    reason: str


class Spec(FrozenModel):
    """The ``run:`` section of a pytest gate.

    ``paths``: test files, folders or node ids; ``k``/``m``: pytest's ``-k``/``-m``
    expressions; ``deselect``: node ids or paths for ``--deselect`` (or ``{node, reason}``);
    ``maxfail``; ``workers``: ``-n`` for pytest-xdist; ``args``: inserted right after
    ``-m pytest``; ``python``: interpreter for this gate (default: the target environment's).
    ``missing_paths``: ``error`` (default: pytest fails on a path the tree lacks) or ``skip``
    (such paths are left out and named in the result's reason and details; a gate that then
    passes is ``incomplete``, never ``passed``; none left: ``skipped``), for a suite run on
    trees older than some of its files.
    """

    paths: tuple[str, ...] = Field(min_length=1)
    k: str | None = None
    m: str | None = None
    deselect: tuple[str | Deselect, ...] = ()
    missing_paths: Literal["error", "skip"] = "error"
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
    argv += [f"--deselect={item if isinstance(item, str) else item.node}" for item in spec.deselect]
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
    missing = _missing_paths(spec, ctx.cwd)
    if missing:
        kept = tuple(p for p in spec.paths if p not in missing)
        if not kept:
            return _no_path_here(gate, ctx, spec, missing)
        spec = updated(spec, paths=kept)
    run, res, xml, counts_json = _run_pytest(gate, ctx, spec, python, missing)
    if res.timed_out:
        return _stopped(gate, res, xml, ctx, run)
    # pytest wrote it: a failure text can quote a secret
    redact_file(xml, extra=tuple(v for k, v in run.env_overrides.items() if is_secret_name(k)))
    try:
        cases = read_junit(xml)
    except JUnitError as exc:
        said = cause_line(res.output)  # e.g. "No module named pytest": why no XML was written
        return run.result("error", f"{exc} (pytest exit {res.returncode}{': ' + said if said else ''})")
    summary, xpassed = pytest_summary(counts_json, res.output)
    failures, counts = _tally(gate, cases, summary, xpassed)
    failures, flaky = _rerun_failures(gate, ctx, spec, python, failures, cases)
    counts = _with_real_failures(counts, failures, flaky)
    status, reason = _status(res.returncode, counts, cases, startup=_startup_rule(gate, res.output, cases))
    if missing:
        # a partial suite is never a green: passed becomes incomplete, the missing paths are named
        reason += f"; {len(missing)} of {len(spec.paths) + len(missing)} test path(s) not in this tree"
        status = "incomplete" if status == "passed" else status
    slowest = sorted(cases, key=lambda c: c.duration_s, reverse=True)[:SLOWEST]
    run.duration_s = time.monotonic() - start
    return run.result(
        status,
        reason,
        counts=counts,
        failures=failures,
        flaky=flaky,
        details={"tests": len(cases), "slowest": tuple((c.node_id, round(c.duration_s, 3)) for c in slowest)},
    )


def _missing_paths(spec: Spec, cwd: Path) -> list[str]:
    """The test paths this tree lacks, when the spec says to leave them out (``missing_paths: skip``); else []."""
    if spec.missing_paths != "skip":
        return []
    return [p for p in spec.paths if not (cwd / p.split("::")[0]).exists()]


def _no_path_here(gate: Gate, ctx: GateContext, spec: Spec, missing: list[str]) -> GateResult:
    """The result of a gate none of whose test paths is in this tree: ``not-run``, the paths named."""
    return GateResult(
        name=gate.name,
        tier=gate.tier,
        kind="pytest",
        required=gate.definition.required,
        status="not-run",  # no test ran: never a green, whatever the definition asks
        reason=f"none of its {len(spec.paths)} test path(s) is in this tree",
        cwd=str(ctx.cwd),
        details=PytestDetails(missing_paths=tuple(missing)),
    )


def _run_pytest(
    gate: Gate, ctx: GateContext, spec: Spec, python: str, missing: list[str]
) -> tuple[GateRun, proc.ProcResult, Path, Path]:
    """Run pytest once with ds4sync's JUnit and counts plugin; the run so far, the child's result, and the
    JUnit XML and counts file it was told to write."""
    xml = ctx.log_path(gate, "xml")
    log = ctx.log_path(gate)
    base = build_argv(spec, python)
    argv = [*base, f"--junitxml={xml}", "-o", "junit_family=xunit1", "-p", pytest_counts.MODULE]
    run = ctx.start(gate, "pytest", argv, log_path=log, display=shlex.join(base))
    run.note(junit=str(xml))
    env = run.env_overrides
    counts_json = ctx.log_path(gate, "counts.json")
    res = ctx.run(argv, gate=gate, log_path=log, env_overrides={**env, **_plugin_env(counts_json, env)})
    run.duration_s = res.duration_s
    reasons = {d.node: d.reason for d in spec.deselect if isinstance(d, Deselect)}
    run.note(missing_paths=tuple(missing), deselected_reasons=reasons)
    return run, res, xml, counts_json


def _with_real_failures(counts: TestCounts, failures: list[TestFailure], flaky: list[str]) -> TestCounts:
    """``counts`` with ``failed`` and ``errors`` from the failures left after reruns (environment-only ones
    are counted apart), and ``flaky`` from the tests that passed on a rerun."""
    real = [f for f in failures if not f.env_category]
    return updated(
        counts,
        failed=sum(1 for f in real if f.kind == "failure"),
        errors=sum(1 for f in real if f.kind == "error"),
        flaky=len(flaky),
    )


def _rerun_failures(
    gate: Gate, ctx: GateContext, spec: Spec, python: str, failures: list[TestFailure], cases: list[CaseResult]
) -> tuple[list[TestFailure], list[str]]:
    """The failures left after up to ``rerun_failures`` reruns of the real (not environment) ones, and the
    flaky node ids: passed by pytest-rerunfailures within the run, or passed again on a rerun here."""
    flaky = [c.node_id for c in cases if c.flaky and c.outcome == "passed"]  # pytest-rerunfailures
    real = [f for f in failures if not f.env_category]
    for attempt in range(1, gate.definition.rerun_failures + 1):
        if not real:
            break
        passed_now = _rerun(gate, ctx, spec, python, tuple(f.node_id for f in real), attempt)
        flaky += [f.node_id for f in real if f.node_id in passed_now]
        real = [f for f in real if f.node_id not in passed_now]
    return [f for f in failures if f.node_id not in flaky], flaky


def _stopped(gate: Gate, res: Any, xml: Any, ctx: GateContext, run: GateRun) -> GateResult:
    """A run stopped for its timeout: the tests that finished, from the JUnit pytest wrote on the SIGINT of
    the stop routine, and the test that was still running, from pytest's KeyboardInterrupt line."""
    what = f"timed out after {gate.definition.timeout:g}s"
    redact_file(xml)
    try:
        cases = [c for c in read_junit(xml) if c.node_id]  # the interrupted test has an empty <testcase/>
    except JUnitError:
        cases = []
    failures, counts = _tally(gate, cases, {})
    hung = hung_test(res.output, ctx.cwd)
    failures.append(TestFailure(node_id=hung or "(unknown test)", kind="error", message=f"{what} while this test ran"))
    real = [f for f in failures if not f.env_category]
    counts = updated(counts, errors=sum(f.kind == "error" for f in real), failed=sum(f.kind == "failure" for f in real))
    reason = f"{what}; still running: {hung or 'unknown test'} ({len(cases)} tests finished)"
    return run.result("error", reason, counts=counts, failures=failures, details={"tests": len(cases)})


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


def _plugin_env(counts_json: Path, env: dict[str, str]) -> dict[str, str]:
    """PYTHONPATH (the gate's own, else the inherited one, after ours) and the file the plugin writes."""
    folder = counts_json.parent / "_pytest_plugin"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(pytest_counts.__file__, folder / f"{pytest_counts.MODULE}.py")
    inherited = env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    path = os.pathsep.join(p for p in (str(folder), inherited) if p)
    return {"PYTHONPATH": path, pytest_counts.ENV: str(counts_json)}


def pytest_summary(counts_json: Path, output: str) -> tuple[dict[str, int], frozenset[str]]:
    """pytest's own counts and xpassed node ids: from the plugin's file, else from the printed summary line."""
    try:
        data = json.loads(counts_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    line = data.get("line") if isinstance(data, dict) else None
    xpassed = frozenset(data.get("xpassed") or ()) if isinstance(data, dict) else frozenset()
    if isinstance(line, str):
        return summary_counts(f"{line} in 0s"), xpassed
    return summary_counts(output), xpassed


def _tally(
    gate: Gate, cases: list[CaseResult], summary: dict[str, int], xpassed_ids: frozenset[str] = frozenset()
) -> tuple[list[TestFailure], TestCounts]:
    """Counts of logical tests; each failure is classified on its own message and traceback only.

    ``summary`` is pytest's own summary: it gives ``deselected``, and ``xpassed`` when the
    xpassed node ids are not known (an xpass is a plain passing ``<testcase>`` in JUnit).
    """
    failures: list[TestFailure] = []
    tally = dict.fromkeys(("passed", "skipped", "xfailed", "xpassed", "flaky", "env_only"), 0)
    for case in cases:
        if case.outcome == "passed" and case.node_id in xpassed_ids:
            tally["xpassed"] += 1
            continue
        if case.outcome in ("passed", "skipped", "xfailed"):
            tally["flaky" if case.flaky and case.outcome == "passed" else case.outcome] += 1
            continue
        rule = classify(gate.rules, failure_text=_case_text(case))
        tally["env_only"] += rule is not None
        failures.append(
            TestFailure(
                node_id=case.node_id,
                kind="error" if case.outcome == "error" else "failure",
                message=_message(case)[:MAX_MESSAGE],
                duration_s=case.duration_s,
                env_category=rule.category if rule else None,
                env_rule=rule.name if rule else None,
            )
        )
    unnamed = 0 if xpassed_ids else min(summary.get("xpassed", 0), tally["passed"])
    xpassed = tally["xpassed"] + unnamed
    counts = TestCounts(
        passed=tally["passed"] - unnamed,
        skipped=tally["skipped"],
        xfailed=tally["xfailed"],
        xpassed=xpassed,
        flaky=tally["flaky"],
        deselected=summary.get("deselected", 0),
        env_only=tally["env_only"],
    )
    return failures, counts


def _case_text(case: CaseResult) -> str:
    """What an environment-only rule may match for one test: its own messages and traceback."""
    return "\n".join([case.message, case.text, *case.attached])


def _message(case: CaseResult) -> str:
    text = case.message or case.text
    if case.collection:
        errors = [line[1:].strip() for line in case.text.splitlines() if line.startswith("E ")]
        text = f"collection error in {case.node_id}: {errors[-1] if errors else case.text.strip()}"
    if case.attached:
        text += "".join(f"; also {note}" for note in case.attached)
    return text


def _startup_rule(gate: Gate, output: str, cases: list[CaseResult]) -> EnvFailureRule | None:
    """The rule matching the gate's own start-up failure (pytest ran no test), else None."""
    return classify_startup(gate.rules, log_text=output) if not cases else None


def _rerun(gate: Gate, ctx: GateContext, spec: Spec, python: str, node_ids: tuple[str, ...], attempt: int) -> set[str]:
    """Node ids that passed when rerun on their own."""
    xml = ctx.log_path(gate, f"rerun{attempt}.xml")
    argv = [*build_argv(spec, python, node_ids=node_ids), f"--junitxml={xml}", "-o", "junit_family=xunit1"]
    res = ctx.run(argv, gate=gate, log_path=ctx.log_path(gate, f"rerun{attempt}.log"))
    redact_file(xml)
    if res.timed_out:
        return set()
    try:
        return {case.node_id for case in read_junit(xml) if case.outcome in ("passed", "xfailed")}
    except JUnitError:
        return set()


def _status(
    returncode: int | None, counts: TestCounts, cases: list[CaseResult], *, startup: EnvFailureRule | None = None
) -> tuple[GateStatus, str]:
    if counts.failed or counts.errors:
        return "failed", counts.summary()
    if startup is not None and returncode not in (0, 5):
        return "incomplete", f"the gate could not start: {startup.category} ({startup.name}), pytest exit {returncode}"
    if returncode == 1 and not counts.env_only and not counts.flaky:
        return "error", "pytest exited 1 but the JUnit XML has no failing test"
    if returncode in (3, 4) or (returncode == 2 and not cases):
        return "error", f"pytest exit {returncode} ({_EXIT_MEANING[returncode]})"
    if not cases:
        return "error", "no tests ran" + (f" ({counts.deselected} deselected)" if counts.deselected else "")
    if counts.env_only:
        return "incomplete", counts.summary()
    if returncode not in (0, 1):  # e.g. exit 1 with no failing case is possible after a flaky rerun
        return "error", f"pytest exit {returncode} ({_EXIT_MEANING.get(returncode or 0, 'unknown')})"
    if counts.tests == counts.skipped:  # every test skipped itself: nothing checked, never a green
        return "not-run", f"every test was skipped ({counts.summary()}): nothing checked (its log says why)"
    return "passed", counts.summary()
