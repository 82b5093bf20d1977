"""Gate runner overhead: a tier through `ds4sync gate` vs the same pytest commands run by hand.

Builds a sample project (our own generated tests, committed to a git repo in a temporary
folder) with GATES pytest gates of TESTS tests each, then, interleaved ROUNDS times:

- by hand:   `python -m pytest <args>` for each gate, one after another;
- ds4sync:   `ds4sync gate --tier unit --jobs 1 --no-cache --json` (same commands, plus JUnit, parsing,
             selection, cache bookkeeping, CLI start-up);
- cached:    `ds4sync gate --tier unit --jobs 1 --json` after a passing run (every gate served from cache).

Prints medians, overhead and ratios. Goals: overhead <= 10% + 0.5 s; cached re-run < 5% of cold.

Usage: python benchmarks/bench_gate.py [--gates 4] [--tests 400] [--rounds 3] [--work-ms 0]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ds4sync.demo.repobuild import RepoBuilder

TEST_FILE = """\
import time

import pytest


@pytest.mark.parametrize("n", range({tests}))
def test_sum_of_odds_is_square(n):
    end = time.perf_counter() + {work_s}  # stands in for a unit test's own work
    while time.perf_counter() < end:
        pass
    assert sum(range(1, 2 * n, 2)) == n * n
"""


def build_project(root: Path, gates: int, tests: int, work_ms: float) -> list[list[str]]:
    """Write and commit the project; return the by-hand pytest argv (after `python -m pytest`) per gate."""
    repo = RepoBuilder(root)
    files = {".gitignore": "__pycache__/\n.pytest_cache/\n"}
    yaml = ["tier: unit", "gates:"]
    commands = []
    for i in range(gates):
        files[f"tests/test_bench_{i}.py"] = TEST_FILE.format(tests=tests, work_s=work_ms / 1000)
        yaml.append(
            f"  - {{name: g{i}, kind: pytest, run: {{args: [-q], paths: [tests/test_bench_{i}.py]}},"
            f" source_file_dependencies: [tests/test_bench_{i}.py]}}"
        )
        commands.append(["-q", f"tests/test_bench_{i}.py"])
    files["profile/gates/unit.yaml"] = "\n".join(yaml) + "\n"
    repo.commit(files, "bench project")
    return commands


def timed(argv: list[str], cwd: Path, *, ok: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    res = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    if res.returncode not in ok:
        raise SystemExit(f"{argv[:4]}... exit {res.returncode}: {res.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gates", type=int, default=4)
    parser.add_argument("--tests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work-ms", type=float, default=0.0, help="busy work inside each test, milliseconds")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        root = Path(tmp) / "proj"
        commands = build_project(root, args.gates, args.tests, args.work_ms)
        ds4sync = [
            py,
            "-m",
            "ds4sync.cli",
            "gate",
            "--tier",
            "unit",
            "--profile",
            str(root / "profile"),
            "--python",
            py,
            "--jobs",
            "1",
            "--json",
        ]
        timed([py, "-m", "pytest", *commands[0]], root)  # warm the file cache and bytecode
        hand, ours, cached = [], [], []
        for _ in range(args.rounds):
            hand.append(sum(timed([py, "-m", "pytest", *cmd], root) for cmd in commands))
            ours.append(timed([*ds4sync, "--no-cache"], root))
            cached.append(timed(ds4sync, root))
        h, o, c = (statistics.median(x) for x in (hand, ours, cached))
        hmin, omin, cmin = (min(x) for x in (hand, ours, cached))
    overhead = o - h
    budget = 0.10 * h + 0.5
    print(
        f"project: {args.gates} pytest gates x {args.tests} tests, {args.work_ms:g} ms work per test, "
        f"{args.rounds} rounds (medians), python {py}"
    )
    print(f"by hand (sequential pytest):      {h:7.2f} s   runs {', '.join(f'{x:.2f}' for x in hand)}")
    print(f"ds4sync gate --no-cache --jobs 1: {o:7.2f} s   runs {', '.join(f'{x:.2f}' for x in ours)}")
    print(
        f"overhead: {overhead:+.2f} s ({o / h:.3f}x); goal <= {budget:.2f} s (10% + 0.5 s): "
        f"{'met' if overhead <= budget else 'NOT met'}"
    )
    print(f"cached re-run:                    {c:7.2f} s   runs {', '.join(f'{x:.2f}' for x in cached)}")
    print(f"cached / cold: {c / o:.1%}; goal < 5%: {'met' if c / o < 0.05 else 'NOT met'}")
    print(
        f"best runs: by hand {hmin:.2f} s, ds4sync {omin:.2f} s (overhead {omin - hmin:+.2f} s, "
        f"{omin / hmin:.3f}x), cached {cmin:.2f} s ({cmin / omin:.1%} of cold)"
    )


if __name__ == "__main__":
    main()
