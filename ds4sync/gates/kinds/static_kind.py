"""The ``static`` kind: built-in checks over the fork's delta against upstream.

- ``ruff-check`` / ``ruff-format``: ``ruff check`` and ``ruff format --check`` on the
  Python files that differ between the base (the upstream commit) and the work tree,
  not the whole tree; ruff comes from the target environment (``{python} -m ruff``).
  ``ruff check`` writes ``--output-format json`` to a file next to the log, which is read
  as data (one failure per violation), never parsed out of the terminal text.
- ``diff-check``: ``git diff --check <base>`` (whitespace errors, conflict markers).
- ``pip-check``: ``pip check`` (or ``uv pip check --python``) in the target environment.

The base is ``run.base`` or the runner's base ref (the run's upstream SHA, else
``--changed-since``); without one the delta checks end in ``error``. A delta check with no file
to check is ``not-run``, never ``passed``: it proved nothing (an empty delta most often means the
base is the fork's own commit, e.g. an upstream ref that names the fork's branch).
"""

from __future__ import annotations

import json
import re
import shlex
import time
from typing import Literal

from ds4sync.core.errors import GitError, ToolMissingError
from ds4sync.core.git import GitRepo
from ds4sync.core.model import FrozenModel, updated
from ds4sync.gates.definition import Gate
from ds4sync.gates.kinds import GateContext, GateRun
from ds4sync.models.gates_results import GateResult, GateStatus, TestCounts, TestFailure

Check = Literal["ruff-check", "ruff-format", "diff-check", "pip-check"]
# "Would reformat: PATH" (ruff <= 0.14) or "unformatted: ..." then " --> PATH:LINE:COL" (newer ruff).
_REFORMAT = re.compile(r"^(?:Would reformat: (?P<path>.+)|--> (?P<arrow>[^:]+):\d+:\d+)$")
_DIFF_CHECK = re.compile(r"^(?P<path>[^+\s][^:]*):(?P<line>\d+): (?P<msg>.+)$")


class Spec(FrozenModel):
    """The ``run:`` section of a static gate.

    ``check``: which built-in; ``base``: the ref the delta is taken against (default: the
    runner's base ref); ``suffixes``: which files count as Python; ``ruff``: argv prefix of
    ruff; ``ruff_version``: the version the fork pins (another version found is an ``error``);
    ``installer``: ``pip`` or ``uv`` for pip-check.
    """

    check: Check
    base: str | None = None
    suffixes: tuple[str, ...] = (".py", ".pyi")
    ruff: tuple[str, ...] = ("{python}", "-m", "ruff")
    ruff_version: str | None = None
    installer: Literal["pip", "uv"] = "pip"


def run_gate(gate: Gate, ctx: GateContext) -> GateResult:
    """Run one built-in static check."""
    spec: Spec = gate.spec  # type: ignore[assignment]
    start = time.monotonic()
    run = ctx.start(gate, "static")
    try:
        result = _CHECKS[spec.check](gate, ctx, spec, run)
    except (GitError, ToolMissingError) as exc:
        result = run.result("error", exc.one_line())
    return updated(result, duration_s=time.monotonic() - start)


def delta_files(repo: GitRepo, base: str, suffixes: tuple[str, ...]) -> list[str]:
    """Files that exist now and differ from ``base`` (committed or not) with one of ``suffixes``."""
    names = repo.worktree_changed_names(base, diff_filter="ACMR", renames=False)
    return [p for p in names if p.endswith(suffixes) and (repo.path / p).is_file()]


def _base(ctx: GateContext, spec: Spec) -> str:
    base = spec.base or ctx.base_ref
    if not base:
        raise GitError(
            "no base ref for the fork's delta",
            where="static gate",
            fix="pass --changed-since REF (e.g. the upstream commit) or run inside a sync run",
        )
    return base


