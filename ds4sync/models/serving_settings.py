"""The ``serving:`` section of ds4sync.yaml: the server, the probes and their baselines.

Host and port have one source of truth, :class:`ServerConfig`: a server command refers to
them as ``{host}`` and ``{port}`` (and the model as ``{model}``), and every URL is derived
from them; with ``base_url`` (attach mode) they are parsed from that URL instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from ds4sync.core.model import FrozenModel, read_yaml, validate
from ds4sync.models.serving_abstats import MetricRule

ProbeName = Literal["health", "exact", "tool_call", "reasoning", "kv_capacity", "recall", "eval", "throughput"]
PROBE_ORDER: tuple[ProbeName, ...] = (
    "health",
    "exact",
    "tool_call",
    "reasoning",
    "kv_capacity",
    "recall",
    "eval",
    "throughput",
)


class ServerConfig(FrozenModel):
    """How to reach the OpenAI-compatible server: start it from ``command`` or attach to ``base_url``.

    Times are seconds. ``startup_timeout_s`` bounds a started server's boot, ``attach_timeout_s``
    the wait for an attached one to answer; ``stop_grace_s`` is each wait of the stop routine
    (SIGINT, then SIGTERM, then SIGKILL of the server's whole process group).
    """

    command: tuple[str, ...] | None = None
    base_url: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    model: str
    cwd: Path | None = None
    env: dict[str, str] = Field(default_factory=dict)
    startup_timeout_s: float = Field(default=1800.0, gt=0)
    attach_timeout_s: float = Field(default=60.0, gt=0)
    poll_interval_s: float = Field(default=2.0, gt=0)
    stop_grace_s: float = Field(default=60.0, ge=0)
    request_timeout_s: float = Field(default=120.0, gt=0)
    guard_timeout_s: float = Field(default=30.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _one_source(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if bool(data.get("command")) == bool(data.get("base_url")):
            raise ValueError("give exactly one of command (start a server) or base_url (attach to one)")
        if data.get("base_url"):
            parts = urlsplit(str(data["base_url"]))
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"base_url must be http(s)://host:port, got {data['base_url']!r}")
            data = {**data, "host": parts.hostname, "port": parts.port or (443 if parts.scheme == "https" else 80)}
        return data

    @property
    def url(self) -> str:
        """The base URL every request uses (no trailing slash, no ``/v1``)."""
        if self.base_url:
            return self.base_url.rstrip("/")
        return f"http://{self.host}:{self.port}"

    def argv(self) -> tuple[str, ...]:
        """The server command with ``{host}``, ``{port}`` and ``{model}`` filled in (other braces, e.g. JSON
        arguments, are left alone)."""
        values = {"{host}": self.host, "{port}": str(self.port), "{model}": self.model}
        out = []
        for arg in self.command or ():
            for key, value in values.items():
                arg = arg.replace(key, value)
            out.append(arg)
        return tuple(out)


class ExactCase(FrozenModel):
    """One known-answer chat case: messages, sampling (merged into the body) and the expectation.

    ``expect`` is the exact content (after stripping whitespace); ``pattern`` a regex that
    must match somewhere in it (Python ``re.search``). Exactly one of the two.
    """

    name: str
    messages: tuple[dict[str, Any], ...]
    sampling: dict[str, Any] = Field(default_factory=lambda: {"temperature": 0})
    expect: str | None = None
    pattern: str | None = None

    @model_validator(mode="after")
    def _one_expectation(self) -> ExactCase:
        if (self.expect is None) == (self.pattern is None):
            raise ValueError(f"case {self.name}: give exactly one of expect or pattern")
        return self


class ToolCallCase(FrozenModel):
    """A tool-call probe: the tools schema, and the function name and arguments expected back."""

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    expect_name: str
    expect_arguments: dict[str, Any] | None = None
    sampling: dict[str, Any] = Field(default_factory=lambda: {"temperature": 0, "tool_choice": "auto"})


class ReasoningCase(FrozenModel):
    """Reasoning/final routing: with thinking on, reasoning in one of ``fields``, the answer in content."""

    messages: tuple[dict[str, Any], ...]
    sampling: dict[str, Any] = Field(
        default_factory=lambda: {"temperature": 0, "chat_template_kwargs": {"thinking": True}}
    )
    fields: tuple[str, ...] = ("reasoning", "reasoning_content")
    expect_pattern: str | None = None


class KvBaseline(FrozenModel):
    """The KV-cache capacity a build must keep; tolerance in percent (0: any loss fails)."""

    tokens: int | None = Field(default=None, ge=0)
    bytes: int | None = Field(default=None, ge=0)
    tolerance_pct: float = Field(default=0.0, ge=0)


class RecallConfig(FrozenModel):
    """Long-context recall: a generated prompt of about ``tokens`` tokens; seconds for the limit."""

    tokens: int = Field(default=4096, ge=64)
    max_tokens: int = Field(default=32, ge=1)
    timeout_s: float = Field(default=600.0, gt=0)
    sampling: dict[str, Any] = Field(default_factory=lambda: {"temperature": 0})


class EvalConfig(FrozenModel):
    """A repeated exact-answer eval: ``cases`` run ``repeat`` times at ``concurrency``."""

    cases: tuple[ExactCase, ...] = ()
    cases_file: Path | None = None
    repeat: int = Field(default=1, ge=1)
    concurrency: int = Field(default=1, ge=1)
    max_tokens: int = Field(default=512, ge=1)
    timeout_s: float = Field(default=600.0, gt=0)
    min_correct_pct: float = Field(default=90.0, ge=0, le=100)


BENCH_STATS = ("mean", "median", "std", "p50", "p90", "p95", "p99")
BENCH_LATENCIES = ("ttft", "tpot", "itl", "e2el")
# Keys of `vllm bench serve --save-result` (vllm/benchmarks/serve.py) that a row keeps, in its units:
# throughputs per second, latencies in ms.
BENCH_KEYS: dict[str, str] = {
    "completed": "requests",
    "failed": "requests",
    "num_prompts": "requests",
    "duration": "s",
    "total_input_tokens": "tokens",
    "total_output_tokens": "tokens",
    "request_throughput": "req/s",
    "request_goodput": "req/s",
    "output_throughput": "tok/s",
    "total_token_throughput": "tok/s",
    **{f"{stat}_{lat}_ms": "ms" for lat in BENCH_LATENCIES for stat in BENCH_STATS},
    "spec_decode_acceptance_rate": "",
    "spec_decode_acceptance_length": "tokens",
}
# Row values ds4sync adds: lost requests, and /metrics over the row.
ROW_EXTRA_KEYS: dict[str, str] = {
    "lost_requests": "requests",
    "preemptions": "preemptions",
    "running_max": "requests",
    "waiting_max": "requests",
    "kv_usage_max_pct": "%",
    "max_gap_s": "s",
}
# Metrics an A/B measures besides the rows' keys.
AB_EXTRA_METRICS = ("kv_cache_tokens", "boot_s")


class RowLimit(FrozenModel):
    """A bench value held against a baseline: fails when worse than ``baseline`` by more than
    ``tolerance_pct`` percent (direction from the key unless given)."""

    baseline: float = Field(gt=0)
    tolerance_pct: float = Field(default=5.0, ge=0)
    direction: Literal["higher", "lower"] | None = None


class BenchRow(FrozenModel):
    """One ``vllm bench serve`` shape: random input/output lengths, prompts and concurrency.

    ``limits`` maps bench keys (``p99_ttft_ms``, ``output_throughput``, ``request_goodput``...) to a
    baseline and tolerance; ``max_preemptions`` / ``max_waiting`` judge the server's
    ``/metrics`` over the row (None: reported only).
    """

    name: str
    input_len: int = Field(ge=1)
    output_len: int = Field(ge=1)
    num_prompts: int = Field(default=8, ge=1)
    concurrency: int = Field(default=1, ge=1)
    min_output_tok_s: float | None = None
    limits: dict[str, RowLimit] = Field(default_factory=dict)
    max_preemptions: int | None = Field(default=0, ge=0)
    max_waiting: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _known_limits(self) -> BenchRow:
        unknown = sorted(k for k in self.limits if k not in BENCH_KEYS and k not in ROW_EXTRA_KEYS)
        if unknown:
            raise ValueError(
                f"row {self.name}: unknown limit key(s) {', '.join(unknown)}; known: p50/p90/p95/p99/median/mean "
                "of ttft/tpot/itl/e2el as e.g. p99_ttft_ms, output_throughput, request_throughput, request_goodput"
            )
        return self


class BenchConfig(FrozenModel):
    """Throughput rows run through ``command`` (default ``vllm bench serve``) with ``--save-result``.

    Each row sends ``num_warmups`` warm-up requests first (not measured); ``percentiles`` are
    reported for TTFT, TPOT, ITL and end-to-end latency; ``goodput`` holds SLOs in ms (keys
    ``ttft``, ``tpot``, ``e2el``) for ``--goodput``; ``reset_prefix_cache`` asks the server's
    ``/reset_prefix_cache`` (vLLM with ``VLLM_SERVER_DEV_MODE=1``) before each row, and every
    row's prompts are drawn with their own seed, so no run reuses another's prompt prefixes.
    Before each row the server's scheduler gauges are polled until it runs and queues no request, up to
    ``idle_wait_s`` seconds: a request still running (an earlier row's, another client's) would otherwise be
    counted in the row's /metrics deltas and keep its blocks out of the prefix-cache reset.
    """

    command: tuple[str, ...] = ("vllm", "bench", "serve")
    tokenizer: str | None = None
    rows: tuple[BenchRow, ...] = ()
    timeout_s: float = Field(default=1800.0, gt=0)
    metrics_interval_s: float = Field(default=1.0, gt=0)
    num_warmups: int = Field(default=2, ge=0)
    percentiles: tuple[float, ...] = (50, 90, 95, 99)
    goodput: dict[Literal["ttft", "tpot", "e2el"], float] = Field(default_factory=dict)
    reset_prefix_cache: bool = True
    idle_wait_s: float = Field(default=60.0, ge=0)
    seed: int = 0
    extra_args: tuple[str, ...] = ()


class ABConfig(FrozenModel):
    """How live A/B runs are made and judged.

    ``confidence`` is the family-wise level of a verdict (Bonferroni over the judged metrics);
    fewer than ``min_pairs`` pairs is inconclusive by rule; ``servers`` says how started sides
    run: ``alternate`` (one at a time, restarted for every run) or ``both`` (both at once, each on
    its own port); ``warmup_runs`` unmeasured runs follow every server start.
    """

    pairs: int = Field(default=6, ge=1)
    confidence: float = Field(default=0.99, gt=0.5, lt=1)
    min_pairs: int = Field(default=3, ge=2)
    servers: Literal["alternate", "both"] = "alternate"
    warmup_runs: int = Field(default=1, ge=0)


class BackportConfig(FrozenModel):
    """How ``ds4sync backport evaluate`` builds each side and when it keeps a backport.

    ``build_command`` runs in each worktree (``{worktree}`` and ``{python}`` are filled in);
    the server command may use ``{worktree}`` too. A backport is included when no metric
    regresses, KV capacity drops by at most ``kv_tolerance_pct`` percent, and (with
    ``require_benefit``) at least one metric improves.
    """

    build_command: tuple[str, ...] = ()
    build_timeout_s: float = Field(default=7200.0, gt=0)
    pairs: int = Field(default=6, ge=1)
    kv_tolerance_pct: float = Field(default=0.0, ge=0)
    require_benefit: bool = True


class ServingConfig(FrozenModel):
    """The whole ``serving:`` section: server, probe selection and per-probe settings.

    ``deadline_s`` bounds all probes together (seconds after the server is ready; None: no bound),
    besides each request's own timeout.
    """

    server: ServerConfig
    probes: tuple[ProbeName, ...] = PROBE_ORDER
    deadline_s: float | None = Field(default=7200.0, gt=0)
    exact: tuple[ExactCase, ...] = ()
    exact_file: Path | None = None
    tool_call: ToolCallCase | None = None
    reasoning: ReasoningCase | None = None
    kv: KvBaseline = KvBaseline()
    recall: RecallConfig = RecallConfig()
    eval: EvalConfig = EvalConfig()
    bench: BenchConfig = BenchConfig()
    ab_metrics: dict[str, MetricRule] = Field(default_factory=dict)
    ab: ABConfig = ABConfig()
    backport: BackportConfig = BackportConfig()

    @model_validator(mode="after")
    def _known_ab_metrics(self) -> ServingConfig:
        rows = {row.name for row in self.bench.rows} or {"decode"}
        known = set(BENCH_KEYS) | set(ROW_EXTRA_KEYS)
        unknown = []
        for key in self.ab_metrics:
            row, _, name = key.rpartition(".")
            ok = key in AB_EXTRA_METRICS or (name in known and (not row or row in rows))
            if not ok:
                unknown.append(key)
        if unknown:
            raise ValueError(
                f"ab_metrics: unknown metric key(s) {', '.join(sorted(unknown))}; a key is <row>.<bench key> with a "
                f"row of bench.rows ({', '.join(sorted(rows))}) and a key such as output_throughput, median_tpot_ms, "
                f"p99_ttft_ms, request_goodput, lost_requests; or one of {', '.join(AB_EXTRA_METRICS)}"
            )
        return self


def read_serving_file(path: Path) -> ServingConfig:
    """The serving section of the YAML file ``path``: under its ``serving:`` key, or the file's whole mapping.

    Raises:
        ConfigError: the file is unreadable, malformed, not a mapping, or the section is invalid
            (the line names the file and the offending key's line).
    """
    data = read_yaml(path)
    if isinstance(data, dict) and "serving" in data:
        return validate(ServingConfig, data["serving"], source=path, at=("serving",))
    return validate(ServingConfig, data, source=path)
