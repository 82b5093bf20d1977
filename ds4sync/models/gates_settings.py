"""The ``gates:`` section of ds4sync.yaml (imported by ds4sync.models.config; depends on pydantic only).

Run-all patterns are vLLM's (``.buildkite/ci_config.yaml``): a changed file that
``re.match``-es a run-all pattern and no exclude pattern selects every gate.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ds4sync.core.names import EnvironmentName, ExecutorName, TierName

# Source: vllm-project/vllm .buildkite/ci_config.yaml (run_all_patterns / run_all_exclude_patterns).
VLLM_RUN_ALL_PATTERNS: tuple[str, ...] = (
    "docker/Dockerfile",
    "CMakeLists.txt",
    "requirements/common.txt",
    "requirements/cuda.txt",
    "requirements/kv_connectors.txt",
    "requirements/build/cuda.txt",
    "requirements/test/cuda.txt",
    "setup.py",
    "csrc/",
    "cmake/",
)
VLLM_RUN_ALL_EXCLUDE_PATTERNS: tuple[str, ...] = (
    "docker/Dockerfile.",
    "csrc/cpu/",
    "csrc/rocm/",
    "cmake/hipify.py",
    "cmake/cpu_extension.cmake",
)


class GatesConfig(BaseModel):
    """How gates run: the target interpreter, parallelism, GPUs, and run-all patterns.

    ``python``: the target environment's interpreter (relative paths are taken from the
    checkout; default ``<checkout>/.venv/bin/python``, else the fork checkout's, else the
    python running ds4sync). ``environments``: per tier, ``build``, ``tools``, ``ds4sync`` or
    ``target`` (:mod:`ds4sync.gates.environments`), over the tier file's ``environment``.
    ``gpus``: device ids for GPU gates (default: none). ``tiers``:
    what the pipeline's ``gate`` phase runs (none unless configured: a sync of an unknown
    tree runs no tests by surprise). ``promote_tiers``: the tiers ``promote`` requires to have
    passed on the promoted commit (default: ``tiers``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    python: str | None = None
    environments: dict[TierName, EnvironmentName] = Field(
        default_factory=dict, description="per tier, where its gates run (overrides the tier file's environment)"
    )
    tiers: tuple[TierName, ...] = ()
    promote_tiers: tuple[TierName, ...] | None = None
    jobs: int = Field(default=2, ge=1)
    gpus: tuple[str, ...] = ()
    run_all_patterns: tuple[str, ...] = VLLM_RUN_ALL_PATTERNS
    run_all_exclude_patterns: tuple[str, ...] = VLLM_RUN_ALL_EXCLUDE_PATTERNS
    executor: ExecutorName = Field(default="local", description="where gates run: here, or a Ray cluster")
    ray_address: str = Field(default="auto", description="the Ray cluster's address (``host:port`` or ``auto``)")
    ray_source: str | None = Field(
        default=None, description="path or URL every Ray node clones the repository from (default: this checkout)"
    )

    @property
    def required_for_promote(self) -> tuple[str, ...]:
        """The tiers that must pass on the promoted commit: ``promote_tiers``, else ``tiers``."""
        return self.tiers if self.promote_tiers is None else self.promote_tiers
