"""The pipeline's closed vocabularies, each defined once: tiers, patch-set kinds, executors, kernel ops.

Cheap to import (no third-party module), so the CLI offers them as choices in ``--help`` and
the models validate against the same words. A vocabulary a CLI option takes several of is an
enum (typer lists enum members, not literals, in repeatable options); the others are literals.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args


class Tier(StrEnum):
    """Gate tiers, in the order a sync runs them (DESIGN.md)."""

    STATIC = "static"
    UNIT = "unit"
    GPU = "gpu"
    KERNEL = "kernel"
    SERVING = "serving"
    PERF = "perf"


TIERS: tuple[str, ...] = tuple(tier.value for tier in Tier)
#: The same words as a type, for config fields that name tiers (a typo fails when the file is read).
TierName = Literal["static", "unit", "gpu", "kernel", "serving", "perf"]
assert get_args(TierName) == TIERS

#: What a patch-set carries: the fork's own feature, an upstream backport, a fix-up, a removal.
PatchSetKind = Literal["fork-feature", "backport", "fixup", "removal"]
PATCHSET_KINDS: tuple[PatchSetKind, ...] = get_args(PatchSetKind)

#: Where gates run: here, or on a Ray cluster.
ExecutorName = Literal["local", "ray"]
EXECUTORS: tuple[ExecutorName, ...] = get_args(ExecutorName)

#: Where a tier's gates run (ds4sync.gates.environments): the build's venv, a venv of pinned tools,
#: the interpreter running ds4sync, or the target environment (gates.python and its defaults).
EnvironmentName = Literal["build", "tools", "ds4sync", "target"]
ENVIRONMENTS: tuple[EnvironmentName, ...] = get_args(EnvironmentName)


class KernelOp(StrEnum):
    """The DeepSeek ops of the kernel tier, all in its default set."""

    PREFILL = "prefill"
    DECODE = "decode"
    TOPK = "topk"
    ROUTING = "routing"
    MHC_PRE = "mhc_pre"
    MHC_POST = "mhc_post"


KERNEL_OPS: tuple[str, ...] = tuple(op.value for op in KernelOp)
