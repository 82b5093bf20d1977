"""`ds4sync report --trend`: the page over recorded runs, opened in a real headless Chromium.

The runs are written by the real pipeline (nightly syncs of a generated fork, with a command gate
tier), plus two nights with the typed build, kernel-tier and serving results a GPU host records, which
no CPU test can measure. Chromium comes from the system packages (scripts/test.sh installs it); without it the
browser test is skipped, saying so.
"""

from __future__ import annotations

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
from ds4sync.models.gates_details import KernelDetails, ServingDetails
from ds4sync.models.gates_results import GateResult, TierResult
from ds4sync.models.kernel_results import KernelBenchRow, KernelEnvironment, KernelSuiteResult
from ds4sync.models.native_results import BuildResult
from ds4sync.models.serving_results import ProbeResult, ServingResult
from ds4sync.report.trend import night_point, render_trend, trend_points
from ds4sync.runner import open_workspace
from tests.scenarios import BRANCH, lines, make_pair
from tests.timing import scaled

TITLES = (
    "Conflicted files, by how they were resolved",
    "Gates: passed / failed / environment-only",
    "Build time (s)",
    "Kernel throughput (GB/s)",
    "Serving throughput (tok/s)",
    "KV-cache capacity (tokens)",
)


def tier(name: str, *gates: GateResult) -> TierResult:
    return TierResult(tier=name, repo=".", started_at="2999-01-01T02:30:00+00:00", duration_s=1.0, gates=gates)


def _suite(gb_s: float) -> KernelSuiteResult:
    """A kernel suite result with one bench row (sparse_mla decode at ``gb_s`` GB/s), as the suite reports it."""
    row = KernelBenchRow(
        op="sparse_mla",
        case="decode",
        time_us=10.0,
        ref_time_us=12.0,
        speedup=1.2,
        bytes=gb_s * 1e4,
        flops=1e9,
        gb_per_s=gb_s,
        tflop_per_s=100.0,
        roof_us=8.0,
        pct_roof=80.0,
        pct_hbm=70.0,
        pct_hbm_achievable=75.0,
    )
    env = KernelEnvironment(device="cuda", torch="2.13.0", triton="3.6.0", date="2999-01-01", interpreter=False)
    return KernelSuiteResult(environment=env, scale="small", repeats=3, ops=(), bench=(row,))


def recorded_nights(tmp_path: Path):
    """Three real nightly runs (a conflict resolved by a person, then replayed) and two GPU-host nights."""
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
    last = ws.store.latest()
    assert last is not None
    for i, (build_s, kv, tok_s, gb_s) in enumerate(
        ((2488.9, 1778916, 289.6, 3120.5), (2301.0, 1712000, 292.6, 3350.0))
    ):
        # Nights on a GPU host: a build, a kernel tier and a serving run, recorded the way those phases do.
        gpu_night = last.model_copy(
            deep=True, update={"run_id": f"29990101-00000{i}-gpu{i}", "created_at": f"2999-01-0{i + 1}T02:30:00+00:00"}
        )
        gpu_night.results.build = BuildResult(
            status="passed", profile="sm120", src=".", python="python", log_path="build.log", total_s=build_s
        )
        gpu_night.results.gates["kernel"] = tier(
            "kernel",
            GateResult(
                name="kernel-suite",
                tier="kernel",
                kind="kernel",
                status="passed",
                details=KernelDetails(kernel=_suite(gb_s)),
            ),
        )
        gpu_night.results.serving = ServingResult(
            status="passed",
            base_url="http://127.0.0.1:8000",
            started=True,
            probes=(
                ProbeResult(name="throughput", status="passed", value=tok_s, unit="tok/s"),
                ProbeResult(name="kv_capacity", status="passed", value=kv, unit="tokens"),
            ),
        )
        ws.store.save(gpu_night)
    return pair, ws


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory):
    """:func:`recorded_nights`, made once per module: the tests only read its records."""
    return recorded_nights(tmp_path_factory.mktemp("nights"))


def test_points_carry_what_each_night_measured(nights) -> None:
    _, ws = nights
    points = trend_points(ws.store)
    assert len(points) == 5
    first, second = points[0], points[1]
    assert first.conflicts == {"person": 1} and first.gates == {"passed": 1}
    assert second.conflicts in ({}, {"recorded": 1}) and second.gates == {"passed": 1}
    assert first.build_s is None and first.kv_tokens is None and first.serving_tok_s == {}  # not measured: gaps
    gpu = points[3]
    assert gpu.build_s == 2488.9 and gpu.kv_tokens == 1778916 and gpu.kernel_gb_s == {"sparse_mla decode": 3120.5}
    assert gpu.serving_tok_s == {"throughput": 289.6} and points[4].serving_tok_s == {"throughput": 292.6}
    assert gpu.gates == {"passed": 2}


def test_kernel_and_serving_numbers_from_recorded_gate_details(nights) -> None:
    _, ws = nights
    record = ws.store.latest()
    assert record is not None
    record.results.serving = None
    record.results.gates["serving"] = tier(
        "serving",
        GateResult(
            name="serve",
            tier="serving",
            kind="serving",
            status="passed",
            details=ServingDetails(
                serving=ServingResult(
                    status="passed",
                    base_url="http://127.0.0.1:8000",
                    started=True,
                    probes=(
                        ProbeResult(name="throughput", status="passed", value=301.2, unit="tok/s"),
                        ProbeResult(name="kv_capacity", status="passed", value=1700000, unit="tokens"),
                    ),
                )
            ),
        ),
    )
    point = night_point(record)
    assert point.kernel_gb_s == {"sparse_mla decode": 3350.0}
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
def test_trend_page_renders_its_plots_in_a_headless_browser(nights, tmp_path: Path) -> None:
    pair, _ = nights
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
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=scaled(180)
    ).stdout
    # The plots exist only once plotly.js ran: its SVG roots, six subplot titles, bars and lines.
    assert dom.count('class="main-svg"') >= 2, dom[:500]
    for title in TITLES:
        assert title.replace("/", "/") in dom, title
    assert len(re.findall(r'class="trace bars"', dom)) >= 3  # conflicts (person, recorded) and gate buckets
    assert len(re.findall(r'class="js-line"', dom)) >= 4  # build, kernel GB/s, serving tok/s, KV tokens
    assert dom.count('class="point"') >= 5
    assert 'data-unformatted="not measured in any recorded run"' not in dom
    shot = tmp_path / "trend.png"
    subprocess.run([*flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=scaled(180))
    assert shot.is_file() and shot.stat().st_size > 20_000  # a drawn page, not a blank one
    keep = os.environ.get("DS4SYNC_TREND_SCREENSHOT")
    if keep:  # for a person to look at
        shutil.copy(shot, keep)
