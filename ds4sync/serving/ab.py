"""A/B runs: a baseline and a candidate measured alike, in randomised order, judged per metric.

A side is one of:

- recorded measurements: JSON files, each one measurement (a ``vllm bench serve --save-result``
  file, a serving-gate result, or a run record holding one), or one samples file
  ``{"samples": {"metric": [v1, v2, ...]}}``; pairs are taken in file/sample order;
- a live server: a base URL to attach to, or a serving config (YAML) whose command starts it.

Both sides must be of one kind: both recorded, both attached, or both started by ds4sync (a warm
attached server against a cold started one measures the start, not the build; mixing is refused).
Live runs are fair by construction:

- order: randomised balanced blocks (``A B B A`` / ``B A A B``, seed recorded; see ``abstats``);
- warm-up: every server gets ``warmup_runs`` unmeasured runs of the rows after it became ready
  (attached: before the first measured run), and every row its own ``--num-warmups`` requests;
- prefix cache: every measured run draws its prompts with its own seed, and asks the server's
  ``/reset_prefix_cache`` first (where the server has it);
- load: the same bench rows, the same seeds' shapes, on both sides;
- started servers: ``servers: alternate`` restarts the side's server for every run (one GPU is
  enough; each run follows a fresh start and its warm-up), ``servers: both`` starts both once, on
  their own ports, and keeps both warm.

A candidate run that loses requests (completed < prompts) is a regression, never a usage error; a
baseline that lost requests, a run without a readable bench result or a server that did not start
make the result an error (nothing trustworthy measured). A run far from the others of its side has
its pair re-run once. Every result names its pairs, order, seed, re-runs and intervals.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from ds4sync.core.children import ChildRegistry
from ds4sync.core.errors import ConfigError
from ds4sync.core.files import write_json_atomic
from ds4sync.core.model import updated
from ds4sync.models.serving_abstats import (
    MetricRule,
    compare_metric,
    family_confidence,
    outlying_pairs,
    overall_verdict,
    rules_for,
    schedule,
)
from ds4sync.models.serving_results import (
    CONFIDENCE,
    MIN_PAIRS,
    ABResult,
    MetricComparison,
    Mode,
    Side,
    StepRecord,
    Verdict,
)
from ds4sync.models.serving_settings import (
    BENCH_KEYS,
    ROW_EXTRA_KEYS,
    BenchConfig,
    BenchRow,
    ServerConfig,
    read_serving_file,
)
from ds4sync.serving import bench
from ds4sync.serving.server import ServerHandle, ServerStartError, attach, start_server, stop_server, wait_ready

Samples = dict[str, list[float]]
Measure = Callable[[str, int], dict[str, float]]
ServersPolicy = Literal["alternate", "both"]
JUDGED_BY_DEFAULT = ("output_throughput", "median_tpot_ms", "median_ttft_ms")
LOST = "lost_requests"
DEFAULT_ROW = BenchRow(name="decode", input_len=128, output_len=128, num_prompts=8, concurrency=1)


def measurement_from_json(data: Any) -> dict[str, float]:
    """One measurement (metric -> value) from a bench result, a serving result, or a run record.

    Bench rows become ``<row>.<key>`` for every kept bench key; a bench file alone gives bare keys;
    a serving result also gives ``kv_cache_tokens``.
    """
    if not isinstance(data, dict):
        return {}
    if "results" in data and isinstance(data["results"], dict):  # a run record
        return measurement_from_json(data["results"].get("serving"))
    if "completed" in data and "output_throughput" in data:  # one bench --save-result file
        return bench.row_values(data, None, num_prompts=int(data.get("num_prompts") or 0))
    out: dict[str, float] = {}
    for probe in data.get("probes") or ():
        if probe.get("name") == "kv_capacity" and probe.get("value") is not None:
            out["kv_cache_tokens"] = float(probe["value"])
        for row in (probe.get("details") or {}).get("rows") or ():
            out.update({f"{row['name']}.{k}": float(v) for k, v in (row.get("metrics") or {}).items()})
    return out


def load_recorded(paths: Sequence[Path]) -> Samples:
    """Samples from recorded JSON files (see the module doc).

    Raises:
        ConfigError: a file is unreadable or holds nothing measurable.
    """
    samples: Samples = {}
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read recorded measurements ({exc})", where=str(path)) from exc
        if isinstance(data, dict) and isinstance(data.get("samples"), dict):
            for metric, values in data["samples"].items():
                samples.setdefault(metric, []).extend(float(v) for v in values)
            continue
        one = measurement_from_json(data)
        if not one:
            raise ConfigError(
                "no measurement found (expected bench JSON, a serving result, a run record or {samples: {...}})",
                where=str(path),
            )
        for metric, value in one.items():
            samples.setdefault(metric, []).append(value)
    return samples


def unit_of(metric: str) -> str:
    """The unit of a metric key (``d.p99_ttft_ms`` -> ms)."""
    key = metric.rsplit(".", 1)[-1]
    return BENCH_KEYS.get(key) or ROW_EXTRA_KEYS.get(key) or ("tokens" if key == "kv_cache_tokens" else "")


def judged_metrics(measured: Sequence[str], rules: Mapping[str, MetricRule]) -> list[str]:
    """The metrics a verdict is made of: those of ``rules``, else each row's throughput, median TPOT and TTFT
    (else every measured metric).

    Raises:
        ConfigError: a rule names a metric that was not measured (a misspelt key is never ignored).
    """
    if rules:
        unknown = sorted(k for k in rules if k not in measured)
        if unknown:
            raise ConfigError(
                f"ab_metrics names metric(s) that were not measured: {', '.join(unknown)} "
                f"(measured: {', '.join(sorted(measured))})",
                where="serving.ab_metrics",
                fix="use the measured names, e.g. <row>.output_throughput or <row>.p99_ttft_ms",
            )
        return [m for m in measured if m in rules]
    default = [m for m in measured if m.rsplit(".", 1)[-1] in JUDGED_BY_DEFAULT]
    return default or [m for m in measured if m.rsplit(".", 1)[-1] != LOST]


def compare_samples(
    baseline: Samples,
    candidate: Samples,
    rules: Mapping[str, MetricRule],
    *,
    labels: tuple[str, str],
    confidence: float = CONFIDENCE,
    min_pairs: int = MIN_PAIRS,
    mode: Mode = "recorded",
    notes: Sequence[str] = (),
    order: Sequence[str] = (),
    seed: int | None = None,
    steps: Sequence[StepRecord] = (),
    strict_pairs: bool = True,
    error: str | None = None,
    reruns: Sequence[str] = (),
) -> ABResult:
    """Judge the metrics both sides have; pairs are (baseline[i], candidate[i]).

    Lost requests (``*.lost_requests``) are not a statistic: a candidate that lost more requests
    than the baseline is a regression, whatever the rest says; a baseline that lost requests, a run
    without a readable result (:func:`unmeasured`) or ``error`` (a server that did not start) make
    the result an error (``ABResult.error``; exit :attr:`~ds4sync.core.errors.ExitCode.NOT_MEASURED`).

    Raises:
        ConfigError: no metric in common, ``rules`` naming an unmeasured metric, or (``strict_pairs``,
            recorded files) different numbers of samples for a metric.
    """
    rows, reported = _compared_rows(
        baseline, candidate, rules, labels=labels, confidence=confidence, min_pairs=min_pairs, strict_pairs=strict_pairs
    )
    lost = _lost_requests(baseline, candidate)
    error = unmeasured(steps, lost, paired=bool(rows)) if error is None else error
    verdict, reasons = _verdict(rows, lost, min_pairs=min_pairs, error=error)
    return ABResult(
        baseline=labels[0],
        candidate=labels[1],
        mode=mode,
        pairs=max((r.pairs for r in rows), default=0),
        order=tuple(order),
        seed=seed,
        confidence=confidence,
        min_pairs=min_pairs,
        verdict=verdict,
        reasons=tuple(reasons),
        lost=lost,
        rows=tuple(rows),
        reported=tuple(reported),
        steps=tuple(steps),
        notes=tuple(notes),
        error=error,
        reruns=tuple(reruns),
    )


def _compared_rows(
    baseline: Samples,
    candidate: Samples,
    rules: Mapping[str, MetricRule],
    *,
    labels: tuple[str, str],
    confidence: float,
    min_pairs: int,
    strict_pairs: bool,
) -> tuple[list[MetricComparison], list[MetricComparison]]:
    """Every metric both sides have (lost requests aside) compared: the judged rows, then those only reported.

    Raises:
        ConfigError: no metric in common, ``rules`` naming an unmeasured metric, or (``strict_pairs``)
            different numbers of samples for a metric.
    """
    common = [m for m in baseline if m in candidate]
    if not common:
        raise ConfigError(
            f"baseline and candidate share no metric (baseline: {sorted(baseline)}, candidate: {sorted(candidate)})",
            where=f"{labels[0]} vs {labels[1]}",
        )
    stats = [m for m in common if m.rsplit(".", 1)[-1] != LOST]
    judged = judged_metrics(stats, rules)
    level = family_confidence(confidence, len(judged))
    rule_of = rules_for(stats, rules)
    rows: list[MetricComparison] = []
    reported: list[MetricComparison] = []
    for metric in stats:
        a, b = baseline[metric], candidate[metric]
        if len(a) != len(b):
            if strict_pairs:
                raise ConfigError(
                    f"{metric}: {len(a)} baseline vs {len(b)} candidate measurements; pairs need both",
                    where=f"{labels[0]} vs {labels[1]}",
                    fix="give the same number of runs per side",
                )
            a, b = a[: min(len(a), len(b))], b[: min(len(a), len(b))]
        if not a:
            continue
        row = compare_metric(metric, a, b, rule_of[metric], unit=unit_of(metric), confidence=level, min_pairs=min_pairs)
        (rows if metric in judged else reported).append(row)
    return rows, reported


def _lost_requests(baseline: Samples, candidate: Samples) -> dict[str, float]:
    """Requests each side lost, summed over its runs and rows: ``{"baseline": n, "candidate": n}``."""
    return {
        "baseline": sum(v for m, vs in baseline.items() if m.endswith(LOST) for v in vs),
        "candidate": sum(v for m, vs in candidate.items() if m.endswith(LOST) for v in vs),
    }


def _verdict(
    rows: Sequence[MetricComparison], lost: Mapping[str, float], *, min_pairs: int, error: str | None
) -> tuple[Verdict, list[str]]:
    """The overall verdict and its reasons: the judged rows' verdict, overruled by lost requests, too few
    pairs (a reason only) and an error (inconclusive)."""
    verdict: Verdict = overall_verdict(rows) if rows else "inconclusive"
    reasons = [f"{r.metric}: {r.verdict}" for r in rows if r.verdict in ("regression", "improvement")]
    if lost["candidate"] > lost["baseline"]:
        verdict = "regression"
        reasons.insert(0, f"candidate lost {lost['candidate']:g} request(s) (baseline {lost['baseline']:g})")
    elif lost["baseline"] > 0:
        reasons.insert(0, f"baseline lost {lost['baseline']:g} request(s); the comparison is not trustworthy")
        verdict = "regression" if verdict == "regression" else "inconclusive"
    if not rows:
        reasons.append("no metric could be paired")
    pairs = max((r.pairs for r in rows), default=0)
    if 0 < pairs < min_pairs:
        reasons.append(f"{pairs} pair(s) is below the minimum of {min_pairs}: inconclusive by rule")
    if error is not None:
        verdict = "inconclusive"
    return verdict, reasons


def unmeasured(steps: Sequence[StepRecord], lost: Mapping[str, float], *, paired: bool) -> str | None:
    """Why an A/B measured nothing trustworthy, or None: a run with no readable bench result (a broken
    bench command, results written elsewhere), a baseline that lost requests, or no pair at all.

    A candidate that lost requests is not here: that is a measured regression.
    """
    problems = [
        f"side {s.side} run {s.step}: no readable result from row(s) {', '.join(s.unreadable)}"
        + (f" ({s.detail[:200]})" if s.detail else "")
        for s in steps
        if s.unreadable and not s.replaced
    ]
    if lost.get("baseline", 0) > 0:
        problems.append(f"the baseline lost {lost['baseline']:g} request(s)")
    if not paired:
        problems.append("no metric could be paired")
    return "; ".join(problems) or None


def run_schedule(
    order: Sequence[Side],
    measure: Measure,
    *,
    describe: Callable[[int], dict[str, Any]] | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
    steps: list[StepRecord] | None = None,
) -> tuple[Samples, Samples, list[StepRecord]]:
    """Call ``measure(side, step)`` in ``order``; the k-th A and k-th B runs form pair k.

    ``describe(step)`` adds what the measurer knows of a run (seed, prefix-cache handling, boot time);
    ``on_step`` gets each run as soon as it is measured (to keep it on disk); ``steps``, when given,
    is the list the runs are appended to (what was measured before an interrupt stays in it).
    A metric missing from one run of a pair (a failed run) leaves that pair out of that metric.
    """
    steps = [] if steps is None else steps
    seen = {"A": 0, "B": 0}
    for step, side in enumerate(order):
        values = measure(side, step)
        record = StepRecord(
            step=step, side=side, pair=seen[side], values=values, **(describe(step) if describe else {})
        )
        seen[side] += 1
        steps.append(record)
        if on_step is not None:
            on_step(record)
    return (*samples_from_steps(steps), steps)


def _pairs(steps: Sequence[StepRecord]) -> dict[int, tuple[StepRecord, StepRecord]]:
    """Complete pairs of the runs not replaced: ``{pair: (A run, B run)}``, in pair order."""
    runs: dict[str, dict[int, StepRecord]] = {"A": {}, "B": {}}
    counters = {"A": 0, "B": 0}
    for s in steps:
        if s.replaced:
            continue
        runs[s.side][s.pair if s.pair is not None else counters[s.side]] = s
        counters[s.side] += 1
    return {p: (runs["A"][p], runs["B"][p]) for p in sorted(runs["A"].keys() & runs["B"].keys())}


def samples_from_steps(steps: Sequence[StepRecord]) -> tuple[Samples, Samples]:
    """Per-metric paired samples from measured runs (replaced runs left out): pair k is the k-th A run
    and the k-th B run."""
    base: Samples = {}
    cand: Samples = {}
    for ra, rb in _pairs(steps).values():
        for metric in sorted(ra.values.keys() | rb.values.keys()):
            if metric.endswith(LOST):
                base.setdefault(metric, []).append(ra.values.get(metric, 0.0))
                cand.setdefault(metric, []).append(rb.values.get(metric, 0.0))
            elif metric in ra.values and metric in rb.values:
                base.setdefault(metric, []).append(ra.values[metric])
                cand.setdefault(metric, []).append(rb.values[metric])
    return base, cand


EVIDENCE = ("preemptions", "waiting_max", "running_max", "kv_usage_max_pct", "max_gap_s", "boot_s")
#: A run during which the server left /metrics unanswered this long (s) stalled, whatever its numbers say.
STALL_GAP_S = 10.0


def stalled_pairs(pairs: Mapping[int, tuple[StepRecord, StepRecord]]) -> dict[int, str]:
    """Pairs with a run during which the server stopped answering (``<row>.max_gap_s`` >= :data:`STALL_GAP_S`):
    the server's own evidence of a stall, which no spread of the other runs can hide."""
    found: dict[int, str] = {}
    for index, runs in enumerate(pairs.values()):
        for run in runs:
            gaps = [v for k, v in run.values.items() if k.endswith("max_gap_s") and v >= STALL_GAP_S]
            if gaps and index not in found:
                found[index] = (
                    f"the server left /metrics unanswered for {max(gaps):.1f} s during run {run.step} ({run.side})"
                )
    return found


