"""The report rendered from records the real pipeline produced, checked section by section.

Runs: a clean merge (paused after verify), a merge that needs a person, a failed nightly
(a command gate fails, a pytest gate passes), a run killed mid-merge, and the demo's two
syncs (slow). Every run's report states the run's status as the record has it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from ds4sync.cli import main
from ds4sync.models.record import RecordStore, RunRecord
from ds4sync.report import render_report, report_schema, report_view
from ds4sync.report.render import relative_paths
from tests.conftest import DemoRun
from tests.report.conftest import ROOT
from tests.report.pipeline_runs import failed_run, killed_run, merged_run, needs_person_run

TEMPLATES = ROOT / "reports"


def _sections(text: str) -> dict[str, str]:
    """``## Heading`` -> its body."""
    out: dict[str, str] = {}
    for chunk in text.split("\n## ")[1:]:
        head, _, body = chunk.partition("\n")
        out[head.strip()] = body
    return out


RunMaker = Callable[[Path], tuple[RecordStore, str]]


@pytest.fixture(scope="module")
def run_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[RunMaker], tuple[RecordStore, str]]:
    """The run a function of :mod:`tests.report.pipeline_runs` makes, made once per module for the tests
    that only render it (each kind of run is read by two tests)."""
    made: dict[str, tuple[RecordStore, str]] = {}

    def get(make: RunMaker) -> tuple[RecordStore, str]:
        if make.__name__ not in made:
            made[make.__name__] = make(tmp_path_factory.mktemp(make.__name__))
        return made[make.__name__]

    return get


def _render(store: RecordStore, run_id: str, **kw) -> tuple[RunRecord, str]:
    record = store.load(run_id)
    return record, render_report(record, templates_dir=TEMPLATES, **kw)


def test_clean_merge_run(run_of) -> None:
    store, run_id = run_of(merged_run)
    record, text = _render(store, run_id)
    s = _sections(text)
    merge = record.results.merge
    assert merge is not None and merge.merge_commit
    assert f"`{run_id}` (paused)" in s["Summary"]
    assert f"The merge commit is `{merge.merge_commit}`" in s["Summary"]
    assert f"It brings in {merge.upstream_commits} upstream commit" in s["Summary"]
    assert "The merge had no textual conflicts" in s["Summary"]
    assert "No conflict needed a resolution." in s["Integration choices and fixes"]
    assert "Not run: the publish phase has not run" in s["Duplicate-work check"]
    assert "- Native build: not run." in s["Validation"]
    assert "Gate tiers not run: static, unit, gpu, kernel, serving, perf." in s["Validation"]
    assert "No commands recorded" in s["Representative commands"]
    assert "- phase build is pending" in s["Remaining gate"] and "- native build: not run" in s["Remaining gate"]


def test_needs_person_run(run_of) -> None:
    store, run_id = run_of(needs_person_run)
    record, text = _render(store, run_id)
    s = _sections(text)
    assert record.status == "needs-person"
    assert f"`{run_id}` (needs-person)" in s["Summary"]
    assert "The merge is not committed yet (run status: needs-person)." in s["Summary"]
    assert "- **Still unresolved** (1): `a.py`." in s["Integration choices and fixes"]
    assert "Patch-sets: not run" in s["Integration choices and fixes"]
    assert "- phase resolve is needs-person" in s["Remaining gate"]
    assert "- 1 conflicted file unresolved" in s["Remaining gate"]


def test_failed_run(run_of) -> None:
    store, run_id = run_of(failed_run)
    record, text = _render(store, run_id)
    s = _sections(text)
    tier = record.results.gates["unit"]
    assert record.status == "failed" and tier.status == "failed"
    assert f"`{run_id}` (failed)" in s["Summary"]
    by_name = {g.name: g for g in tier.gates}
    assert by_name["names-kept"].status == "failed" and by_name["unit-tests"].status == "passed"
    assert f"- Tier unit: {tier.line()}." in s["Validation"]
    assert tier.line() == "failed: 2 gates (1 failed, 1 passed); tests: 1 passed, 1 failed"
    assert "| unit | names-kept | failed | 1 failed |" in s["Validation"]
    assert "| unit | unit-tests | passed | 1 passed |" in s["Validation"]
    assert "| names-kept | `names-kept` | – | failure:" in s["Validation"]
    assert "- names-kept (unit): failed" in s["Remaining gate"]
    # the report nightly wrote for the failed run states the status the run ended with
    written = store.run_dir(run_id) / "report.md"
    assert f"`{run_id}` (failed)" in written.read_text() and "(running)" not in written.read_text()
    # the run's folders are named by what they are, never by where they lay on the machine that ran it
    for fmt in ("md", "json"):
        rendered = text if fmt == "md" else render_report(record, templates_dir=TEMPLATES, fmt=fmt)
        for path in (record.worktree, record.state_dir, record.repo):
            assert path not in rendered, (fmt, path)
        assert "<worktree>" in rendered or "&lt;worktree&gt;" in rendered
    assert "`<worktree>`" in text or "<worktree>/" in text


