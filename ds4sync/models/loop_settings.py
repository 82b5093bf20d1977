"""The ``nightly:`` and ``deploy:`` sections of ds4sync.yaml (imported by ds4sync.models.config; pydantic only)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ds4sync.core.model import FrozenModel


class NightlyConfig(FrozenModel):
    """What the nightly job does beyond the sync: time budget, pruning, promotion, deployment."""

    budget_s: float | None = Field(default=None, gt=0, description="wall-clock budget; gates past it are stopped")
    keep_runs: int = Field(default=10, ge=1, description="runs whose worktrees, logs and refs are kept")
    promote: bool = Field(default=False, description="promote a green sync without a person")
    deploy: bool = Field(default=False, description="switch the serving stanza after promoting (needs deploy:)")
    at: str = "02:30"
    bisect_on_failure: bool = Field(
        default=False, description="when a sync fails verify or replay, bisect upstream and name the culprit"
    )
    bisect_tier: str | None = Field(default=None, description="also run this gate tier on each bisect step")
    drift: bool = Field(default=False, description="after the sync, run `ds4sync drift` and report new entries")


class DeployConfig(FrozenModel):
    """The llama-swap stanza that serves the fork, and what in it points at the tree.

    ``config`` is the llama-swap YAML, ``model`` the key under ``models:``. ``binary`` is the server
    executable relative to a tree (``argv[0]`` of the stanza's ``cmd``). ``cache_env`` names the env
    entry of the stanza holding the compile/kernel cache folder; ``cache`` is the new folder, formatted
    with ``{run_id}`` and ``{tree}``. ``tree`` is where the promoted tree lives (default: the run's
    worktree), formatted with ``{run_id}`` and ``{worktree}``.
    """

    config: Path
    model: str
    binary: str = ".venv/bin/vllm"
    tree: str = "{worktree}"
    cache_env: str | None = "VLLM_CACHE_ROOT"
    cache: str | None = None
