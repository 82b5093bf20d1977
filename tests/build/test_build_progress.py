"""Build progress lines: each new step at once, then one every interval even from a step that prints nothing."""

from __future__ import annotations

import threading

from ds4sync.native.phase import step_progress
from tests.timing import scaled


def test_a_silent_step_still_gets_a_line_every_interval_and_none_after_the_build() -> None:
    said: list[str] = []
    heard = threading.Event()

    def say(message: str) -> None:
        said.append(message)
        if len(said) >= 3:
            heard.set()

    with step_progress(say, every_s=0.05) as progress:
        progress("compile", "")
        progress("compile", "[1/40] Building CXX object csrc/ops.o")
        # nothing more is printed: the clock alone must produce the next lines
        assert heard.wait(timeout=scaled(30)), said
    count = len(said)
    assert said[0] == "build: compile"
    assert all(
        line.startswith("build: compile, ") and line.endswith(": [1/40] Building CXX object csrc/ops.o")
        for line in said[1:3]
    ), said
    assert progress._clock is not None and not progress._clock.is_alive()  # after the build the clock is gone
    assert len(said) == count


def test_a_new_step_is_said_at_once_and_its_clock_restarts() -> None:
    said: list[str] = []
    with step_progress(said.append, every_s=3600) as progress:
        progress("venv", "created")
        progress("install", "Collecting torch")
        progress("install", "Installing")
    assert said == ["build: venv", "build: install"]
