"""Shared model parts: from_attributes (a model from another's same-named fields), the Regex and ModuleName fields."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ds4sync.core.model import FrozenModel, ModuleName, Regex, from_attributes
from ds4sync.models.merge_results import Overlap
from ds4sync.report.view import OverlapView, PhaseView


class _Source:
    status = "done"
    finished_at = "2026-01-01T00:00:00+00:00"
    message = "ok"
    extra = "not a field of the view: never read"


def test_every_field_is_read_from_the_source_and_given_ones_win() -> None:
    view = from_attributes(PhaseView, _Source(), name="merge", message="given")
    assert view == PhaseView(name="merge", status="done", finished_at="2026-01-01T00:00:00+00:00", message="given")


def test_a_default_is_read_too_never_assumed() -> None:
    overlap = Overlap.model_validate({"path": "a.py", "upstream_lines": 3, "fork_lines": 4, "equals_upstream": True})
    assert from_attributes(OverlapView, overlap) == OverlapView(
        path="a.py", upstream_lines=3, fork_lines=4, equals_upstream=True
    )


def test_a_field_the_source_lacks_is_an_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="finished_at"):
        from_attributes(PhaseView, type("S", (), {"status": "done", "message": ""})(), name="merge")


def test_a_value_the_field_refuses_is_a_validation_error() -> None:
    class Counted(FrozenModel):
        count: int

    with pytest.raises(ValidationError, match="count"):
        from_attributes(Counted, type("S", (), {"count": "many"})())


class _Fields(FrozenModel):
    pattern: Regex = "x"
    module: ModuleName = "a"


@pytest.mark.parametrize("pattern", ["(", "[a-", "a{2,1}", "*a", "(?P<1>x)"])
def test_a_regex_field_refuses_a_pattern_that_does_not_compile(pattern: str) -> None:
    with pytest.raises(ValidationError, match=r"pattern\n.*not a valid regular expression"):
        _Fields(pattern=pattern)


@pytest.mark.parametrize("name", ["", "a.", ".a", "a..b", "1a", "a-b", "a b", "a\n", "a:b"])
def test_a_module_name_field_refuses_what_is_no_dotted_name(name: str) -> None:
    with pytest.raises(ValidationError, match=r"(?s)module\n.*is not a dotted module name"):
        _Fields(module=name)


@pytest.mark.parametrize("name", ["a", "vllm._C", "_a.b_2.c"])
def test_a_module_name_field_keeps_a_dotted_name(name: str) -> None:
    assert _Fields(module=name).module == name
