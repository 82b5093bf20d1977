"""The static built-ins (ruff on the delta, diff-check, pip-check) and the command kind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import git
import pytest
from gates_helpers import PYTHON, workspace, write_gates

from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.gates.runner import TierOptions, run_tier
from ds4sync.models.config import shipped_profile
from ds4sync.models.gates_details import StaticDetails

STATIC_YAML = """\
tier: static
gates:
  - {name: ruff-check, kind: static, run: {check: ruff-check}}
  - {name: ruff-format, kind: static, run: {check: ruff-format}}
  - {name: diff-check, kind: static, run: {check: diff-check}}
  - {name: pip-check, kind: static, run: {check: pip-check}}
"""

COMMAND_YAML = """\
tier: static
env_failures:
  - {name: net, category: network, pattern: "Temporary failure in name resolution"}
gates:
  - name: versions
    kind: command
    run: {argv: ["{python}", tools/check.py, --check], must_not_match: ["out of sync"]}
  - name: wants-exit-3
    kind: command
    run: {argv: ["{python}", -c, "import sys; sys.exit(3)"], expect_exit: 3}
  - name: offline
    kind: command
    run: {argv: ["{python}", -c, "raise SystemExit('Temporary failure in name resolution')"]}
  - name: no-such-program
    kind: command
    run: {argv: [definitely-not-a-program-ds4sync]}
