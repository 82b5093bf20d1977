"""Build the Validation section: environment, build, gates by tier, kernel checks, serving probes.

Reads ``results["build"]``, ``results["gates"]``, ``results["kernels"]``, ``results["serving"]``,
``results["perf"]`` and ``results["environment"]`` of a run record (or of a follow-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ds4sync.report.read import (
    as_dict,
    as_float,
    as_int,
    as_list,
    as_str,
    command,
    first,
    fractions,
    tally,
)
from ds4sync.report.view import (
    COUNT_KEYS,
    GATE_TIERS,
    ABRow,
    BuildView,
    CheckView,
    CommandView,
    Fact,
    FailureView,
    GateView,
    ProbeGroup,
    ProbeView,
    TierView,
    ValidationView,
)

# Environment facts in the order a reader expects them; other keys follow, sorted.
_ENV_LABELS: tuple[tuple[str, str], ...] = (
    ("gpu", "GPU"),
    ("gpu_name", "GPU"),
    ("gpus", "GPUs"),
    ("gpu_count", "GPUs"),
    ("driver", "driver"),
    ("compute_capability", "compute capability"),
    ("cuda", "CUDA"),
    ("nvcc", "nvcc"),
    ("torch", "PyTorch"),
    ("torch_cuda", "PyTorch CUDA"),
    ("triton", "Triton"),
    ("flashinfer", "FlashInfer"),
    ("python", "Python"),
    ("gcc", "gcc"),
    ("cmake", "cmake"),
    ("ninja", "ninja"),
    ("arch_list", "arch list"),
    ("os", "OS"),
)
_ENV_SKIP = frozenset({"host", "hostname", "node", "user", "home"})
# Worst first: a tier takes the status of its worst gate.
_SEVERITY = ("error", "failed", "incomplete", "skipped", "cached", "passed")
# (results key, group title, gate tier it stands for)
_PROBE_GROUPS: tuple[tuple[str, str, str], ...] = (
    ("kernels", "kernel checks", "kernel"),
    ("serving", "serving", "serving"),
    ("perf", "perf", "perf"),
)


def build_validation(results: Mapping[str, Any]) -> ValidationView:
    """The Validation section from a record's (or a follow-up's) ``results``."""
    tiers = gate_tiers(results.get("gates"))
    build = build_result(results.get("build"))
    groups, present = [], {t.tier for t in tiers}
    for key, name, tier in _PROBE_GROUPS:
        group = probe_group(results.get(key), name=name)
        if group:
            groups.append(group)
            present.add(tier)
    return ValidationView(
        environment=environment(results),
        build=build,
        tiers=tiers,
        tiers_not_run=tuple(t for t in GATE_TIERS if t not in present),
        probes=tuple(groups),
    )


def environment(results: Mapping[str, Any]) -> tuple[Fact, ...]:
    """GPU, CUDA, torch, python... from ``results["environment"]`` then the build's toolchain."""
    build = as_dict(results.get("build"))
    merged: dict[str, Any] = {}
    for source in (as_dict(build.get("toolchain")), as_dict(results.get("environment"))):
        merged.update({k: v for k, v in source.items() if v not in (None, "", [], {})})
    if isinstance(build.get("profile"), str | dict) and "build profile" not in merged:
        merged["build profile"] = _profile_name(build.get("profile"))
    facts, seen_labels = [], set()
    for key, label in _ENV_LABELS:
        if key in merged and label not in seen_labels:
            facts.append(Fact(label=label, value=_fact_value(merged[key])))
            seen_labels.add(label)
    known = {key for key, _ in _ENV_LABELS} | _ENV_SKIP
    for key in sorted(k for k in merged if k not in known):
        facts.append(Fact(label=key.replace("_", " "), value=_fact_value(merged[key])))
    return tuple(facts)