def test_run_paths_become_placeholders_whole_and_longest_first() -> None:
    from ds4sync.report.render import relative_paths

    data = {
        "repo": "/r/fork",
        "state_dir": "/r/fork/.git/ds4sync",
        "worktree": "/r/fork/.git/ds4sync/worktrees/RUN",
        "profile": None,
        "results": {"build": {"venv": "/r/fork/.git/ds4sync/runs/RUN/build/venv"}},
        "notes": [
            "log: /r/fork/.git/ds4sync/runs/RUN/logs/gate.log",
            "in /r/fork/.git/ds4sync/worktrees/RUN/vllm/a.py",
            "/r/fork/.git/ds4sync/runs/RUN/build/venv/bin/python -m pytest",
            "another checkout: /r/fork2/x and /r/forked",
            "cd /r/fork && git status",
        ],
    }
    notes = relative_paths(data)["notes"]
    assert notes == [
        "log: <state>/runs/RUN/logs/gate.log",
        "in <worktree>/vllm/a.py",
        "<build-venv>/bin/python -m pytest",
        "another checkout: /r/fork2/x and /r/forked",
        "cd <repo> && git status",
    ]


def test_killed_run(run_of) -> None:
    store, run_id = run_of(killed_run)
    record, text = _render(store, run_id)
    assert record.interrupted_phase() == "merge"
    s = _sections(text)
    assert f"`{run_id}` (running)" in s["Summary"]  # what the record says: the process is gone
    assert "- phase merge is running" in s["Remaining gate"]
    assert "Patch-sets: not run" in s["Integration choices and fixes"]


@pytest.mark.parametrize("make", [merged_run, needs_person_run, failed_run, killed_run])
def test_every_format_renders_and_the_summary_validates(run_of, make) -> None:
    store, run_id = run_of(make)
    record = store.load(run_id)
    md = render_report(record, templates_dir=TEMPLATES)
    html = render_report(record, templates_dir=TEMPLATES, fmt="html")
    summary = json.loads(render_report(record, templates_dir=TEMPLATES, fmt="json"))
    jsonschema.validate(summary, report_schema())
    assert summary["run"]["status"] == record.status
    # The HTML is the Markdown rendered: the same headings and the same gate rows.
    for heading in _sections(md):
        assert f"<h2>{heading}</h2>" in html.replace("&amp;", "&")
    for tier in report_view(record).validation.tiers:
        for gate in tier.gates:
            assert f"<td>{gate.name}</td>" in html
    assert render_report(record.model_dump_json(), templates_dir=TEMPLATES) == md  # JSON text, same report


def test_published_schema_is_current() -> None:
    published = json.loads((ROOT / "reports" / "schema" / "report-summary.schema.json").read_text())
    assert published == report_schema(), "reports/schema is stale: regenerate it with `ds4sync schema`"


def test_status_and_report_give_the_same_gate_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, run_id = failed_run(tmp_path)
    capsys.readouterr()
    record = store.load(run_id)
    line = record.results.gates["unit"].line()
    repo = Path(record.repo)
    assert main(["status", "--repo", str(repo)]) in (0, 1)
    status_out = " ".join(capsys.readouterr().out.split())
    assert f"tier unit: {line}" in status_out
    assert f"- Tier unit: {line}." in render_report(record, templates_dir=TEMPLATES)


