"""The phases' result models, by the name :class:`ds4sync.core.record.RunResults` gives each.

The run record (core) names these models as strings so that loading core imports no phase;
pydantic resolves the names here on the record's first validation. A phase that adds a
result adds its field to ``RunResults`` and its model to :func:`phase_models`.
"""

from __future__ import annotations

from typing import Any

from ds4sync.core.model import FrozenModel


class ReportResult(FrozenModel):
    """The report phase's entry: where it wrote the PR description and the JSON summary."""

    path: str
    summary: str


def phase_models() -> dict[str, Any]:
    """Name -> model for every type ``RunResults`` refers to (imports the phase modules)."""
    from ds4sync.gates.model import TierResult
    from ds4sync.loop.promote import PromoteResult
    from ds4sync.merge.plan import MergeSummary
    from ds4sync.native.driver import BuildResult
    from ds4sync.patchsets.replay import ReplayResult, VerifyResult
    from ds4sync.serving.ab import ABResult
    from ds4sync.serving.backport import BackportDecision
    from ds4sync.serving.results import ServingResult

    return {
        "MergeSummary": MergeSummary,
        "ReplayResult": ReplayResult,
        "VerifyResult": VerifyResult,
        "BuildResult": BuildResult,
        "TierResult": TierResult,
        "ServingResult": ServingResult,
        "ABResult": ABResult,
        "BackportDecision": BackportDecision,
        "ReportResult": ReportResult,
        "PromoteResult": PromoteResult,
    }
