"""`ds4sync report`, `report --compare` and `schema` on a real repository with stored runs."""

from __future__ import annotations

import json
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest

from ds4sync.cli import main
from ds4sync.core.git import GitRepo
from ds4sync.demo.repobuild import RepoBuilder
from ds4sync.models.record import RecordStore
from ds4sync.report import report_schema
from ds4sync.runner import RunContext, open_workspace, run_phases
from tests.cli_json import data as cli_data
from tests.report.conftest import ROOT
from tests.report.pipeline_runs import failed_run, merged_run


@pytest.fixture(scope="module")
def stored_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """Two real runs (a clean merge, then a failed nightly) and a fork checkout, made once per module; the
    tests get copies of the checkout and the state dir (:func:`repo`).

    Returns (folder holding ``fork`` and ``state``, id of the merge run, id of the failed run).
    """
    root = tmp_path_factory.mktemp("report-cli")
    merged_store, merged_id = merged_run(root / "a")
    while datetime.now(UTC).strftime("%H%M%S") == merged_id[9:15]:  # two stores: ids of one second order by SHA
        time.sleep(0.05)
    failed_store, failed_id = failed_run(root / "b")
    builder = RepoBuilder(root / "fork")
    builder.commit({"README.md": "fork\n"}, "fork: initial")
    store = RecordStore(root / "state")
    for source, run_id in ((merged_store, merged_id), (failed_store, failed_id)):
        record = source.load(run_id)
        record.status = record.status if record.status != "paused" else "done"
        store.save(record)
    return root, merged_id, failed_id


@pytest.fixture
def repo(stored_runs: tuple[Path, str, str], tmp_path: Path) -> tuple[Path, Path, str, str]:
    """A fork checkout and a state dir holding two real runs (a clean merge, then a failed nightly), this
    test's own copies of :func:`stored_runs`.

    Returns (repo, state dir, id of the merge run, id of the failed run).
    """
    root, merged_id, failed_id = stored_runs
    for name in ("fork", "state"):
        shutil.copytree(root / name, tmp_path / name, symlinks=True)
    return tmp_path / "fork", tmp_path / "state", merged_id, failed_id


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_report_of_the_latest_run_is_printed(repo, capsys) -> None:
    path, state, _, failed_id = repo
    code, out, _ = _run(capsys, "report", "--repo", str(path), "--state-dir", str(state), "--profile", str(ROOT))
    assert code == 0
    assert out.startswith("# Sync fork:")
    assert f"run `{failed_id}`" in out, "the latest run is the failing one"


def test_report_by_run_id_to_a_file_as_json(repo, capsys, tmp_path: Path) -> None:
    path, state, _, failed_id = repo
    target = tmp_path / "summary.json"
    code, out, err = _run(
        capsys,
        "report",
        "--repo",
        str(path),
        "--state-dir",
        str(state),
        "--profile",
        str(ROOT),
        "--run",
        failed_id,
        "--format",
        "json",
        "--out",
        str(target),
    )
    assert code == 0 and out == "" and str(target) in err
    summary = json.loads(target.read_text())
    jsonschema.validate(summary, report_schema())
    assert summary["run"]["run_id"] == failed_id
    gates = summary["validation"]["tiers"][0]["gates"]
    assert [(g["name"], g["passed"], g["failed"]) for g in gates] == [("names-kept", 0, 1), ("unit-tests", 1, 0)]


def test_public_report_with_notes(repo, capsys, tmp_path: Path) -> None:
    path, state, merged_id, _ = repo
    notes = tmp_path / "notes.md"
    notes.write_text("Reviewed on /home/alexbi/box by a person.\n")
    code, out, _ = _run(
        capsys,
        "report",
        "--repo",
        str(path),
        "--state-dir",
        str(state),
        "--profile",
        str(ROOT),
        "--run",
        merged_id,
        "--public",
        "--notes",
        str(notes),
        "--format",
        "html",
    )
    assert code == 0 and out.startswith("<!doctype html>")
    assert "Reviewed on ~/box by a person." in out and "/home/" not in out


def test_compare_two_runs(repo, capsys) -> None:
    path, state, merged_id, failed_id = repo
    args = ("report", "--repo", str(path), "--state-dir", str(state), "--profile", str(ROOT))
    code, out, _ = _run(capsys, *args, "--compare", merged_id, failed_id)
    assert code == 0
    assert "| run | status | done | failed | changed |" in out
    assert "| gate names-kept | status | not run | failed | changed |" in out
    code, out, _ = _run(capsys, *args, "--compare", merged_id, failed_id, "--format", "json")
    data = cli_data(out) if out.lstrip().startswith('{"ds4sync"') else json.loads(out)
    assert {"section": "run", "item": "status", "before": "done", "after": "failed", "delta": None} in data["changed"]


