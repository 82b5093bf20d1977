"""Rich rendering of a build for the terminal: the live status while it runs and the result after. CLI only."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ds4sync.models.native_results import BuildResult
from ds4sync.native.driver import Progress


class _Status:
    """What the live line shows: elapsed time, the current step and the last output line."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.step = "starting"
        self.line = ""
        self._lock = threading.Lock()

    def update(self, step: str, line: str) -> None:
        with self._lock:
            if step != self.step:
                self.step, self.line = step, ""
            if line.strip():
                self.line = line.strip()

    def __rich__(self) -> Text:
        with self._lock:
            elapsed = int(time.monotonic() - self.start)
            text = Text.assemble((f"{elapsed // 60:d}:{elapsed % 60:02d} ", "bold"), (self.step, "cyan"))
            if self.line:
                text.append(f"  {self.line[:160]}", style="dim")
            return text


@contextlib.contextmanager
def live_status(console: Console, *, enabled: bool = True) -> Iterator[Progress]:
    """A progress callback that drives a live one-line status on ``console`` (a no-op when disabled)."""
    if not enabled:
        yield lambda _step, _line: None
        return
    status = _Status()
    with Live(status, console=console, refresh_per_second=4, transient=True):
        yield status.update


def build_result(console: Console, result: BuildResult) -> None:
    """Toolchain, steps with durations, proof items and, on failure, the log's tail and path."""
    style = "green" if result else "red"
    console.print(
        Text.assemble((f"build {result.headline}", style), f" (profile {result.profile}, {result.total_s:.1f} s)")
    )
    if result.proof and result.proof.schema_groups:
        groups = ", ".join(f"{name} {count}" for name, count in result.proof.schema_groups.items())
        console.print(f"op schemas by group: {groups}", markup=False)
    if result.toolchain_detail:
        console.print(f"toolchain: {result.toolchain_detail.line()}", markup=False)
    table = Table(show_header=True, box=None)
    for column in ("step", "status", "seconds"):
        table.add_column(column, justify="right" if column == "seconds" else "left")
    for step in result.steps:
        state = "skipped" if step.skipped else ("ok" if step.returncode == 0 else f"exit {step.returncode}")
        table.add_row(step.name, state, f"{step.duration_s:.1f}")
    if result.proof:
        table.add_row("proof", "ok" if result.proof.ok else "failed", f"{result.proof.duration_s:.1f}")
    console.print(table)
    _proof_items(console, result)
    if result.first_errors:
        console.print(Text("first errors:", style="red"))
        for line in result.first_errors:
            console.print(f"  {line.strip()}", markup=False, highlight=False)
    if not result:
        console.print(Text(f"--- last lines of {result.log_path} ---", style="dim"))
        for line in result.tail:
            console.print(line, markup=False, highlight=False)
    console.print(f"log: {result.log_path}", markup=False)


def _proof_items(console: Console, result: BuildResult) -> None:
    """Every check that did not pass, with expected and actual schema where they differ."""
    for item in result.proof.items if result.proof else ():
        if item.status == "passed":
            continue
        mark = ("FAIL", "red") if item.status == "failed" else (item.status, "yellow")
        console.print(Text.assemble("  ", mark, f" {item.kind} {item.name}: {item.detail}"), highlight=False)
        if item.actual and item.expected:
            console.print(f"       expected: {item.expected}\n       actual:   {item.actual}", markup=False)
