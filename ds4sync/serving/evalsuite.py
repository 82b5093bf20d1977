"""A repeated exact-answer eval at a concurrency, scored the way the fork's reports speak.

Every attempt is one of: correct, incorrect (a completed wrong answer), length (stopped by
``max_tokens``: a budget issue, not a wrong answer), request error (HTTP, connection or a
malformed answer) or timeout. The line reads ``115/120; 5 length caps, 0 incorrect``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import TypeAdapter

from ds4sync.core.errors import ConfigError
from ds4sync.core.model import FrozenModel, read_yaml
from ds4sync.models.serving_results import ProbeResult
from ds4sync.models.serving_settings import EvalConfig, ExactCase
from ds4sync.serving.client import OpenAIClient, RequestFailed
from ds4sync.serving.probes import check_exact

Outcome = Literal["correct", "incorrect", "length", "request_error", "timeout"]
WedgeCheck = Callable[[], str | None]


class EvalScore(FrozenModel):
    """Counts per outcome over ``total`` attempts, and the report line."""

    total: int
    correct: int = 0
    incorrect: int = 0
    length: int = 0
    request_error: int = 0
    timeout: int = 0
    not_run: int = 0
    stopped: str | None = None
    wall_s: float = 0.0

    def line(self) -> str:
        """``115/120; 5 length caps, 0 incorrect`` (+ errors and timeouts when there are any)."""
        text = f"{self.correct}/{self.total}; {self.length} length caps, {self.incorrect} incorrect"
        if self.request_error or self.timeout:
            text += f", {self.request_error} request errors, {self.timeout} timeouts"
        if self.stopped:
            text += f"; stopped with {self.not_run} not run: {self.stopped}"
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
        return "timeout" if exc.kind in ("timeout", "deadline") else "request_error"
    if check_exact(case, reply.content):
        return "correct"
    return "length" if reply.finish_reason == "length" else "incorrect"


def run_eval(
    client: OpenAIClient, cases: Sequence[ExactCase], config: EvalConfig, *, wedged: WedgeCheck | None = None
) -> EvalScore:
    """Every case ``config.repeat`` times, ``config.concurrency`` requests in flight at once.

    The eval stops early, counting the rest as ``not_run``, when the client's overall deadline
    passes or when, after a timed-out request, ``wedged()`` names the server wedged. Requests are
    sent from daemon threads fed one job at a time, so stopping (or Ctrl-C) never waits for a hung
    server: at most the requests in flight are abandoned.
    """
    jobs = [case for _ in range(config.repeat) for case in cases]
    start = time.monotonic()
    todo: queue.Queue[ExactCase | None] = queue.Queue()
    done: queue.Queue[Outcome] = queue.Queue()

    def worker() -> None:
        while (case := todo.get()) is not None:
            done.put(score_one(client, case, max_tokens=config.max_tokens, timeout_s=config.timeout_s))

    workers = min(config.concurrency, len(jobs))
    for _ in range(workers):
        threading.Thread(target=worker, daemon=True, name="ds4sync-eval").start()
    pending = iter(jobs)
    in_flight = submitted = 0
    outcomes: list[Outcome] = []
    stopped: str | None = None
    try:
        while True:
            while not stopped and in_flight < workers and (case := next(pending, None)) is not None:
                todo.put(case)
                in_flight += 1
                submitted += 1
            if in_flight == 0 or stopped:
                break
            outcome = done.get()
            in_flight -= 1
            outcomes.append(outcome)
            if client.deadline is not None and client.deadline.expired:
                stopped = f"the overall deadline of {client.deadline.limit_s:g} s passed"
            elif outcome == "timeout" and wedged is not None:
                stopped = wedged()
    finally:  # normal end: the workers are idle; stopped or Ctrl-C: the ones in flight are abandoned
        for _ in range(workers):
            todo.put(None)
    counts = Counter(outcomes)
    return EvalScore(
        total=len(jobs),
        not_run=len(jobs) - submitted + in_flight,
        stopped=stopped,
        wall_s=time.monotonic() - start,
        **{str(k): n for k, n in counts.items()},
    )


def probe_eval(client: OpenAIClient, config: EvalConfig, *, wedged: WedgeCheck | None = None) -> ProbeResult:
    """The eval probe: value = correct, baseline = attempts; fails below ``min_correct_pct``, on any
    incorrect answer, request error or timeout (length caps alone do not fail it), or when stopped early
    (deadline, wedged server: ``details["wedged"]`` then holds the reason)."""
    cases = tuple(config.cases) + (load_cases(config.cases_file) if config.cases_file else ())
    if not cases:
        return ProbeResult(name="eval", status="skipped", summary="no eval cases configured")
    score = run_eval(client, cases, config, wedged=wedged)
    pct = 100.0 * score.correct / score.total
    bad = score.incorrect or score.request_error or score.timeout or score.stopped
    ok = pct >= config.min_correct_pct and not bad
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
            "reason": score.stopped or "",
            "wedged": score.stopped if score.stopped and score.stopped.startswith("wedged") else None,
        },
    )