"""


@pytest.fixture
def upstream_and_fork(builder: RepoBuilder) -> tuple[RepoBuilder, str]:
    """An upstream commit with badly formatted code, then fork commits on top (the delta)."""
    builder.commit({"up/legacy.py": "import os,sys\nx=1\n", "profile/gates/static.yaml": STATIC_YAML}, "upstream")
    base = builder.head()
    builder.commit(
        {
            "fork/good.py": "X = 1\n",
            "fork/unused.py": "import os\n\nY = 2\n",
            "fork/ugly.py": "Z=[1,\n 2]\n",
            "fork/notes.txt": "trailing space \n",
        },
        "fork delta",
    )
    return builder, base


def _run(repo: RepoBuilder, base: str | None, **kw):
    return run_tier(workspace(repo), TierOptions(tier="static", python=PYTHON, changed_since=base, **kw))


def test_static_checks_look_only_at_the_forks_delta(upstream_and_fork: tuple[RepoBuilder, str]) -> None:
    repo, base = upstream_and_fork
    gates = {g.name: g for g in _run(repo, base).gates}
    ruff = gates["ruff-check"]
    assert ruff.status == "failed" and ruff.counts.passed == 2 and ruff.counts.failed == 1
    assert [f.node_id for f in ruff.failures] == ["fork/unused.py:1:8"] and "F401" in ruff.failures[0].message
    assert all("up/legacy.py" not in part for part in ruff.command)
    fmt = gates["ruff-format"]
    assert fmt.status == "failed" and [f.node_id for f in fmt.failures] == ["fork/ugly.py"]
    diff = gates["diff-check"]
    assert diff.status == "failed" and [f.node_id for f in diff.failures] == ["fork/notes.txt:1"]
    assert "trailing whitespace" in diff.failures[0].message
    assert gates["pip-check"].status == "passed" and gates["pip-check"].command[:2] == (PYTHON, "-m")


def test_clean_delta_passes(upstream_and_fork: tuple[RepoBuilder, str]) -> None:
    repo, base = upstream_and_fork
    repo.commit({"fork/unused.py": "Y = 2\n", "fork/ugly.py": "Z = [1, 2]\n", "fork/notes.txt": "ok\n"}, "fix")
    result = _run(repo, base, names=("ruff-check", "ruff-format", "diff-check"))
    assert [g.status for g in result.gates] == ["passed", "passed", "passed"] and result


def test_a_delta_check_with_nothing_to_check_is_not_run_never_green(upstream_and_fork: tuple[RepoBuilder, str]) -> None:
    """No file differs from the base (it names the fork itself), or none of the check's kind does: each delta
    check says it checked nothing and how to fix the base; the tier is not green."""
    repo, _ = upstream_and_fork
    names = ("ruff-check", "ruff-format", "diff-check")
    empty = _run(repo, repo.head(), names=names)
    for gate in empty.gates:
        assert gate.status == "not-run" and gate.counts.passed == 0, (gate.name, gate.status, gate.reason)
        assert f"nothing differs from {repo.head()[:12]}: the base is the fork itself" in gate.reason
        assert "nothing checked" in gate.reason and "upstream.ref" in gate.reason
    assert empty.status == "not-run" and not empty
    before = repo.head()
    repo.commit({"fork/notes.txt": "only text\n"}, "a delta with no Python file")
    text_only = {g.name: g for g in _run(repo, before, names=names).gates}
    for name in ("ruff-check", "ruff-format"):
        gate = text_only[name]
        assert gate.status == "not-run" and "1 files differ" in gate.reason and ".py or .pyi" in gate.reason
    assert text_only["diff-check"].status == "passed" and text_only["diff-check"].counts.passed == 1


def test_ruff_that_does_not_run_is_an_error_never_files_passed(
    upstream_and_fork: tuple[RepoBuilder, str], tmp_path: Path
) -> None:
    """A target environment without ruff (a build's venv has no linters) must not count the delta as passing."""
    import subprocess

    repo, base = upstream_and_fork
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    result = run_tier(
        workspace(repo),
        TierOptions(
            tier="static", python=str(bare / "bin" / "python"), changed_since=base, names=("ruff-check", "ruff-format")
        ),
    )
    for gate in result.gates:
        assert gate.status == "error" and gate.counts.passed == 0, gate
        assert "ruff does not run as" in gate.reason and "No module named ruff" in gate.reason
    assert not result


@pytest.mark.parametrize("pin", ["0.0.1", "99.0"])
def test_ruff_other_than_the_pinned_version_is_an_error(upstream_and_fork: tuple[RepoBuilder, str], pin: str) -> None:
    repo, base = upstream_and_fork
    write_gates(
        repo,
        "static",
        f"gates:\n  - {{name: ruff-check, kind: static, run: {{check: ruff-check, ruff_version: '{pin}'}}}}\n",
    )
    gate = _run(repo, base).gates[0]
    assert gate.status == "error" and f"where the profile pins {pin}" in gate.reason


def test_ruff_gates_name_the_tool_and_version_they_ran(upstream_and_fork: tuple[RepoBuilder, str]) -> None:
    import subprocess

    version = subprocess.run([PYTHON, "-m", "ruff", "--version"], capture_output=True, text=True).stdout.split()[1]
    repo, base = upstream_and_fork
    for gate in _run(repo, base, names=("ruff-check", "ruff-format")).gates:
        assert isinstance(gate.details, StaticDetails)
        assert gate.details.tool == f"ruff {version}" and gate.reason.startswith(f"ruff {version}: ")


def test_delta_checks_need_a_base(upstream_and_fork: tuple[RepoBuilder, str]) -> None:
    repo, _ = upstream_and_fork
    git.Repo(repo.path).git.branch("-m", "fork")  # no --changed-since, no run, and upstream's name names nothing
    gate = _run(repo, None, names=("ruff-check",)).gates[0]
    assert gate.status == "error" and "no base ref" in gate.reason


def test_command_kind(builder: RepoBuilder) -> None:
    builder.commit(
        {
            "tools/check.py": "import sys\nprint('docker/versions.json is out of sync with Dockerfile')\n",
            "profile/gates/static.yaml": COMMAND_YAML,
        },
        "tools",
    )
    gates = {g.name: g for g in _run(builder, None).gates}
    assert gates["versions"].status == "failed" and "output has /out of sync/" in gates["versions"].reason
    assert gates["wants-exit-3"].status == "passed"
    assert gates["offline"].status == "incomplete" and gates["offline"].env_categories == ("network",)
    assert gates["no-such-program"].status == "error" and "program not found" in gates["no-such-program"].reason
    builder.commit({"tools/check.py": "print('in sync')\n"}, "fix")
    assert _run(builder, None, names=("versions",)).gates[0].status == "passed"


def test_python_default_is_the_checkouts_venv(builder: RepoBuilder, tmp_path: Path) -> None:
    from ds4sync.gates.runner import resolve_python

    assert resolve_python(None, builder.path, builder.path) == sys.executable
    venv_python = builder.path / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(sys.executable)
    assert resolve_python(None, tmp_path, builder.path) == str(venv_python)
    assert resolve_python(None, builder.path, tmp_path) == str(venv_python)
    # The venv this run's build made wins over the checkout's own; an explicit interpreter wins over both.
    built = tmp_path / "build-venv" / "bin" / "python"
    assert resolve_python(None, builder.path, builder.path, built=str(built)) == str(venv_python)  # not there yet
    built.parent.mkdir(parents=True)
    built.symlink_to(sys.executable)
    assert resolve_python(None, builder.path, builder.path, built=str(built)) == str(built)
    assert resolve_python(sys.executable, builder.path, builder.path, built=str(built)) == sys.executable
    write_gates(builder, "static", "gates: []\n")


@pytest.mark.parametrize(
    "output",
    [
        "Would reformat: fork/ugly.py\n1 file would be reformatted, 2 files already formatted\n",  # ruff 0.14
        "unformatted: File would be reformatted\n --> fork/ugly.py:1:2\n  |\n1 file would be reformatted\n",  # newer
    ],
)
def test_ruff_format_output_of_either_version(output: str) -> None:
    from ds4sync.gates.kinds.static_kind import _unformatted

    assert [f.node_id for f in _unformatted(output)] == ["fork/ugly.py"]


def test_ruff_violations_are_read_from_its_json_report(upstream_and_fork: tuple[RepoBuilder, str]) -> None:
    """Paths with a colon and messages with colons survive; a syntax error is one violation too."""
    repo, base = upstream_and_fork
    repo.commit(
        {"fork/odd:name.py": "import sys\n", "fork/broken.py": "def f(:\n    pass\n", "fork/unused.py": "Y = 2\n"},
        "more delta",
    )
    ruff = _run(repo, base, names=("ruff-check",)).gates[0]
    assert ruff.status == "failed"
    by_node = {f.node_id: f.message for f in ruff.failures}
    assert by_node["fork/odd:name.py:1:8"].startswith("F401 ")
    assert any(node.startswith("fork/broken.py:1:") for node in by_node)
    assert (ruff.counts.passed, ruff.counts.failed) == (3, 2)  # good, ugly, unused pass; odd:name, broken fail
    report = Path(ruff.log_path or "").with_suffix(".ruff.json")
    assert len(json.loads(report.read_text())) == len(ruff.failures)


def test_ruff_findings_come_worst_first_so_the_headline_is_real_breakage() -> None:
    from ds4sync.gates.kinds.static_kind import ruff_failures

    def violation(code: str | None, row: int) -> dict:
        return {"code": code, "message": "m", "filename": "/r/a.py", "location": {"row": row, "column": 1}}

    order = ["I001", "E501", "F401", "B006", "F821", None, "UP006", "F811", "E999"]
    found = ruff_failures(json.dumps([violation(c, i) for i, c in enumerate(order)]), root="/r")
    assert [f.message.split()[0] for f in found] == [
        "F821",
        "syntax-error",
        "E999",
        "F401",
        "F811",
        "B006",
        "I001",
        "E501",
        "UP006",
    ]


def test_an_unreadable_ruff_report_is_an_error() -> None:
    from ds4sync.gates.kinds.static_kind import ruff_failures

    with pytest.raises(ValueError):
        ruff_failures('{"not": "a list"}', root="/r")
    with pytest.raises(ValueError):
        ruff_failures("[1, 2", root="/r")
    assert ruff_failures("[]", root="/r") == ()


def test_the_delta_base_outside_a_run_is_upstreams_branch_by_the_one_rule(
    upstream_and_fork: tuple[RepoBuilder, str],
) -> None:
    """Without --changed-since, the fork's delta is measured from upstream's branch as `ds4sync merge` reads it
    (``refs/remotes/upstream/main``), never from a local branch that shadows the name (``upstream/main``)."""
    from ds4sync.runner import resolve_upstream_ref, upstream_here

    repo, base = upstream_and_fork
    git.Repo(repo.path).git.remote("add", "upstream", str(repo.path))
    git.Repo(repo.path).git.update_ref("refs/remotes/upstream/main", base)
    git.Repo(repo.path).git.branch("upstream/main", repo.head())  # git's own lookup of "upstream/main" finds this first
    ws = workspace(repo)
    for name in ("main", "upstream/main"):
        assert upstream_here(ws, name) == resolve_upstream_ref(ws, name)[0] == base, name
    ruff = {g.name: g for g in _run(repo, None, names=("ruff-check",)).gates}["ruff-check"]
    assert ruff.status == "failed" and [f.node_id for f in ruff.failures] == ["fork/unused.py:1:8"]


@pytest.mark.parametrize(
    ("imports", "status", "category"),
    [
        ("dockerfile_parse", "incomplete", ("missing-dependency",)),  # the checker's own dependency: environment
        ("vllm.gone", "failed", ()),  # the fork's package: real breakage
        ("vllm_extras.gone", "incomplete", ("missing-dependency",)),  # a name that only starts like the fork's
    ],
)
def test_the_shipped_command_gate_missing_a_dependency_is_environment_only_never_a_failure_of_the_fork(
    builder: RepoBuilder, imports: str, status: str, category: tuple[str, ...]
) -> None:
    """The shipped static tier's versions-json gate, run as shipped, on a checker script whose import fails."""
    shipped = (shipped_profile() / "gates" / "static.yaml").read_text()
    builder.commit(
        {"tools/generate_versions_json.py": f"import {imports}\n", "profile/gates/static.yaml": shipped}, "checker"
    )
    gate = _run(builder, None, names=("versions-json",)).gates[0]
    assert (gate.status, gate.env_categories) == (status, category)
