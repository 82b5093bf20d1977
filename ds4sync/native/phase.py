"""The build as a command and as a pipeline phase: pick the profile, the tree and the log folder, record the result.

Inside an active sync run the build compiles the sync worktree, logs under the run's folder
and writes ``record.results.build``; outside one it compiles the fork checkout and logs
under ``<state>/builds/<stamp>-<profile>/``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ds4sync.core.errors import ToolMissingError
from ds4sync.models.native_profile import BuildProfile, load_profiles, select_profile
from ds4sync.models.native_results import BuildResult
from ds4sync.models.record import RunRecord
from ds4sync.native.driver import Progress, run_build
from ds4sync.native.manifest import Manifest, load_manifest
from ds4sync.runner import Phase, PhaseOutcome, RunContext, Workspace, run_by_hand


def resolve_profile(ws: Workspace, name: str | None) -> tuple[str, BuildProfile]:
    """The build profile ``name`` (default: ``build.profile`` of the config) and its name.

    Raises:
        ConfigError: unknown profile or a malformed profiles file.
    """
    chosen = name or ws.config.build.profile
    return chosen, select_profile(load_profiles(ws.profile, ws.config.build), chosen)


def resolve_manifest(ws: Workspace, profile: BuildProfile, explicit: Path | None = None) -> Manifest:
    """The manifest to prove against: ``explicit`` (relative to the current folder), else the profile's
    ``manifest`` (relative to the profile folder).

    Raises:
        ConfigError: the file is missing or malformed.
    """
    if explicit is not None:
        return load_manifest(explicit.resolve())
    path = Path(profile.manifest)
    return load_manifest(path if path.is_absolute() else ws.profile / path)


def build_workspace(
    ws: Workspace,
    *,
    profile_name: str | None = None,
    manifest_path: Path | None = None,
    progress: Progress | None = None,
) -> tuple[BuildResult, RunRecord | None]:
    """Build the active run's sync worktree (recording into the run), or the fork checkout when no run is active.

    Returns:
        The build result and the run record it was written into (None outside a run).

    Raises:
        ConfigError, ToolMissingError: before anything was built.
        StateError: another ds4sync command holds the repository.
    """
    name, profile = resolve_profile(ws, profile_name)
    manifest = resolve_manifest(ws, profile, manifest_path)
    with ws.store.lock(f"build {name}"):
        record = ws.store.current()
        if record is None:
            stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
            result = run_build(
                ws.repo.path,
                profile,
                manifest=manifest,
                profile_name=name,
                repo=ws.repo.path,
                work_dir=ws.store.root / "builds" / f"{stamp}-{name}",
                progress=progress,
            )
            return result, None

        def build(ctx: RunContext) -> PhaseOutcome:
            return outcome_of(
                run_build(
                    Path(record.worktree),
                    profile,
                    manifest=manifest,
                    profile_name=name,
                    repo=ws.repo.path,
                    work_dir=ws.store.run_dir(record.run_id) / "build",
                    progress=progress,
                )
            )

        outcome = run_by_hand(ws, record, Phase("build", build))  # a kill leaves nothing running
        return outcome.result, record


def build_phase(ctx: RunContext) -> PhaseOutcome:
    """Pipeline phase ``build``: the config's default profile on the sync worktree; a failed build fails the run.

    A missing tool (or torch) fails the phase with that one line, before anything was built.
    Skipped when ds4sync.yaml has no ``build:`` section: a sync builds only what it was told to.
    """
    if "build" not in ctx.ws.config.model_fields_set:
        return PhaseOutcome("skipped", "no build configured (build: in ds4sync.yaml)")
    name, profile = resolve_profile(ctx.ws, None)
    manifest = resolve_manifest(ctx.ws, profile)
    ctx.progress(f"build: profile '{name}' in {ctx.record.worktree}")
    try:
        with step_progress(ctx.progress) as progress:
            result = run_build(
                Path(ctx.record.worktree),
                profile,
                manifest=manifest,
                profile_name=name,
                repo=ctx.ws.repo.path,
                work_dir=ctx.ws.store.run_dir(ctx.record.run_id) / "build",
                progress=progress,
            )
    except ToolMissingError as exc:
        return PhaseOutcome(
            "failed",
            message=exc.one_line(),
            next_steps=(exc.fix or "install the missing tools", "then `ds4sync resume`"),
        )
    return outcome_of(result)


class StepProgress:
    """A build progress callback that tells ``say`` each new step, then every ``every_s`` seconds within one,
    whether or not the step prints: a silent compile still gets its line (a clock thread, while entered).

    The driver calls back on every output line; a person reading a log of progress lines needs the step, how
    long it has run, and the last line, not every line. Use it as a context manager around the build.
    """

    def __init__(self, say: Callable[[str], None], *, every_s: float = 15.0) -> None:
        self.say, self.every_s = say, every_s
        self.step: str | None = None
        self.start = self.said = 0.0
        self.last = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._clock: threading.Thread | None = None

    def __call__(self, step: str, line: str) -> None:
        now = time.monotonic()
        with self._lock:
            if line.strip():
                self.last = line.strip()[:100]
            if step != self.step:
                self.step, self.start, self.said, self.last = step, now, now, ""
                self.say(f"build: {step}")
                return
        self._tick(now)

    def _tick(self, now: float) -> None:
        with self._lock:
            if self.step is None or now - self.said < self.every_s:
                return
            self.said = now
            last = f": {self.last}" if self.last else ""
            self.say(f"build: {self.step}, {now - self.start:.0f} s{last}")

    def _run_clock(self) -> None:
        while not self._stop.wait(min(1.0, self.every_s / 4)):
            self._tick(time.monotonic())

    def __enter__(self) -> StepProgress:
        self._clock = threading.Thread(target=self._run_clock, name="ds4sync-build-progress", daemon=True)
        self._clock.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._clock is not None:
            self._clock.join()


def step_progress(say: Callable[[str], None], *, every_s: float = 15.0) -> StepProgress:
    """:class:`StepProgress` for ``say`` (enter it to have a line every ``every_s`` even from a silent step)."""
    return StepProgress(say, every_s=every_s)


def outcome_of(result: BuildResult) -> PhaseOutcome:
    """The phase outcome of a build: done when it passed, failed with the log's tail otherwise."""
    if result:
        return PhaseOutcome("done", message=f"build {result.headline}", result=result)
    failed = [f"{i.kind} {i.name}: {i.detail}" for i in (result.proof.failures() if result.proof else [])]
    return PhaseOutcome(
        "failed",
        message=f"build {result.headline} (log: {result.log_path})",
        result=result,
        details=tuple(failed) + result.first_errors + result.tail[-10:],
        next_steps=(f"read {result.log_path}", "fix the tree or the profile, then `ds4sync build`"),
    )


BUILD_PHASES = (Phase("build", build_phase),)
