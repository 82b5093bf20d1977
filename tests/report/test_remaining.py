"""The report's "Remaining gate" list: what a person still owes, and nothing that is not a blocker."""

from __future__ import annotations

import pytest

from ds4sync.report.build import remaining
from ds4sync.report.view import IntegrationView, MergeView, PatchsetView, ValidationView


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