def test_schema_command_prints_the_published_schema(capsys) -> None:
    code, out, _ = _run(capsys, "schema")
    assert code == 0
    assert json.loads(out) == json.loads((ROOT / "reports" / "schema" / "report-summary.schema.json").read_text())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--run", "nope"), "no run named nope"),
        (("--format", "pdf"), "'pdf' is not one of 'md', 'html', 'json'"),
        (("--notes", "missing.md"), "cannot read notes"),
    ],
)
def test_usage_errors_exit_2_with_one_line(repo, capsys, args, message) -> None:
    path, state, *_ = repo
    code, _, err = _run(capsys, "report", "--repo", str(path), "--state-dir", str(state), "--profile", str(ROOT), *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_no_run_at_all_is_a_usage_error(tmp_path: Path, capsys) -> None:
    builder = RepoBuilder(tmp_path / "fresh")
    builder.commit({"a.txt": "a\n"}, "initial")
    code, _, err = _run(capsys, "report", "--repo", str(builder.path), "--state-dir", str(tmp_path / "none"))
    assert code == 2 and "no ds4sync run in this repository yet" in err


def test_report_phase_writes_report_and_summary(repo) -> None:
    path, state, merged_id, _ = repo
    from ds4sync.pipeline import REPORT_PHASES

    ws = open_workspace(path, state_dir=state, profile=ROOT)
    record = ws.store.load(merged_id)
    outcome = run_phases(RunContext(ws, record), REPORT_PHASES)
    written = Path(outcome.record.results.report.path)
    assert written == ws.store.run_dir(record.run_id) / "report.md"
    assert written.read_text().startswith("# Sync fork:")
    assert json.loads(written.with_name("summary.json").read_text())["run"]["run_id"] == record.run_id
    assert ws.store.load(record.run_id).phases["report"].status == "done"
    assert "phase report" not in written.read_text()


def test_report_of_a_real_merge_run(builder: RepoBuilder, capsys) -> None:
    """A record written by the real merge phases renders; the rest says not run."""
    builder.commit({"a.txt": "one\n", "b.txt": "b\n", "c.txt": "c\n"}, "base")
    builder.branch("fork")
    builder.commit({"b.txt": "b fork\n", "c.txt": "c fork\n"}, "fork change")
    builder.checkout("main")
    builder.commit({"a.txt": "one upstream\n"}, "upstream change")
    upstream = builder.commit({"c.txt": "c upstream\n"}, "upstream conflicting change")
    code = main(["merge", upstream, "--repo", str(builder.path), "--branch", "fork"])
    assert code == 4  # c.txt conflicts and no rule resolves it
    capsys.readouterr()
    code, out, _ = _run(capsys, "report", "--repo", str(builder.path), "--profile", str(ROOT))
    assert code == 0
    fork_head = GitRepo(builder.path).resolve_commit("fork")
    assert f"Merge upstream:main at `{upstream}` into fork:fork at `{fork_head}`." in out  # the branch, not the SHA
    assert "It brings in 2 upstream commits on top of 1 fork-only commit." in out
    assert "resolving 1 conflicted file (1 content; resolutions: unresolved 1)" in out
    assert "- **Still unresolved** (1): `c.txt`." in out
    assert "- Native build: not run." in out and "Not run: the publish phase has not run" in out


def test_report_json_is_the_envelope_for_every_form(repo, capsys, tmp_path: Path) -> None:
    """`--json`, as on every reporting command: the summary, a comparison, a file written, a trend, an error."""
    path, state, merged_id, failed_id = repo
    base = ("report", "--repo", str(path), "--state-dir", str(state), "--profile", str(ROOT))
    code, out, _ = _run(capsys, *base, "--run", failed_id, "--json")
    envelope = json.loads(out)
    assert code == 0 and envelope["command"] == "report" and envelope["ok"]
    jsonschema.validate(envelope["data"], report_schema())
    assert envelope["data"]["run"]["run_id"] == failed_id
    code, out, _ = _run(capsys, *base, "--run", failed_id, "--format", "json")
    assert json.loads(out) == envelope["data"]  # the same summary as --format json
    code, out, _ = _run(capsys, *base, "--compare", merged_id, failed_id, "--json")
    assert code == 0 and json.loads(out)["ok"] and json.loads(out)["data"]
    target = tmp_path / "pr.md"
    code, out, _ = _run(capsys, *base, "--out", str(target), "--json")
    assert code == 0 and cli_data(out) == {"file": str(target)} and target.read_text().startswith("# Sync fork:")
    code, out, _ = _run(capsys, *base, "--trend", "--out", str(tmp_path / "t.html"), "--json")
    assert code == 0 and cli_data(out) == {"file": str(tmp_path / "t.html"), "runs": 2}
    code, out, _ = _run(capsys, *base, "--run", "no-such-run", "--json")
    assert code == 2 and not json.loads(out)["ok"] and json.loads(out)["error"]["type"]