def rerun_outliers(
    steps: list[StepRecord],
    measure: Measure,
    metrics: Sequence[str],
    *,
    describe: Callable[[int], dict[str, Any]] | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
    progress: Callable[[str], None] = lambda _m: None,
) -> list[str]:
    """Re-run, once, each pair holding a stalled run (:func:`stalled_pairs`) or a run far from the others of
    its side in one of ``metrics`` (:func:`~ds4sync.models.serving_abstats.outlying_pairs`); stalls first, at most a
    third of the pairs, at least one.

    The pair's two runs are measured again in their first order, after the schedule; the old runs stay in
    ``steps`` marked ``replaced``. Returns one line per re-run pair: what was off, and the server's
    ``/metrics`` over the outlying runs (preemptions, waiting requests, KV usage) as evidence.
    """
    pairs = _pairs(steps)
    ids = list(pairs)
    a_side = {m: [pairs[p][0].values[m] for p in ids] for m in metrics if all(m in pairs[p][0].values for p in ids)}
    b_side = {m: [pairs[p][1].values[m] for p in ids] for m in metrics if all(m in pairs[p][1].values for p in ids)}
    found = stalled_pairs(pairs)
    found.update({i: why for i, why in outlying_pairs(a_side, b_side).items() if i not in found})
    lines: list[str] = []
    for index, why in list(found.items())[: max(1, len(ids) // 3)]:
        pair = ids[index]
        old = sorted(pairs[pair], key=lambda s: s.step)
        evidence = "; ".join(
            f"run {s.step} ({s.side}) "
            + ", ".join(
                f"{k.rsplit('.', 1)[-1]} {v:g}" for k, v in s.values.items() if k.rsplit(".", 1)[-1] in EVIDENCE
            )
            for s in old
        )
        progress(f"pair {pair} is an outlier ({why}); re-running it once")
        for s in old:
            steps[steps.index(s)] = updated(s, replaced=True)
        for s in old:
            step = len(steps)
            values = measure(s.side, step)
            record = StepRecord(
                step=step, side=s.side, pair=pair, values=values, **(describe(step) if describe else {})
            )
            steps.append(record)
            if on_step is not None:
                on_step(record)
        lines.append(
            f"pair {pair} re-run (runs {old[0].step}, {old[1].step} -> {len(steps) - 2}, {len(steps) - 1}): {why}"
            + (f"; server metrics: {evidence}" if evidence else "")
        )
    return lines


class LiveSides:
    """Two live servers measured with the same bench rows, alike (see the module doc).

    ``sides`` maps ``A``/``B`` to a :class:`ServerConfig` (both attached or both started);
    ``out_dir`` receives server logs and bench results per step; ``seed`` makes each run's prompt
    seed (:func:`run_seed`).
    """

    def __init__(
        self,
        sides: Mapping[str, ServerConfig],
        bench_config: BenchConfig,
        *,
        out_dir: Path,
        servers: ServersPolicy = "alternate",
        warmup_runs: int = 1,
        seed: int = 0,
        registry: ChildRegistry | None = None,
        progress: Callable[[str], None] = lambda _m: None,
    ) -> None:
        kinds = {name: cfg.command is not None for name, cfg in sides.items()}
        if len(set(kinds.values())) != 1:
            raise ConfigError(
                "one side is a running server (URL) and the other one ds4sync would start: a warm server against "
                "a cold one measures the start, not the build",
                where=" vs ".join(c.url for c in sides.values()),
                fix="give both sides as URLs (both attached) or both as serving configs (both started by ds4sync)",
            )
        self.started = next(iter(kinds.values()))
        self.servers = servers
        self.sides = dict(sides)
        # both sides from one config: B gets a free port of its own (and another one if that is taken before B
        # binds it, e.g. by A's engine for its own sockets)
        self._own_port = {"B"} if self.started and servers == "both" and sides["A"].url == sides["B"].url else set()
        if self._own_port:
            self.sides["B"] = _other_port(sides["B"])
        self.bench = bench_config
        self.rows = bench_config.rows or (DEFAULT_ROW,)
        self.out_dir = out_dir
        self.warmup_runs = warmup_runs
        self.seed = seed
        self.registry = registry
        self.progress = progress
        self._running: dict[str, ServerHandle] = {}
        self._warm: set[str] = set()
        self._boot: dict[str, float] = {}
        self.boot_s: dict[str, list[float]] = {"A": [], "B": []}
        self.step_info: dict[int, dict[str, Any]] = {}

    @property
    def mode(self) -> Mode:
        """How the sides were run."""
        if not self.started:
            return "attached"
        return "started-both" if self.servers == "both" else "started-alternate"

    def _start(self, side: str, step: int) -> ServerHandle:
        for attempt in (1, 2):
            if attempt == 2:
                self.sides[side] = _other_port(self.sides[side])
            config = self.sides[side]
            log = self.out_dir / f"server-{side}.log"
            self.progress(f"starting side {side}: {' '.join(config.argv())}")
            handle = start_server(config, log_path=log, registry=self.registry)
            self._running[side] = handle
            try:
                wait_ready(handle, progress=self.progress)
                break
            except ServerStartError as exc:
                tail = exc.outcome.log_tail if exc.outcome else ()
                lost_port = exc.kind == "died" and any("Address already in use" in line for line in tail)
                if attempt == 2 or side not in self._own_port or not lost_port:
                    raise
                stop_server(self._running.pop(side))  # the dead try's group ends and leaves the registry
                self.progress(f"side {side}: its port was taken before it bound it; again on another port")
        if handle.ready_s is not None:
            self._boot[side] = handle.ready_s
            self.boot_s[side].append(handle.ready_s)
        return handle

    def server(self, side: str, step: int) -> ServerHandle:
        """The ready server of ``side`` for run ``step`` (started, restarted or attached per the policy)."""
        if not self.started:
            handle = self._running.get(side) or attach(self.sides[side])
            if side not in self._running:
                wait_ready(handle, progress=self.progress)
                self._running[side] = handle
            return handle
        if self.servers == "alternate":
            self.close()
            self._warm.clear()
            return self._start(side, step)
        if not self._running:
            for name in ("A", "B"):
                self._start(name, step)
        return self._running[side]

    def handle(self, side: str) -> ServerHandle:
        """The running server of ``side`` (after :meth:`measure` of that side).

        Raises:
            KeyError: no server of that side runs.
        """
        return self._running[side]

    def _warm_up(self, side: str, handle: ServerHandle, step: int) -> None:
        if side in self._warm or self.warmup_runs <= 0:
            return
        with handle.client() as client:
            for i in range(self.warmup_runs):
                for row in self.rows:
                    bench.run_row(
                        self.bench,
                        row,
                        client=client,
                        out_dir=self.out_dir / f"warmup-{side}-{step:02d}-{i}",
                        seed=run_seed(self.seed, step, f"warmup-{side}-{i}"),
                    )
        self._warm.add(side)

    def measure(self, side: str, step: int) -> dict[str, float]:
        """One measured run of ``side``: every bench row's values (``<row>.<key>``), lost requests included,
        and the side's boot time (``boot_s``) when its server started for this run.

        A row without a readable result is named in the run's ``unreadable``; it never raises for a broken
        bench, only :class:`~ds4sync.serving.server.ServerStartError` for a server that did not start.
        """
        handle = self.server(side, step)
        self._warm_up(side, handle, step)
        out: dict[str, float] = {}
        details: list[str] = []
        unreadable: list[str] = []
        info: dict[str, Any] = {"seed": run_seed(self.seed, step), "ok": True}
        with handle.client() as client:
            for row in self.rows:
                res = bench.run_row(
                    self.bench, row, client=client, out_dir=self.out_dir / f"step{step:02d}-{side}", seed=info["seed"]
                )
                values = dict(res.metrics)
                if not values:
                    unreadable.append(row.name)
                info["ok"] = info["ok"] and res.ok
                info["prefix_cache"] = res.prefix_cache
                details.append(f"{row.name}: {res.detail[:300]}")
                self.progress(f"step {step} side {side} {row.name}: {res.detail[:160]}")
                out.update({f"{row.name}.{k}": v for k, v in values.items()})
        if side in self._boot:
            out["boot_s"] = info["boot_s"] = self._boot.pop(side)
        self.step_info[step] = {**info, "unreadable": tuple(unreadable), "detail": "; ".join(details)}
        return out

    def describe(self, step: int) -> dict[str, Any]:
        """What is known of measured run ``step``: seed, prefix-cache handling, boot time, ok and detail."""
        return self.step_info.get(step, {})

    def close(self) -> None:
        """Stop every server ds4sync started."""
        for handle in self._running.values():
            stop_server(handle)
        self._running.clear()


def run_seed(seed: int, step: int, kind: str = "run") -> int:
    """The prompt seed of one run: derived from the A/B's seed, the run and its kind, in [0, 2**31)
    (``vllm bench serve --seed`` takes what numpy takes); distinct runs get distinct seeds."""
    return random.Random(f"{seed}:{kind}:{step}").getrandbits(31)


def _other_port(config: ServerConfig) -> ServerConfig:
    import socket

    with socket.socket() as sock:
        sock.bind((config.host, 0))
        port = int(sock.getsockname()[1])
    return updated(config, port=port)


def side_config(spec: str, *, model: str | None) -> ServerConfig | None:
    """A live side from ``spec``: an http(s) URL (needs ``model``) or a serving-config YAML; else None."""
    if spec.startswith(("http://", "https://")):
        if not model:
            raise ConfigError("attaching to a URL needs the served model name", where=spec, fix="pass --model NAME")
        return ServerConfig(base_url=spec, model=model)
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return read_serving_file(path).server
    return None


def new_seed() -> int:
    """A fresh schedule/prompt seed (recorded in the result, so a run can be repeated)."""
    return random.SystemRandom().randrange(1, 2**31)


def run_ab(
    baseline: Sequence[str],
    candidate: Sequence[str],
    *,
    pairs: int = 6,
    out_dir: Path,
    bench_config: BenchConfig | None = None,
    rules: Mapping[str, MetricRule] | None = None,
    model: str | None = None,
    confidence: float = CONFIDENCE,
    min_pairs: int = MIN_PAIRS,
    seed: int | None = None,
    servers: ServersPolicy = "alternate",
    warmup_runs: int = 1,
    registry: ChildRegistry | None = None,
    progress: Callable[[str], None] = lambda _m: None,
) -> ABResult:
    """Compare two sides given as recorded JSON files, URLs or serving-config YAMLs (see the module doc).

    Live runs are kept in ``<out_dir>/steps.jsonl`` as they are measured; outlying pairs are re-run once
    (:func:`rerun_outliers`); a server that did not start is the result's ``error``, not an exception.

    Raises:
        ConfigError: an empty side, sides of different kinds, unreadable files, no common metric, an unknown
            ab_metrics key.
        Interrupted: Ctrl-C, after the servers were stopped; ``result`` (the runs measured so far, judged)
            is written to ``<out_dir>/ab.json``.
    """
    _require_both_sides(baseline, candidate)
    labels = (", ".join(baseline), ", ".join(candidate))
    live = _live_configs(baseline, candidate, model=model, labels=labels)
    if live is None:
        return _compare_recorded(
            baseline, candidate, rules or {}, labels=labels, confidence=confidence, min_pairs=min_pairs
        )
    seed = new_seed() if seed is None else seed
    sides = LiveSides(
        {"A": live[0], "B": live[1]},
        bench_config or BenchConfig(),
        out_dir=out_dir,
        servers=servers,
        warmup_runs=warmup_runs,
        seed=seed,
        registry=registry,
        progress=progress,
    )
    judging = _Judging(
        rules or {}, labels, confidence, min_pairs, order=schedule(pairs, seed=seed), seed=seed, pairs=pairs
    )
    return _measure_and_judge(sides, judging, out_dir=out_dir, progress=progress)


def _require_both_sides(baseline: Sequence[str], candidate: Sequence[str]) -> None:
    """Refuse a side that names nothing (it would otherwise fail later, as no common metric or an IndexError)."""
    for side, specs in (("baseline", baseline), ("candidate", candidate)):
        if not specs:
            raise ConfigError(
                f"the {side} side names no recorded file and no server",
                where=side,
                fix="give it JSON file(s), or one URL or serving-config YAML",
            )


def _live_configs(
    baseline: Sequence[str], candidate: Sequence[str], *, model: str | None, labels: tuple[str, str]
) -> list[ServerConfig] | None:
    """The two live sides' server configs, or None when both sides are recorded files.

    Raises:
        ConfigError: one side recorded, the other live.
    """
    live = [
        side_config(s, model=model) if len(specs) == 1 else None for specs in (baseline, candidate) for s in specs[:1]
    ]
    if all(c is None for c in live):
        return None
    if any(c is None for c in live):
        raise ConfigError(
            "both sides must be recorded files, or both live servers",
            where=" vs ".join(labels),
            fix="give each side as JSON file(s), or each as one URL or serving-config YAML",
        )
    return [c for c in live if c is not None]


def _compare_recorded(
    baseline: Sequence[str],
    candidate: Sequence[str],
    rules: Mapping[str, MetricRule],
    *,
    labels: tuple[str, str],
    confidence: float,
    min_pairs: int,
) -> ABResult:
    """The A/B of two sides of recorded JSON files, paired in file order."""
    return compare_samples(
        load_recorded([Path(p) for p in baseline]),
        load_recorded([Path(p) for p in candidate]),
        rules,
        labels=labels,
        confidence=confidence,
        min_pairs=min_pairs,
        notes=("recorded measurements, paired in file order",),
    )


class _Judging(NamedTuple):
    """How a live A/B is judged besides its runs: :func:`compare_live`'s settings, the schedule and its seed."""

    rules: Mapping[str, MetricRule]
    labels: tuple[str, str]
    confidence: float
    min_pairs: int
    order: list[Side]
    seed: int
    pairs: int


def _measure_and_judge(
    sides: LiveSides, judging: _Judging, *, out_dir: Path, progress: Callable[[str], None]
) -> ABResult:
    """Measure the schedule on ``sides`` (:func:`measure_live`), stop their servers, and judge the runs.

    Raises:
        Interrupted: Ctrl-C; its ``result`` (the runs measured so far, judged) is written to ``<out_dir>/ab.json``.
    """
    grace = 3 * max(c.stop_grace_s for c in sides.sides.values())
    try:
        runs = measure_live(
            judging.order,
            sides.measure,
            judging.rules,
            describe=sides.describe,
            out_dir=out_dir,
            progress=progress,
            close=sides.close,
            grace_s=grace,
        )
    except Interrupted as stop:
        cut = LiveRuns(stop.steps, (), f"interrupted after {len(stop.steps)} run(s)")
        stop.result = _judge_live(cut, sides, judging)
        write_json_atomic(out_dir / "ab.json", stop.result.model_dump(mode="json"))
        stop.path = out_dir / "ab.json"
        raise
    finally:
        sides.close()
    return _judge_live(runs, sides, judging)


def _judge_live(runs: LiveRuns, sides: LiveSides, judging: _Judging) -> ABResult:
    """The A/B of ``runs`` (:func:`compare_live`), its notes naming the schedule, the warm-up and the boot times."""
    return compare_live(
        runs,
        judging.rules,
        labels=judging.labels,
        confidence=judging.confidence,
        min_pairs=judging.min_pairs,
        mode=sides.mode,
        order=judging.order,
        seed=judging.seed,
        notes=(
            f"{judging.pairs} pairs in randomised ABBA/BAAB blocks (seed {judging.seed}): {' '.join(judging.order)}",
            f"{sides.warmup_runs} unmeasured warm-up run(s) per server start, {sides.bench.num_warmups} warm-up "
            "requests per row; each run's prompts from their own seed, prefix cache reset where the server allows",
            f"boot times (s): A {_secs(sides.boot_s['A'])}, B {_secs(sides.boot_s['B'])}"
            if sides.started
            else "attached servers (no boot)",
        ),
    )


def _secs(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.1f}" for v in values) or "-"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during live measurements, raised after the servers were stopped.

    ``steps`` holds every run measured so far (also in ``<out>/steps.jsonl``); ``result`` the A/B of
    those runs and ``path`` where it was written, when the caller judged them.
    """

    def __init__(self, steps: list[StepRecord], grace_s: float) -> None:
        super().__init__(f"interrupted after {len(steps)} measured run(s)")
        self.steps = steps
        self.grace_s = grace_s
        self.result: ABResult | None = None
        self.path: Path | None = None


class LiveRuns(NamedTuple):
    """What :func:`measure_live` measured: every run (outliers' re-runs included), the re-run lines, and the
    error that ended it (a server that did not start), else None."""

    steps: list[StepRecord]
    reruns: Sequence[str]
    error: str | None


def compare_live(
    runs: LiveRuns,
    rules: Mapping[str, MetricRule],
    *,
    labels: tuple[str, str],
    confidence: float,
    min_pairs: int,
    mode: Mode,
    order: Sequence[str],
    seed: int,
    notes: Sequence[str] = (),
) -> ABResult:
    """The A/B of live ``runs`` (:func:`compare_samples`): pairs as :func:`samples_from_steps` makes them, so
    a run without a result leaves its pair out (not strict); with no sample on a side only lost requests
    are judged, and the result is an error.

    Raises:
        ConfigError: ``rules`` name a metric that was not measured.
    """
    base, cand = samples_from_steps(runs.steps)
    if not base or not cand:
        base, cand = {LOST: []}, {LOST: []}
    return compare_samples(
        base,
        cand,
        rules,
        labels=labels,
        confidence=confidence,
        min_pairs=min_pairs,
        mode=mode,
        notes=notes,
        order=order,
        seed=seed,
        steps=runs.steps,
        strict_pairs=False,
        error=runs.error,
        reruns=runs.reruns,
    )


def measure_live(
    order: Sequence[Side],
    measure: Measure,
    rules: Mapping[str, MetricRule],
    *,
    describe: Callable[[int], dict[str, Any]] | None,
    out_dir: Path,
    close: Callable[[], None],
    grace_s: float,
    progress: Callable[[str], None] = lambda _m: None,
) -> LiveRuns:
    """Measure ``order``, then re-run outlying pairs once (:func:`rerun_outliers` on the judged metrics).

    Every run is appended to ``<out_dir>/steps.jsonl`` as soon as it is measured. Returns the runs, the
    re-run lines and an error (a server that did not start), never raising for that.

    Raises:
        Interrupted: on Ctrl-C, after ``close()`` stopped the servers (within ``grace_s``).
        ConfigError: ``rules`` name a metric that was not measured.
    """
    steps: list[StepRecord] = []
    kept = out_dir / "steps.jsonl"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text("", encoding="utf-8")

    def keep(record: StepRecord) -> None:
        with kept.open("a", encoding="utf-8") as handle:
            handle.write(record.model_dump_json() + "\n")

    try:
        run_schedule(order, measure, describe=describe, on_step=keep, steps=steps)
        base, _cand = samples_from_steps(steps)
        judged = judged_metrics([m for m in base if not m.endswith(LOST)], rules)
        return LiveRuns(
            steps, rerun_outliers(steps, measure, judged, describe=describe, on_step=keep, progress=progress), None
        )
    except ServerStartError as exc:
        return LiveRuns(steps, [], f"a server did not start ({exc.kind}): {exc.one_line()}")
    except KeyboardInterrupt:
        progress(f"interrupted after {len(steps)} measured run(s); stopping the servers (at most {grace_s:g} s)")
        close()
        progress(f"measured runs kept in {kept}")
        raise Interrupted(steps, grace_s) from None