def _fact_value(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {as_str(v)}" for k, v in value.items() if as_str(v))
    if isinstance(value, list | tuple):
        return ", ".join(as_str(v) for v in value)
    return as_str(value)


def _profile_name(profile: Any) -> str:
    if isinstance(profile, Mapping):
        return as_str(first(profile, "name", "id", "target"))
    return as_str(profile)


def build_result(data: Any) -> BuildView | None:
    """The build result, or None when the build phase did not run."""
    if not isinstance(data, Mapping):
        return None
    status = as_str(first(data, "status", "outcome")) or ("passed" if data.get("ok") else "unknown")
    return BuildView(
        status=status,
        profile=_profile_name(data.get("profile")),
        duration_s=as_float(first(data, "duration_s", "duration", "seconds")),
        log=as_str(first(data, "log", "log_path")),
        version=as_str(first(data, "installed_version", "version")),
        message=as_str(first(data, "message", "reason", "error")),
        checks=_checks(data),
        command=command(data, label="build"),
        log_tail=_lines(first(data, "log_tail", "tail")),
    )


def _lines(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(value.splitlines())
    return tuple(as_str(line) for line in as_list(value))


def _checks(data: Mapping[str, Any]) -> tuple[CheckView, ...]:
    checks = first(data, "checks", "counts")
    if isinstance(checks, str):
        return tuple(CheckView(name=n, passed=p, total=t) for n, p, t in fractions(checks))
    out = []
    for name, value in as_dict(checks).items():
        label = str(name).replace("_", " ")
        if isinstance(value, Mapping):
            passed, total = as_int(value.get("passed")), as_int(value.get("total"))
            failed = tuple(as_str(x) for x in as_list(value.get("failed")))
            if passed is not None and total is not None:
                out.append(CheckView(name=label, passed=passed, total=total, failed=failed))
        elif isinstance(value, list | tuple):
            items = [as_dict(x) for x in value]
            bad = tuple(as_str(first(x, "name", "module", "op")) for x in items if not _item_ok(x))
            out.append(CheckView(name=label, passed=len(items) - len(bad), total=len(items), failed=bad))
    if not out:
        summary = as_str(first(data, "summary", "checks_summary"))
        out = [CheckView(name=n, passed=p, total=t) for n, p, t in fractions(summary)]
    return tuple(out)


def _item_ok(item: Mapping[str, Any]) -> bool:
    if "ok" in item:
        return bool(item["ok"])
    return as_str(first(item, "status", "result")) in ("passed", "ok", "pass")


def gate_tiers(data: Any) -> tuple[TierView, ...]:
    """Gate results grouped by tier, tiers in pipeline order (unknown tiers last).

    Accepts ``{tier: [gate, ...]}``, ``{"tiers": {...}}``, ``{tier: {"gates": [...]}}`` or a flat list.
    """
    data = as_dict(data).get("tiers", data)
    grouped: dict[str, list[GateView]] = {}
    if isinstance(data, Mapping):
        for tier, gates in data.items():
            items = as_list(as_dict(gates).get("gates")) if isinstance(gates, Mapping) else as_list(gates)
            grouped.setdefault(str(tier), []).extend(gate(g, tier=str(tier)) for g in items if isinstance(g, Mapping))
    else:
        for g in as_list(data):
            if isinstance(g, Mapping):
                view = gate(g, tier=as_str(g.get("tier")) or "unit")
                grouped.setdefault(view.tier, []).append(view)
    order = [t for t in GATE_TIERS if t in grouped] + sorted(t for t in grouped if t not in GATE_TIERS)
    return tuple(
        TierView(tier=t, status=_worst(g.status for g in grouped[t]), gates=tuple(grouped[t]))
        for t in order
        if grouped[t]
    )


def _worst(statuses: Any) -> str:
    found = set(statuses)
    return next((s for s in _SEVERITY if s in found), next(iter(sorted(found)), "unknown"))


def gate(data: Mapping[str, Any], *, tier: str) -> GateView:
    """One gate result; counts are read from ``counts`` or from the top level."""
    counts = as_dict(data.get("counts")) or dict(data)
    values = {key: as_int(counts.get(key)) or 0 for key in COUNT_KEYS}
    if not values["errors"]:
        values["errors"] = as_int(counts.get("error")) or 0
    if not values["env_only"]:
        values["env_only"] = as_int(first(counts, "environment_only", "env-only")) or 0
    failures = tuple(_failure(f) for f in as_list(data.get("failures")) if isinstance(f, Mapping | str))
    categories = tally(f.category for f in failures if f.env_only and f.category)
    name = as_str(first(data, "name", "gate", "id")) or "(unnamed)"
    return GateView(
        name=name,
        tier=as_str(data.get("tier")) or tier,
        kind=as_str(data.get("kind")),
        status=as_str(first(data, "status", "outcome")) or "unknown",
        **values,
        description=as_str(first(data, "description", "covers", "title")),
        duration_s=as_float(first(data, "duration_s", "duration", "seconds")),
        reason=as_str(first(data, "reason", "message", "skip_reason")),
        failures=failures,
        env_categories=categories,
        command=command(data, label=name),
    )


def _failure(data: Any) -> FailureView:
    if isinstance(data, str):
        return FailureView(test=data)
    category = as_str(first(data, "category", "env_category", "classification"))
    env_only = data.get("env_only", data.get("environment_only"))
    return FailureView(
        test=as_str(first(data, "test", "nodeid", "node_id", "name")) or "(unknown test)",
        category=category,
        reason=as_str(first(data, "reason", "message", "detail")),
        env_only=bool(env_only) if env_only is not None else bool(category and category != "real"),
    )


def probe_group(data: Any, *, name: str) -> ProbeGroup | None:
    """Kernel checks or serving probes with their A/B rows; None when that tier did not run."""
    if isinstance(data, list | tuple):
        data = {"probes": data}
    if not isinstance(data, Mapping):
        return None
    probes = tuple(_probe(p) for p in as_list(first(data, "probes", "checks", "ops")) if isinstance(p, Mapping))
    rows = tuple(_ab(r) for r in as_list(first(data, "ab", "ab_rows", "comparisons")) if isinstance(r, Mapping))
    if not probes and not rows:
        return None
    return ProbeGroup(name=name, status=as_str(data.get("status")), probes=probes, ab=rows)


def _probe(data: Mapping[str, Any]) -> ProbeView:
    return ProbeView(
        name=as_str(first(data, "name", "probe", "op")) or "(unnamed)",
        status=as_str(first(data, "status", "verdict")) or "unknown",
        value=_number_text(data.get("value")),
        baseline=_number_text(data.get("baseline")),
        unit=as_str(data.get("unit")),
        detail=as_str(first(data, "detail", "reason", "message")),
    )


def _number_text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return as_str(value)
    if isinstance(value, int) or value.is_integer():
        return f"{int(value):,}"
    return f"{value:,}"


def _ab(data: Mapping[str, Any]) -> ABRow:
    return ABRow(
        metric=as_str(first(data, "metric", "name")) or "(unnamed)",
        baseline_median=as_float(data.get("baseline_median")),
        candidate_median=as_float(data.get("candidate_median")),
        delta_pct=as_float(data.get("delta_pct")),
        ci_low_pct=as_float(data.get("ci_low_pct")),
        ci_high_pct=as_float(data.get("ci_high_pct")),
        verdict=as_str(data.get("verdict")),
    )


def commands(validation: ValidationView) -> tuple[CommandView, ...]:
    """The exact commands behind the build and each gate, build first, duplicates dropped."""
    found: list[CommandView] = []
    if validation.build and validation.build.command:
        found.append(validation.build.command)
    found.extend(g.command for t in validation.tiers for g in t.gates if g.command and g.status != "skipped")
    seen: set[str] = set()
    unique = []
    for cmd in found:
        if cmd.text not in seen:
            seen.add(cmd.text)
            unique.append(cmd)
    return tuple(unique)
