"""The ``command`` kind: run an argv, compare its exit code, look for output patterns.

Example (vLLM's Docker metadata check)::

    - name: versions-json
      kind: command
      run: {argv: ["{python}", tools/generate_versions_json.py, --check], expect_exit: 0}

``{python}`` in argv is replaced by the target environment's interpreter. A failing
command whose output matches an environment-only rule makes the gate ``incomplete``.
"""

from __future__ import annotations

import re

from pydantic import Field

from ds4sync.core.model import FrozenModel, Regex
from ds4sync.gates.definition import Gate
from ds4sync.gates.envrules import classify_startup
from ds4sync.gates.kinds import GateContext
from ds4sync.models.gates_results import GateResult, TestCounts, TestFailure

TAIL_CHARS = 2000


class Spec(FrozenModel):
    """The ``run:`` section of a command gate.

    ``argv``: program and arguments (``{python}`` = target interpreter); ``expect_exit``:
    the exit code that means success; ``must_match`` / ``must_not_match``: regexes searched
    in the combined output.
    """

    argv: tuple[str, ...] = Field(min_length=1)
    expect_exit: int = 0
    must_match: tuple[Regex, ...] = ()
    must_not_match: tuple[Regex, ...] = ()


def run_gate(gate: Gate, ctx: GateContext) -> GateResult:
    """Run the command gate; passed when the exit code and every pattern check hold."""
    spec: Spec = gate.spec  # type: ignore[assignment]
    argv = [part.replace("{python}", ctx.python) for part in spec.argv]
    log = ctx.log_path(gate)
    run = ctx.start(gate, "command", argv, log_path=log)
    res = ctx.run_child(run, argv, log_path=log)
    if isinstance(res, GateResult):
        return res
    problems = check_output(spec, res.returncode, res.output)
    if not problems:
        return run.result("passed", f"exit {res.returncode}", counts=TestCounts(passed=1))
    text = "; ".join(problems)
    rule = classify_startup(gate.rules, log_text=res.output)
    failure = TestFailure(
        node_id=gate.name,
        message=f"{text}\n{res.output[-TAIL_CHARS:]}",
        env_category=rule.category if rule else None,
        env_rule=rule.name if rule else None,
    )
    if rule:
        return run.result("incomplete", f"{text} [{rule.category}]", counts=TestCounts(env_only=1), failures=(failure,))
    return run.result("failed", text, counts=TestCounts(failed=1), failures=(failure,))


def check_output(spec: Spec, returncode: int | None, output: str) -> list[str]:
    """What is wrong with a finished command (empty when it passed)."""
    problems = []
    if returncode != spec.expect_exit:
        problems.append(f"exit {returncode}, expected {spec.expect_exit}")
    problems += [f"output lacks /{p}/" for p in spec.must_match if not re.search(p, output, re.MULTILINE)]
    problems += [f"output has /{p}/" for p in spec.must_not_match if re.search(p, output, re.MULTILINE)]
    return problems
