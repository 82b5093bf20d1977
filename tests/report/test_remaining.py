"""The report's "Remaining gate" list: what a person still owes, and nothing that is not a blocker."""

from __future__ import annotations

import pytest

from ds4sync.report.build import remaining
from ds4sync.report.view import (
    GateView,
    IntegrationView,
    InvariantView,
    MergeView,
    PatchsetView,
    TierView,
    ValidationView,
)


def _items(*patchsets: PatchsetView) -> list[str]:
    integration = IntegrationView(patchsets=patchsets, replay="done", verify_ran=True)
    return [i.text for i in remaining((), MergeView(), integration, ValidationView()) if i.kind == "patch-set"]


@pytest.mark.parametrize(
    ("status", "verify_status"),
    [("not-carried", "not-carried"), ("not-carried", ""), ("verify:not-carried", "not-carried")],
)
def test_a_not_carried_patch_set_is_never_a_blocker(status: str, verify_status: str) -> None:
    # A branch that does not carry a feature fails every invariant of it: that is not a loss in this merge.
    uncarried = PatchsetView(id="sm120-kernels", status=status, verify_status=verify_status, violated=3)
    assert _items(uncarried) == []


@pytest.mark.parametrize(("status", "verify_status"), [("retained", "violated"), ("verify:violated", "violated")])
def test_a_carried_patch_set_with_violated_invariants_stays_a_blocker(status: str, verify_status: str) -> None:
    carried = PatchsetView(id="sm120-kernels", status=status, verify_status=verify_status, violated=2)
    uncarried = PatchsetView(id="mtp", status="not-carried", verify_status="not-carried", violated=1)
    assert _items(carried, uncarried) == ["patch-set sm120-kernels: 2 invariant(s) violated"]


def _violations(*since: str) -> tuple[InvariantView, ...]:
    return tuple(
        InvariantView(id=f"inv-{n}", kind="pattern", severity="blocking", status="violated", since=s)
        for n, s in enumerate(since)
    )


@pytest.mark.parametrize(
    ("since", "mark"),
    [
        (("already failing before it", "already failing before it"), " (already failing before the merge)"),
        (("already failing before it", "lost in this merge"), " (1 already failing before it)"),
        (("lost in this merge", "lost in this merge"), ""),
        (("", ""), ""),  # verify had no baseline: nothing is claimed
    ],
)
def test_a_violation_already_failing_on_the_fork_head_is_marked(since: tuple[str, ...], mark: str) -> None:
    carried = PatchsetView(
        id="sm120-kernels", status="retained", verify_status="violated", violated=2, invariants=_violations(*since)
    )
    assert _items(carried) == [f"patch-set sm120-kernels: 2 invariant(s) violated{mark}"]


@pytest.mark.parametrize("status", ["failed", "error", "incomplete", "not-run", "skipped"])
def test_only_a_required_gate_that_is_not_green_is_a_blocker(status: str) -> None:
    gates = (
        GateView(name="kernel-bench", tier="kernel", status=status, required=False),
        GateView(name="kernel-check", tier="kernel", status=status),
        GateView(name="kernel-smoke", tier="kernel", status="passed"),
    )
    validation = ValidationView(tiers=(TierView(tier="kernel", status="failed", gates=gates),))
    items = remaining((), MergeView(), IntegrationView(replay="done", verify_ran=True), validation)
    assert [i.text for i in items if i.kind == "gate"] == [f"kernel-check (kernel): {status}"]
