"""Semantic patch-sets: fork features as units that every sync proves still present.

``model`` (patchset.yaml), ``tree`` + ``invariants`` (the checks), ``check`` (a catalogue
on a tree), ``replay`` (the replay and verify phases), ``authoring`` (new, refresh,
backport) and ``demo`` (patch-sets for the demo fork).
"""

from __future__ import annotations
