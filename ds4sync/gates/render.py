"""Rich rendering of gate progress and tier results. Only the CLI calls this module."""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ds4sync.gates.runner import GateEvent
from ds4sync.models.gates_results import TierResult, failure_cause

STYLE = {
    "passed": "green",
    "cached": "cyan",
    "skipped": "dim",
    "not-run": "yellow",
    "incomplete": "yellow",
    "failed": "red",
    "error": "red bold",
    "running": "blue",
    "queued": "dim",
}


class LiveGates:
    """A live table of gates (state, elapsed, tests so far, devices), fed by runner events."""

    def __init__(self, console: Console, title: str) -> None:
        self.console, self.title = console, title
        self.rows: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.live = Live(console=console, refresh_per_second=4, transient=True, get_renderable=self._render)

    def __enter__(self) -> LiveGates:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)  # type: ignore[arg-type]

    def __call__(self, event: GateEvent) -> None:
        with self.lock:
            row = self.rows.setdefault(event.gate, {"state": "queued", "tests": 0, "start": None, "devices": ()})
            if event.kind == "started":
                row.update(state="running", start=time.monotonic(), devices=event.devices)
            elif event.kind == "progress":
                row["tests"] = event.tests
            elif event.kind == "finished" and event.result is not None:
                row.update(state=event.result.status, end=time.monotonic(), summary=event.result.counts.summary())

    def _render(self) -> Table:
        table = Table(title=self.title, box=None)
        for column in ("gate", "state", "elapsed", "tests", "devices"):
            table.add_column(column)
        with self.lock:
            for name, row in self.rows.items():
                elapsed = ""
                if row["start"] is not None:
                    elapsed = f"{row.get('end', time.monotonic()) - row['start']:.1f}s"
                tests = row.get("summary") or (str(row["tests"]) if row["tests"] else "")
                table.add_row(
                    name,
                    Text(row["state"], style=STYLE.get(row["state"], "")),
                    elapsed,
                    tests,
                    ",".join(row["devices"]),
                )
        return table


def tier_table(console: Console, result: TierResult, *, record_path: str | None = None) -> None:
    """The final table of a tier, its failures (with environment categories) and flaky tests."""
    table = Table(title=f"gates: tier {result.tier} in {result.repo}")
    for column in ("gate", "status", "counts", "time", "devices", "note"):
        table.add_column(column)
    for gate in result.gates:
        note = gate.reason if gate.status in ("skipped", "cached") else failure_cause(gate)
        if not gate.required:
            note = f"(optional) {note}".strip()
        table.add_row(
            gate.name,
            Text(gate.status, style=STYLE.get(gate.status, "")),
            gate.counts.summary(),
            f"{gate.duration_s:.1f}s",
            ",".join(gate.devices),
            note,
        )
    parts: list[Any] = [table]
    lines = []
    for gate in result.gates:
        for failure in gate.failures:
            tag = f"[env-only: {failure.env_category}] " if failure.env_category else ""
            first = (failure.message.strip().splitlines() or [""])[0][:160]
            lines.append(f"  {gate.name}: {tag}{failure.node_id}: {first}")
        lines += [f"  {gate.name}: [flaky] {node}" for node in gate.flaky]
    if lines:
        parts.append(Text("failures and flaky tests:\n" + "\n".join(lines)))
    totals = result.totals()
    parts.append(
        Text(
            f"tier {result.tier}: {result.status} — {totals.summary()} in {result.duration_s:.1f}s"
            f"; python {result.environment.get('python', '?')}, torch {result.environment.get('torch', '?')}"
            f" (CUDA {result.environment.get('cuda', '-')})",
            style=STYLE.get(result.status, ""),
        )
    )
    if result.run_all_reason:
        parts.append(Text(f"run-all: {result.run_all_reason}", style="dim"))
    if record_path:
        parts.append(Text(f"recorded in {record_path}", style="dim"))
    console.print(Group(*parts))
