"""CPU of the pieces the fast test loop spends most in ds4sync itself, baseline and ours side by side.

- secret values: the environment scan behind every redacted line. Baseline: every (name, value) pair of the
  environment read and hashed on each call; ours: names only (each name's rule asked once), values of the
  secret-named ones, the result kept while those stay the same.
- redact_data: a record-sized JSON value. Baseline: the environment scanned once per string; ours: once per
  value.
- read_yaml: the shipped gate and patch-set files. Baseline: PyYAML's Python scanner and parser; ours:
  libyaml's C parser under the same Python composer (where PyYAML has libyaml).
- report template: Baseline: a Jinja2 environment built (and the template compiled) per render; ours: one
  per templates folder.

Process CPU time (time.process_time), best of 3 interleaved rounds; prints each ratio baseline/ours.

    PYTHONPATH=. python benchmarks/bench_fast_pass.py
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from ds4sync.core import model, redact
from ds4sync.report import render

ROOT = Path(__file__).resolve().parents[1]


_BASELINE_CACHE: tuple[int, tuple[str, ...]] = (0, ())


def _baseline_secret_values() -> tuple[str, ...]:
    """The scan before: every (name, value) pair of the environment hashed on each call, the values found
    again when the hash changed."""
    global _BASELINE_CACHE
    key = hash((tuple(os.environ.items()), len(redact._listed_names), len(redact._listed_values)))
    if _BASELINE_CACHE[0] == key:
        return _BASELINE_CACHE[1]
    found = {
        v
        for k, v in os.environ.items()
        if redact._SECRET_NAME_RE.fullmatch(k) is not None and len(v) >= redact.MIN_SECRET_VALUE
    }
    _BASELINE_CACHE = (key, tuple(sorted(found | redact._listed_values, key=len, reverse=True)))
    return _BASELINE_CACHE[1]


def _baseline_redact_data(data: object) -> object:
    """redact_data as before: the environment read for every string."""
    if isinstance(data, str):
        return redact._redact_secrets(data, _baseline_secret_values())
    if isinstance(data, dict):
        return {_baseline_redact_data(k): _baseline_redact_data(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_baseline_redact_data(v) for v in data]
    return data


def _record_like() -> dict:
    gate = {"name": "unit-tests", "command": ["python", "-m", "pytest", "-q", "tests"], "status": "failed"}
    failures = [{"test": f"tests/test_{i}.py::test_case", "message": f"assert {i} == {i + 1}"} for i in range(40)]
    return {"gates": [{**gate, "failures": failures, "log": [f"line {i} of output" for i in range(200)]}] * 5}


def _best(rounds: list[tuple[float, float]]) -> tuple[float, float]:
    return min(r[0] for r in rounds), min(r[1] for r in rounds)


def _cpu(fn: Callable[[], object], n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) / n


def _row(name: str, unit: str, scale: float, base: Callable[[], object], ours: Callable[[], object], n: int) -> None:
    base(), ours()  # warm: imports, compiled patterns, first template load
    b, o = _best([(_cpu(base, n), _cpu(ours, n)) for _ in range(3)])
    print(f"{name:<28} baseline {b * scale:10.1f} {unit}  ours {o * scale:10.1f} {unit}  baseline/ours {b / o:6.1f}x")


def main() -> None:
    print(f"environment: {len(os.environ)} variables; PyYAML with libyaml: {yaml.__with_libyaml__}")
    _row("secret values (per line)", "µs", 1e6, _baseline_secret_values, redact.secret_values, 2000)
    data = _record_like()
    assert _baseline_redact_data(data) == redact.redact_data(data)
    _row(
        "redact_data (record-sized)",
        "ms",
        1e3,
        lambda: _baseline_redact_data(data),
        lambda: redact.redact_data(data),
        5,
    )
    files = sorted((ROOT / "gates").glob("*.yaml"))
    texts = [f.read_text() for f in files]
    python_loader = model._unique_keys_loader()
    assert [yaml.load(t, Loader=python_loader) for t in texts] == [model.read_yaml(f) for f in files]
    _row(
        f"read_yaml ({len(files)} gate files)",
        "ms",
        1e3,
        lambda: [yaml.load(t, Loader=python_loader) for t in texts],
        lambda: [model.read_yaml(f) for f in files],
        10,
    )
    templates = ROOT / "reports"
    name = "pr.md.j2"
    _row(
        f"template {name} compile+load",
        "ms",
        1e3,
        lambda: render.environment.__wrapped__(templates).get_template(name),
        lambda: render.environment(templates).get_template(name),
        20,
    )


if __name__ == "__main__":
    main()