@pytest.mark.slow
def test_demo_runs_reports(demo_run: DemoRun, capsys: pytest.CaptureFixture[str]) -> None:
    """Both demo syncs: the written report states the final status; stdout, status and report agree on gates."""
    assert demo_run.code == 0
    out = demo_run.out
    store = RecordStore(demo_run.workdir / "fork" / ".git" / "ds4sync")
    second = store.load(store.run_ids()[-1])
    assert second.status == "done" and second.results.report is not None
    written = Path(second.results.report.path).read_text()
    assert f"`{second.run_id}` (done)" in written and "(running)" not in written
    assert written == render_report(second, templates_dir=ROOT / "reports")
    s = _sections(written)
    replay = second.results.replay
    assert replay is not None
    for entry in replay.entries:  # replay's own statuses, not verify's, with what a person needs from each
        assert f"(`{entry.id}`" in s["Integration choices and fixes"]
        assert f"**{entry.status}**" in s["Integration choices and fixes"]
        # the report names the run's folders by what they are (<repo>, <worktree>), never by where they lay
        shown = relative_paths({**second.model_dump(mode="json"), "notes": list(entry.evidence)})["notes"]
        assert all(fact in s["Integration choices and fixes"] for fact in shown), entry.id
        assert all(f"`{path}`" in s["Integration choices and fixes"] for path in entry.conflicted), entry.id
    assert any(entry.evidence for entry in replay.entries)  # the demo has a landed-upstream patch-set
    counts = replay.counts()
    tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    assert f"Patch-sets ({len(replay.entries)}: " in s["Integration choices and fixes"]
    assert sum(counts.values()) == len(replay.entries)
    assert all(f"{n} {status}" in s["Integration choices and fixes"] for status, n in counts.items()), tally
    verify = second.results.verify
    assert verify is not None
    for ps in verify.patchsets:
        for inv in ps.invariants:  # invariant ids, not kinds
            assert f"| `{ps.id}` | `{inv.invariant}` | {inv.kind} |" in written
    line = second.results.gates["unit"].line()
    assert f"gates unit: {line}" in out
    assert f"- Tier unit: {line}." in written
    capsys.readouterr()
    assert main(["status", "--repo", str(demo_run.workdir / "fork")]) == 0
    status_text = " ".join(capsys.readouterr().out.split())
    assert f"tier unit: {line}" in status_text
    assert second.results.report is not None and second.phases["report"].status == "done"
    assert f"report: {second.results.report.path} next:" in status_text  # the report phase's own: no caveat
    first = store.load(store.run_ids()[0])
    first_report = render_report(first, templates_dir=ROOT / "reports")
    assert f"`{first.run_id}` ({first.status})" in first_report


def _normal(text: str, workdir: Path) -> str:
    """A report with what differs between two demo runs (paths, SHAs, run ids, times, durations) blanked."""
    import re

    text = text.replace(str(workdir), "<demo>").replace("/tmp/ds4sync-demo", "<demo>")
    text = re.sub(r"\S*/bin/python\S*", "<python>", text)
    text = re.sub(r"\b\d{8}-\d{6}-[0-9a-f]{10}\b", "<run>", text)
    text = re.sub(r"\b[0-9a-f]{7,40}\b", "<sha>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\+00:00|Z)", "<time>", text)
    text = re.sub(r"\b\d{8}\b", "<date>", text)
    return re.sub(r"\d+\.\d s\b", "<s>", text)


@pytest.mark.slow
def test_shipped_examples_are_the_demos_reports(demo_run: DemoRun) -> None:
    """Each file in reports/examples is a demo run's report (paths, SHAs, times aside) or says it is synthetic."""
    workdir = demo_run.workdir
    assert demo_run.code == 0
    store = RecordStore(workdir / "fork" / ".git" / "ds4sync")
    fresh = {
        "demo-pr.md": render_report(store.load(store.run_ids()[-1]), templates_dir=TEMPLATES, public=True),
        "demo-loop-pr.md": (workdir / "loop" / "forge" / "pr-opened.md").read_text(),
    }
    for example in sorted((ROOT / "reports" / "examples").glob("*.md")):
        text = example.read_text()
        if "synthetic" in text.splitlines()[0].lower():
            continue
        assert example.name in fresh, f"{example.name}: not a demo report and its first line does not say synthetic"
        assert _normal(text, workdir) == _normal(fresh[example.name], workdir), example.name