def _ruff(gate: Gate, ctx: GateContext, spec: Spec, run: GateRun) -> GateResult:
    base = _base(ctx, spec)
    prefix = [p.replace("{python}", ctx.python) for p in spec.ruff]
    tool = _tool_version(gate, ctx, prefix, "ruff", pinned=spec.ruff_version)  # first: no tool, no pass
    repo = GitRepo(ctx.cwd)
    files = delta_files(repo, base, spec.suffixes)
    if not files:
        run.note(tool=tool, base=base, files=0)
        what = f"{tool}: no Python file of the fork's delta to check"
        return _nothing_to_check(run, repo, base, what, suffixes=spec.suffixes)
    report = ctx.log_path(gate, "ruff.json")
    sub = (
        ["check", "--no-fix", "--output-format", "json", "--output-file", str(report)]
        if spec.check == "ruff-check"
        else ["format", "--check"]
    )
    argv = [*prefix, *sub, *files]
    log = ctx.log_path(gate)
    res = ctx.run(argv, gate=gate, log_path=log)
    run.ran(argv, log, display=shlex.join([*prefix, *sub]) + f" <{len(files)} changed files>")
    run.note(tool=tool, base=base, files=len(files))
    if res.timed_out or res.returncode not in (0, 1):
        why = "timed out" if res.timed_out else f"ruff exit {res.returncode}: {res.output.strip()[-300:]}"
        return run.result("error", why)
    if spec.check == "ruff-check":
        try:
            failures = ruff_failures(report.read_text(encoding="utf-8"), root=str(ctx.cwd))
        except (OSError, ValueError) as exc:
            why = f"ruff wrote no readable JSON report ({type(exc).__name__}: {exc}); exit {res.returncode}"
            return run.result("error", why)
    else:
        failures = _unformatted(res.output)
    bad_files = {f.node_id.split(":", 1)[0] for f in failures}
    counts = TestCounts(passed=len(files) - len(bad_files), failed=len(bad_files))
    if res.returncode == 1 and not failures:
        failures = (TestFailure(node_id=gate.name, message=res.output.strip()[-2000:]),)
    status: GateStatus = "failed" if res.returncode == 1 else "passed"
    reason = f"{tool}: {len(files)} changed Python files" + (f", {len(failures)} problems" if failures else " clean")
    if failures and status == "failed":  # the headline names the worst finding (they come worst first)
        reason += f"; worst: {failures[0].node_id} {failures[0].message.splitlines()[0][:160]}"
    return run.result(status, reason, counts=counts, failures=failures)


def _nothing_to_check(
    run: GateRun, repo: GitRepo, base: str, what: str, *, suffixes: tuple[str, ...] = ()
) -> GateResult:
    """A delta check that found nothing to check: ``not-run`` (nothing proven), saying why and what to do."""
    changed = len(repo.worktree_changed_names(base, diff_filter="ACMR", renames=False))
    if changed:
        why = f"{changed} files differ from {base[:12]}, none ending in {' or '.join(suffixes)}"
        fix = "drop the check from this tier if the fork never changes such files"
    else:
        why = f"nothing differs from {base[:12]}: the base is the fork itself, not upstream"
        fix = (
            "make the base upstream's commit: upstream.ref and upstream.remote in ds4sync.yaml, "
            "--changed-since UPSTREAM_COMMIT, or the gate's run.base"
        )
    return run.result("not-run", f"{what}: {why}; nothing checked ({fix})")


def _tool_version(gate: Gate, ctx: GateContext, prefix: list[str], name: str, *, pinned: str | None) -> str:
    """``"<name> <version>"`` as the tool itself prints it, run exactly as the gate will run it.

    A check whose tool never ran must not count files as passing: a target environment without the tool (a
    build's venv has no linters) is an ``error`` naming the tool and the command, never a pass.

    Raises:
        ToolMissingError: the tool does not run, does not say its name, or is not the ``pinned`` version.
    """
    res = ctx.run([*prefix, "--version"], gate=gate, log_path=ctx.log_path(gate, f"{name}-version.log"))
    words = res.output.strip().split()
    if res.timed_out or res.returncode != 0 or len(words) < 2 or words[0] != name:
        said = res.output.strip().splitlines()[-1:] or [f"exit {res.returncode}"]
        raise ToolMissingError(
            f"{name} does not run as `{shlex.join(prefix)}` ({said[0][-200:]})",
            where=f"gate {gate.name}",
            fix=f"run the gate where {name} is (environment: tools with {name}==VERSION), or set its run.{name}",
        )
    if pinned is not None and words[1] != pinned:
        raise ToolMissingError(
            f"{name} {words[1]} found where the profile pins {pinned}",
            where=f"gate {gate.name}",
            fix=f"install {name}=={pinned} in that environment (`{shlex.join(prefix)}`)",
        )
    return f"{name} {words[1]}"


