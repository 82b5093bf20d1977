"""Where a test run's time goes: set-up steps, each pass, each mark, each area and the slowest tests, from JUnit XML.

Reads the JUnit XML that ``scripts/test.sh`` writes under ``.test-results/`` (one file per pass; any pytest run
with ``--junitxml`` works: each test's marks are a ``marks`` property there, written by ``tests/conftest.py``
with ``junit_family = xunit1``), and the ``steps.tsv`` beside them (when it is there) for the set-up's steps.
A test's time is pytest's: set-up, call and tear-down together, so a session fixture's cost lands on the first
test that asked for it. With ``--baseline`` (the XML of another run, e.g. before a change) each table puts the
two side by side with their ratio.

Usage: python benchmarks/durations_table.py .test-results/junit-*.xml [--steps .test-results/steps.tsv]
           [--baseline OLD.xml ...] [--slowest 30] [--out table.md]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple
from xml.etree.ElementTree import iterparse

from ds4sync.gates.junit import node_id_of, read_junit

FAST_LOOP = "fast loop (not slow, not serving)"


class Timed(NamedTuple):
    """One test of a run: its node id, outcome, seconds (set-up + call + tear-down) and marks."""

    node_id: str
    outcome: str
    seconds: float
    marks: frozenset[str]


class Run(NamedTuple):
    """The tests of one run (every XML given, merged) and the wall seconds pytest reported per file."""

    tests: tuple[Timed, ...]
    wall_s: dict[str, float]


def read_run(paths: Iterable[Path]) -> Run:
    """The tests of every JUnit XML in ``paths``; a test's marks come from its ``marks`` property ("" when absent).

    Raises ds4sync's JUnitError for a missing or malformed file (the message names it).
    """
    tests: list[Timed] = []
    wall: dict[str, float] = {}
    for path in paths:
        marks = _marks(path)
        tests += [
            Timed(c.node_id, c.outcome, c.duration_s, marks.get(c.node_id, frozenset())) for c in read_junit(path)
        ]
        wall[path.name] = _suite_time(path)
    return Run(tuple(tests), wall)


def _marks(path: Path) -> dict[str, frozenset[str]]:
    found: dict[str, frozenset[str]] = {}
    for _, elem in iterparse(str(path)):
        if elem.tag != "testcase":
            continue
        node = node_id_of(elem.get("classname") or "", elem.get("name") or "", elem.get("file"))
        for prop in elem.iter("property"):
            if prop.get("name") == "marks":
                found[node] = frozenset(m for m in (prop.get("value") or "").split(",") if m)
        elem.clear()
    return found


def _suite_time(path: Path) -> float:
    for _, elem in iterparse(str(path), events=("start",)):
        if elem.tag == "testsuite":
            return float(elem.get("time") or 0)
    return 0.0


def by_mark(run: Run) -> dict[str, tuple[int, float]]:
    """Tests and seconds per mark (a test with two marks counts under both), plus ``unmarked`` and the fast loop."""
    out: dict[str, list[float]] = defaultdict(list)
    for t in run.tests:
        for mark in sorted(t.marks) or ["unmarked"]:
            out[mark].append(t.seconds)
        if not t.marks & {"slow", "serving"}:
            out[FAST_LOOP].append(t.seconds)
    return {k: (len(v), sum(v)) for k, v in sorted(out.items())}


def by_area(run: Run) -> dict[str, tuple[int, float]]:
    """Tests and seconds per area: the test folder (``tests/gates``) or, for top-level files, the file."""
    out: dict[str, list[float]] = defaultdict(list)
    for t in run.tests:
        path = t.node_id.split("::", 1)[0]
        parts = path.split("/")
        out["/".join(parts[:2]) if len(parts) > 2 else path].append(t.seconds)
    return {k: (len(v), sum(v)) for k, v in sorted(out.items(), key=lambda kv: -sum(kv[1]))}


def read_steps(path: Path) -> list[tuple[str, float]]:
    """``steps.tsv`` (step, start seconds, what) as (what, seconds it took), in order; the last line ends the rest."""
    rows = [line.split("\t") for line in path.read_text().splitlines() if line.strip()]
    out = []
    for (step, start, what), (_, end, _) in itertools.pairwise(rows):
        out.append((f"{step} {what}".strip(), float(end) - float(start)))
    return out


def _ratio(new: float, old: float | None) -> str:
    return "" if old is None or new <= 0 else f"{old / new:.2f}x"


def _table(title: str, rows: dict[str, tuple[int, float]], base: dict[str, tuple[int, float]] | None) -> list[str]:
    head = "| | tests | seconds |" + (" baseline tests | baseline s | baseline / now |" if base is not None else "")
    out = [f"### {title}", "", head, "|---" * (3 + (3 if base is not None else 0)) + "|"]
    for key, (n, s) in rows.items():
        line = f"| {key} | {n} | {s:.1f} |"
        if base is not None:
            bn, bs = base.get(key, (0, 0.0))
            line += f" {bn} | {bs:.1f} | {_ratio(s, bs if bn else None)} |"
        out.append(line)
    if base is not None:
        for key, (bn, bs) in base.items():
            if key not in rows:
                out.append(f"| {key} | 0 | 0.0 | {bn} | {bs:.1f} | |")
    return [*out, ""]


def render(run: Run, *, baseline: Run | None = None, steps: Sequence[tuple[str, float]] = (), slowest: int = 30) -> str:
    """The markdown tables: set-up steps, passes, marks, areas and the ``slowest`` tests (baseline beside)."""
    lines: list[str] = []
    if steps:
        lines += ["### Set-up steps and passes (wall seconds)", "", "| step | seconds |", "|---|---|"]
        lines += [f"| {what} | {s:.0f} |" for what, s in steps]
        lines.append("")
    total = sum(t.seconds for t in run.tests)
    lines += [f"Tests: {len(run.tests)}, {total:.1f} s of test time in all."]
    lines += [f"- {name}: {s:.1f} s wall (pytest's own clock)" for name, s in run.wall_s.items()]
    if baseline is not None:
        btotal = sum(t.seconds for t in baseline.tests)
        lines += [f"Baseline: {len(baseline.tests)} tests, {btotal:.1f} s of test time ({_ratio(total, btotal)})."]
        lines += [f"- baseline {name}: {s:.1f} s wall" for name, s in baseline.wall_s.items()]
    lines.append("")
    lines += _table("Per mark", by_mark(run), by_mark(baseline) if baseline else None)
    lines += _table("Per area", by_area(run), by_area(baseline) if baseline else None)
    before = {t.node_id: t.seconds for t in baseline.tests} if baseline else {}
    lines += [
        f"### The {slowest} slowest tests",
        "",
        "| seconds | marks | test |" + (" baseline s |" if baseline else ""),
    ]
    lines.append("|---|---|---|" + ("---|" if baseline else ""))
    for t in sorted(run.tests, key=lambda t: -t.seconds)[:slowest]:
        row = f"| {t.seconds:.1f} | {','.join(sorted(t.marks))} | `{t.node_id}` |"
        if baseline:
            row += f" {before[t.node_id]:.1f} |" if t.node_id in before else " |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("xml", nargs="+", type=Path, help="JUnit XML of one run (its passes)")
    parser.add_argument("--baseline", nargs="*", type=Path, default=None, help="JUnit XML of the run to compare")
    parser.add_argument("--steps", type=Path, default=None, help="steps.tsv written by scripts/test.sh")
    parser.add_argument("--slowest", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None, help="write the tables here as well")
    args = parser.parse_args(argv)
    steps = read_steps(args.steps) if args.steps else []
    text = render(
        read_run(args.xml),
        baseline=read_run(args.baseline) if args.baseline else None,
        steps=steps,
        slowest=args.slowest,
    )
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
