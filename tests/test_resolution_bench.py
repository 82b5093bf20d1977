"""benchmarks/resolution_bench.py on a generated fork history: two sibling rebases with one conflict each."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ds4sync.demo.repobuild import RepoBuilder

_SPEC = importlib.util.spec_from_file_location(
    "resolution_bench_under_test", Path(__file__).resolve().parents[1] / "benchmarks" / "resolution_bench.py"
)
assert _SPEC is not None and _SPEC.loader is not None
bench = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = bench
_SPEC.loader.exec_module(bench)

BODY = [f"line {i}" for i in range(20)]


def text(**changes: str) -> str:
    out = list(BODY)
    for key, value in changes.items():
        out[int(key[1:])] = value
    return "".join(f"{line}\n" for line in out)


def line_of(b: RepoBuilder, name: str, start: str, commits: list[tuple[str, dict]]) -> None:
    b.branch(name, start)
    for subject, files in commits:
        b.commit(files, subject)
    b.checkout("main")


def test_the_table_scores_each_resolver_against_the_persons_file(builder: RepoBuilder, tmp_path: Path) -> None:
    b = builder
    base0 = b.commit({"mod.py": text()}, "base")
    base1 = b.commit({"mod.py": text(l5="up five")}, "Upstream five (#11)")
    person = text(l5="fork five and up five")
    for tag, second in (("a", "fork: other"), ("b", "fork: another")):
        line_of(
            b,
            f"backup/{tag}-before",
            base0,
            [("fork: five", {"mod.py": text(l5="fork five")}), (second, {f"{tag}.py": "x\n"})],
        )
        line_of(b, f"{tag}-after", base1, [("fork: five", {"mod.py": person}), (second, {f"{tag}.py": "x\n"})])
    out = tmp_path / "table.md"
    assert bench.main(["--repo", str(b.path), "--out", str(out)]) == 0
    table = out.read_text()
    assert (
        table.startswith("# Conflict resolvers") and "2 real syncs; 2 content conflicts (1 distinct), 2 hunks" in table
    )
    rows = {
        line.split(" | ")[0].strip("| "): line.split(" | ")[1:] for line in table.splitlines() if line.startswith("| ")
    }
    assert rows["ours"][:4] == ["0 (0%)", "0 (0%)", "2 (100%)", "0 (0%)"]
    assert rows["theirs"][:4] == ["0 (0%)", "0 (0%)", "2 (100%)", "0 (0%)"]
    assert rows["best side (oracle)"][:4] == ["0 (0%)", "0 (0%)", "0 (0%)", "2 (100%)"]  # the person kept neither side
    # the first sync teaches the store; the sibling's identical hunk is then answered exactly
    assert rows["store (earlier syncs)"][:4] == ["1 (50%)", "0 (0%)", "0 (0%)", "1 (50%)"]
    assert rows["store (earlier syncs)"][6] == "1 (50%)"  # and so is its whole file
    assert "not configured" in rows["endpoint"][0]
