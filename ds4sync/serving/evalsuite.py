"""A repeated exact-answer eval at a concurrency, scored the way the fork's reports speak.

Every attempt is one of: correct, incorrect (a completed wrong answer), length (stopped by
``max_tokens``: a budget issue, not a wrong answer), request error (HTTP, connection or a
malformed answer) or timeout. The line reads ``115/120; 5 length caps, 0 incorrect``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from pydantic import TypeAdapter

from ds4sync.core.errors import ConfigError
from ds4sync.core.model import FrozenModel, read_yaml
from ds4sync.serving.client import OpenAIClient, RequestFailed
from ds4sync.serving.config import EvalConfig, ExactCase
from ds4sync.serving.probes import check_exact
from ds4sync.serving.results import ProbeResult

Outcome = Literal["correct", "incorrect", "length", "request_error", "timeout"]


class EvalScore(FrozenModel):
    """Counts per outcome over ``total`` attempts, and the report line."""

    total: int
    correct: int = 0
    incorrect: int = 0
    length: int = 0
    request_error: int = 0
    timeout: int = 0
    wall_s: float = 0.0

    def line(self) -> str:
        """``115/120; 5 length caps, 0 incorrect`` (+ errors and timeouts when there are any)."""
        text = f"{self.correct}/{self.total}; {self.length} length caps, {self.incorrect} incorrect"
        if self.request_error or self.timeout:
            text += f", {self.request_error} request errors, {self.timeout} timeouts"
        return text


def load_cases(path: Path) -> tuple[ExactCase, ...]:
    """Exact-answer cases from a YAML file: a list of cases, or ``{cases: [...]}``.

    Raises:
        ConfigError: the file is malformed; the message names the file and the case.
    """
    data = read_yaml(path)
    items = data.get("cases", data) if isinstance(data, dict) else data
    try:
        return tuple(TypeAdapter(list[ExactCase]).validate_python(items))
    except ValueError as exc:
        raise ConfigError(
            f"not a list of exact-answer cases ({str(exc).splitlines()[0]})",
            where=str(path),
            fix="each case needs name, messages and one of expect/pattern",
        ) from exc


def score_one(client: OpenAIClient, case: ExactCase, *, max_tokens: int, timeout_s: float) -> Outcome:
    """Run one case once and classify the outcome."""
    try:
        reply = client.chat(list(case.messages), timeout_s=timeout_s, extra={"max_tokens": max_tokens, **case.sampling})
    except RequestFailed as exc:
        return "timeout" if exc.kind == "timeout" else "request_error"
    if check_exact(case, reply.content):
        return "correct"
    return "length" if reply.finish_reason == "length" else "incorrect"


def run_eval(client: OpenAIClient, cases: Sequence[ExactCase], config: EvalConfig) -> EvalScore:
    """Every case ``config.repeat`` times, ``config.concurrency`` requests in flight at once."""
    jobs = [case for _ in range(config.repeat) for case in cases]
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=config.concurrency) as pool:
        outcomes = list(
            pool.map(lambda c: score_one(client, c, max_tokens=config.max_tokens, timeout_s=config.timeout_s), jobs)
        )
    counts = Counter(outcomes)
    return EvalScore(total=len(jobs), wall_s=time.monotonic() - start, **{str(k): n for k, n in counts.items()})


def probe_eval(client: OpenAIClient, config: EvalConfig) -> ProbeResult:
    """The eval probe: value = correct, baseline = attempts; fails below ``min_correct_pct`` or on
    any incorrect answer, request error or timeout (length caps alone do not fail it)."""
    cases = tuple(config.cases) + (load_cases(config.cases_file) if config.cases_file else ())
    if not cases:
        return ProbeResult(name="eval", status="skipped", summary="no eval cases configured")
    score = run_eval(client, cases, config)
    pct = 100.0 * score.correct / score.total
    ok = pct >= config.min_correct_pct and not (score.incorrect or score.request_error or score.timeout)
    return ProbeResult(
        name="eval",
        status="passed" if ok else "failed",
        value=float(score.correct),
        baseline=float(score.total),
        unit="correct",
        summary=score.line(),
        duration_s=score.wall_s,
        details={
            **score.model_dump(mode="json"),
            "repeat": config.repeat,
            "concurrency": config.concurrency,
            "correct_pct": pct,
        },
    )
