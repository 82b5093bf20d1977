"""The pipeline's closed vocabularies, each defined once: gate tiers and patch-set kinds.

Cheap to import (typing only), so the CLI can offer them as choices in ``--help`` and the
models can validate against the same words.
"""

from __future__ import annotations

from typing import Literal, get_args

#: Gate tiers, in the order a sync runs them (DESIGN.md).
TierName = Literal["static", "unit", "gpu", "kernel", "serving", "perf"]
TIERS: tuple[TierName, ...] = get_args(TierName)

#: What a patch-set carries: the fork's own feature, an upstream backport, a fix-up, a removal.
PatchSetKind = Literal["fork-feature", "backport", "fixup", "removal"]
PATCHSET_KINDS: tuple[PatchSetKind, ...] = get_args(PatchSetKind)
