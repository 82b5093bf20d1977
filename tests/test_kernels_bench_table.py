"""The H200 benchmark's side-by-side table (benchmarks/kernels_h200.py) renders the same columns in its header
and every row, whatever the number of peers, and a peer's missing case as "-"."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from tests import benchscripts


def _module():
    return benchscripts.load("kernels_h200")


def _row(case: str, t: float, met: bool | None) -> dict:
    target = {} if met is None else {"pct_hbm_min": 0.3}
    return {"op": "topk", "case": case, "time_us": t, "ref_time_us": 10 * t, "pct_roof": 0.25, "pct_hbm": 0.25,
            "target": target, "target_met": met}  # fmt: skip


def _cells(md: str) -> list[list[str]]:
    """Header and body rows of the one table, as markdown-it parses them."""
    tokens = MarkdownIt().enable("table").parse(md)
    rows, cur = [], None
    for i, tok in enumerate(tokens):
        if tok.type == "tr_open":
            cur = []
        elif tok.type in ("th_open", "td_open"):
            cur.append(tokens[i + 1].content)
        elif tok.type == "tr_close":
            rows.append(cur)
    return rows


@pytest.mark.parametrize("n_peers", [0, 1, 2, 3])
def test_side_by_side_has_one_column_per_header_cell_for_any_number_of_peers(n_peers):
    mod = _module()
    ours = {"bench": [_row("bench-a", 30.0, False), _row("bench-b", 12.0, None)]}
    peers = {f"peer{i}": {"bench": [_row("bench-a", 40.0 + i, None)]} for i in range(n_peers)}  # no bench-b
    rows = _cells(mod.side_by_side(ours, peers))
    head, body = rows[0], rows[1:]
    assert head[:4] == ["op", "case", "ours µs", "torch ref µs"]
    assert head[4 : 4 + n_peers] == [f"peer{i} µs" for i in range(n_peers)]
    assert head[4 + n_peers :] == ["ours % roofline", "ours % HBM", "target", "met"]
    assert len(body) == 2 and all(len(r) == len(head) for r in body)
    a, b = (dict(zip(head, r, strict=True)) for r in body)
    assert (a["ours µs"], a["torch ref µs"], a["ours % HBM"], a["met"]) == ("30.0", "300.0", "25.0%", "no")
    assert a["target"] == "pct_hbm_min=0.3" and b["target"] == "-" and b["met"] == "-"
    for i in range(n_peers):
        assert a[f"peer{i} µs"] == f"{40.0 + i:.1f}" and b[f"peer{i} µs"] == "-"
