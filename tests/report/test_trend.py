"""`ds4sync report --trend`: the page over recorded runs, opened in a real headless Chromium.

The runs are written by the real pipeline (nightly syncs of a generated fork, with a command gate
tier), plus report-fixture records carrying build, kernel and serving numbers no CPU test can
measure. Chromium comes from the system packages (scripts/test.sh installs it); without it the
browser test is skipped, saying so.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from ds4sync.cli import main
from ds4sync.loop.nightly import run_nightly
from ds4sync.record import RunRecord
from ds4sync.report.trend import night_point, render_trend, trend_points
from ds4sync.runner import open_workspace
from tests.report.records import rich_record
from tests.scenarios import BRANCH, lines, make_pair

TITLES = (
    "Conflicted files, by how they were resolved",
    "Gates: passed / failed / environment-only",
    "Build time (s)",
    "Kernel throughput (GB/s)",
    "Serving throughput (tok/s)",
    "KV-cache capacity (tokens)",
)


def recorded_nights(tmp_path: Path):
    """Three real nightly runs (one conflict resolved by a person, gates passing, one env-only) and two fixtures."""
    pair = make_pair(
        tmp_path, {"a.py": lines("a"), "t.py": lines("t")}, [{"a.py": lines("a", "up")}], [{"a.py": lines("fork")}]
    )
    profile = tmp_path / "profile"
    (profile / "gates").mkdir(parents=True)
    (profile / "gates" / "unit.yaml").write_text(
        yaml.safe_dump(
            {"tier": "unit", "gates": [{"name": "ok", "kind": "command", "run": {"argv": ["{python}", "-c", "pass"]}}]}
        )
    )
    (pair.repo / "ds4sync.yaml").write_text(
        yaml.safe_dump(
            {
                "upstream": {"remote": "upstream", "ref": "main"},
                "fork": {"branch": BRANCH},
                "profile": str(profile),
                "gates": {"tiers": ["unit"], "python": sys.executable},
            }
        )
    )
    ws = open_workspace(pair.repo)
    night = run_nightly(ws, notify=False)
    assert night.record is not None and night.record.status == "needs-person"
    (Path(night.record.worktree) / "a.py").write_text(lines("fork", "up"))
    assert main(["resume", "--repo", str(pair.repo)]) == 0
    for name in ("b", "c"):
        pair.upstream.commit({f"{name}.py": lines(name)}, f"upstream {name}")
        assert run_nightly(ws, notify=False).record.status == "done"
    for i, (build_s, kv, tok_s) in enumerate(((2488.9, 1778916, 289.6), (2301.0, 1712000, 292.6))):
        data = copy.deepcopy(rich_record())
        data["run_id"] = f"29990101-00000{i}-fixture{i}"
        data["created_at"] = f"2999-01-0{i + 1}T02:30:00+00:00"
        data["state_dir"] = str(ws.store.root)
        data["results"]["build"]["duration_s"] = build_s
        data["results"]["serving"]["probes"][4]["value"] = kv
        data["results"]["perf"]["ab"][0]["candidate_median"] = tok_s
        ws.store.save(RunRecord.model_validate(data))
    return pair, ws


def test_points_carry_what_each_night_measured(tmp_path: Path) -> None:
    _, ws = recorded_nights(tmp_path)
    points = trend_points(ws.store)
    assert len(points) == 5
    first, second = points[0], points[1]
    assert first.conflicts == {"person": 1} and first.gates == {"passed": 1}
    assert second.conflicts in ({}, {"recorded": 1}) and second.gates == {"passed": 1}
    assert first.build_s is None and first.kv_tokens is None and first.serving_tok_s == {}  # not measured: gaps
    fixture = points[3]
    assert fixture.build_s == 2488.9 and fixture.kv_tokens == 1778916
    assert (
        fixture.serving_tok_s["decode tok/s (3x2048, C=1)"] == 289.6
        and points[4].serving_tok_s["decode tok/s (3x2048, C=1)"] == 292.6
    )
    assert fixture.gates.get("environment-only", 0) >= 1


def test_kernel_and_serving_numbers_from_recorded_gate_details() -> None:
    data = copy.deepcopy(rich_record())
    data["results"] = {
        "gates": {
            "kernel": {
                "gates": [
                    {
                        "name": "ops",
                        "status": "passed",
                        "details": {"kernel": {"bench": [{"op": "sparse_mla", "case": "decode", "gb_per_s": 3120.5}]}},
                    }
                ]
            },
            "serving": {
                "gates": [
                    {
                        "name": "serve",
                        "status": "passed",
                        "details": {
                            "probes": [
                                {"name": "throughput", "value": 301.2, "unit": "tok/s"},
                                {"name": "kv_capacity", "value": 1700000, "unit": "tokens"},
                            ]
                        },
                    }
                ]
            },
        }
    }
    point = night_point(RunRecord.model_validate(data))
    assert point.kernel_gb_s == {"sparse_mla decode": 3120.5}
    assert point.serving_tok_s == {"throughput": 301.2} and point.kv_tokens == 1700000


class _External(HTMLParser):
    """Collects every tag that would load something at view time (script src, link href, img src, iframe)."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[tuple[str, str]] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        for name, value in attrs:
            if name in ("src", "href") and value and tag in ("script", "link", "img", "iframe"):
                self.loads.append((tag, value))


def test_page_is_self_contained() -> None:
    page = render_trend([], title="empty")
    parser = _External()
    parser.feed(page)
    assert parser.scripts >= 1 and parser.loads == []  # plotly.js inlined: nothing fetched at view time
    assert "plotly.js v" in page or "plotly.js" in page
    assert page.count("not measured in any recorded run") == 6


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.mark.slow
def test_trend_page_renders_its_plots_in_a_headless_browser(tmp_path: Path) -> None:
    pair, _ = recorded_nights(tmp_path)
    page = tmp_path / "trend.html"
    assert main(["report", "--trend", "--repo", str(pair.repo), "--out", str(page)]) == 0
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium on this host (apt-get install -y chromium; scripts/test.sh does)")
    flags = [
        browser,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile-dir'}",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # nothing but the file itself: the page must need no network
        "--virtual-time-budget=20000",
        "--window-size=1400,1250",
    ]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180).stdout
    # The plots exist only once plotly.js ran: its SVG roots, six subplot titles, bars and lines.
    assert dom.count('class="main-svg"') >= 2, dom[:500]
    for title in TITLES:
        assert title.replace("/", "/") in dom, title
    assert len(re.findall(r'class="trace bars"', dom)) >= 4  # conflicts (person, recorded) and gate buckets
    assert len(re.findall(r'class="js-line"', dom)) >= 3  # build, serving tok/s, KV tokens
    assert dom.count('class="point"') >= 5
    assert dom.count('data-unformatted="not measured in any recorded run"') == 1  # kernel GB/s: none measured it
    shot = tmp_path / "trend.png"
    subprocess.run([*flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=180)
    assert shot.is_file() and shot.stat().st_size > 20_000  # a drawn page, not a blank one
    keep = os.environ.get("DS4SYNC_TREND_SCREENSHOT")
    if keep:  # for a person to look at
        shutil.copy(shot, keep)