def _diff_check(gate: Gate, ctx: GateContext, spec: Spec, run: GateRun) -> GateResult:
    base = _base(ctx, spec)
    repo = GitRepo(ctx.cwd)
    start = time.monotonic()
    run.note(base=base)
    files = repo.worktree_changed_names(base, diff_filter="ACMR", renames=False)
    if not files:
        return _nothing_to_check(run, repo, base, "no file of the fork's delta to check")
    check = repo.diff_check(base)
    status, out, err = check.status, check.out, check.err
    log = ctx.log_path(gate)
    log.write_text(out + err)
    failures = _failures(_DIFF_CHECK, out)
    run.ran(check.command, log, display=f"git diff --check {base}")
    run.note(files=len(files))
    run.duration_s = time.monotonic() - start
    if status == 0:
        reason = f"{len(files)} changed files: no whitespace errors or conflict markers"
        return run.result("passed", reason, counts=TestCounts(passed=len(files)))
    return run.result("failed", f"{len(failures)} problems", counts=TestCounts(failed=len(failures)), failures=failures)


def _pip_check(gate: Gate, ctx: GateContext, spec: Spec, run: GateRun) -> GateResult:
    argv = (
        [ctx.python, "-m", "pip", "check"]
        if spec.installer == "pip"
        else ["uv", "pip", "check", "--python", ctx.python]
    )
    log = ctx.log_path(gate)
    res = ctx.run(argv, gate=gate, log_path=log)
    run.ran(argv, log)
    if res.timed_out:
        return run.result("error", "timed out")
    if res.returncode == 0:
        return run.result(
            "passed", res.output.strip().splitlines()[-1] if res.output.strip() else "ok", counts=TestCounts(passed=1)
        )
    lines = [line for line in res.output.splitlines() if line.strip()]
    failures = tuple(TestFailure(node_id=line.split(" ", 1)[0], message=line) for line in lines[:200])
    return run.result(
        "failed", f"{len(lines)} incompatible requirements", counts=TestCounts(failed=len(lines)), failures=failures
    )


def _failures(pattern: re.Pattern[str], output: str) -> tuple[TestFailure, ...]:
    found = []
    for line in output.splitlines():
        match = pattern.match(line.strip())
        if match:
            where = ":".join(match.group(g) for g in ("path", "line", "col") if g in match.groupdict())
            found.append(TestFailure(node_id=where, message=match.groupdict().get("msg") or line))
    return tuple(found)


def ruff_failures(text: str, *, root: str) -> tuple[TestFailure, ...]:
    """One failure per violation in ruff's ``--output-format json`` report (``path:line:col``, ``CODE message``),
    the most severe first (undefined names before import order: see :data:`_SEVERITY_PREFIXES`).

    Raises:
        ValueError: the text is not ruff's JSON (a list of violations with filename and location).
    """
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("not a list of violations")
    found = []
    prefix = root.rstrip("/") + "/"
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("location"), dict):
            raise ValueError(f"not a ruff violation: {str(item)[:80]}")
        path = str(item.get("filename", ""))
        path = path[len(prefix) :] if path.startswith(prefix) else path
        where = f"{path}:{item['location'].get('row', 0)}:{item['location'].get('column', 0)}"
        code = item.get("code") or "syntax-error"
        found.append(TestFailure(node_id=where, message=f"{code} {item.get('message', '')}".strip()))
    return tuple(sorted(found, key=lambda f: _severity(f.message.split(" ", 1)[0])))


#: ruff codes by how surely they mean broken code, worst first: syntax errors and undefined names break at import
#: or call time (E9, F821-F823, F63/F7 misuse); then the other pyflakes findings;
#: then bug-prone patterns; style (E/W), import order (I) and upgrades (UP) last. A headline shows the worst.
_SEVERITY_PREFIXES = (
    ("syntax-error", "E9", "F82", "F63", "F7"),
    ("F",),
    ("B", "PLE", "RUF"),
)


def _severity(code: str) -> int:
    """0 for the worst ruff codes, rising to style; the sort is stable, so ruff's own order holds within a rank."""
    for rank, prefixes in enumerate(_SEVERITY_PREFIXES):
        if code.startswith(prefixes):
            return rank
    return len(_SEVERITY_PREFIXES)


def _unformatted(output: str) -> tuple[TestFailure, ...]:
    paths = [
        m.group("path") or m.group("arrow") for m in map(_REFORMAT.match, map(str.strip, output.splitlines())) if m
    ]
    return tuple(TestFailure(node_id=p, message="would be reformatted") for p in dict.fromkeys(paths))


_CHECKS = {"ruff-check": _ruff, "ruff-format": _ruff, "diff-check": _diff_check, "pip-check": _pip_check}
