"""How live A/B sides are run, on real child processes: a minimal OpenAI-shaped HTTP server (a stand-in
for vLLM, whose boot takes a minute: the real thing is in test_live_ab.py) and a bench command that
writes `vllm bench serve`-shaped results. Checks what makes two sides alike: restarts, warm-up runs,
seeds, prefix-cache resets, ports, the refusal to mix, and lost requests."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from servinghelp import free_port

from ds4sync.core.children import ChildRegistry
from ds4sync.core.errors import ConfigError
from ds4sync.models.serving_settings import BenchConfig, BenchRow, ServerConfig
from ds4sync.serving.ab import LiveSides, run_ab

SERVER = """
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
resets = 0
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def _send(self, code, body, kind="application/json"):
        data = body.encode()
        self.send_response(code); self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        if self.path == "/health": return self._send(200, "{}")
        if self.path == "/v1/models": return self._send(200, json.dumps({"data": [{"id": "m"}]}))
        if self.path == "/metrics":
            return self._send(200, f'vllm:num_requests_running{{engine="0"}} 0\\nds4:resets {resets}\\n', "text/plain")
        self._send(404, "{}")
    def do_POST(self):
        global resets
        if self.path == "/reset_prefix_cache":
            resets += 1
            print(f"reset {resets}", flush=True)
            return self._send(200, "{}")
        self._send(404, "{}")
print(f"server pid {os.getpid()} speed {sys.argv[2]}", flush=True)
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""

# Writes a result for the server at --base-url: its speed and how many prompts it loses come from
# <out>/speed-<port> ("speed lost"), next to the run's result folder.
BENCH = """
import json, sys
args = sys.argv[1:]
def arg(name): return args[args.index(name) + 1]
n = int(arg("--num-prompts"))
port = arg("--base-url").rsplit(":", 1)[1]
speed, lost = open(arg("--result-dir") + "/../speed-" + port).read().split()
speed, done = float(speed), n - int(lost)
out = {"num_prompts": n, "completed": done, "failed": n - done, "seed": int(arg("--seed")),
       "output_throughput": speed * (1 + int(arg("--seed")) % 7 / 1000), "median_tpot_ms": 1000 / speed,
       "median_ttft_ms": 20.0}
open(arg("--result-dir") + "/" + arg("--result-filename"), "w").write(json.dumps(out))
"""


def _side(tmp_path: Path, speed: float, port: int | None = None) -> ServerConfig:
    port = port or free_port()
    return ServerConfig(
        command=(sys.executable, "-c", SERVER, "{port}", str(speed)),
        port=port,
        model="m",
        poll_interval_s=0.05,
        stop_grace_s=2,
    )


def _bench(tmp_path: Path, input_len: int = 8) -> BenchConfig:
    return BenchConfig(
        command=(sys.executable, "-c", BENCH),
        num_warmups=1,
        metrics_interval_s=0.1,
        rows=(BenchRow(name="r", input_len=input_len, output_len=8, num_prompts=4),),
    )


def speed(out: Path, config: ServerConfig, tok_s: float, lost: int = 0) -> None:
    """What the bench stand-in measures on the server of ``config``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"speed-{config.port}").write_text(f"{tok_s} {lost}")


@pytest.mark.slow
def test_alternate_restarts_each_side_for_every_run_with_its_warm_up(tmp_path: Path) -> None:
    out = tmp_path / "ab"
    a, b = _side(tmp_path, 100.0), _side(tmp_path, 50.0)
    speed(out, a, 100.0)
    speed(out, b, 50.0)
    registry = ChildRegistry(tmp_path / "children")
    result = run_ab(
        [str(_yaml(tmp_path / "a.yaml", a))],
        [str(_yaml(tmp_path / "b.yaml", b))],
        pairs=3,
        out_dir=out,
        bench_config=_bench(tmp_path),
        seed=11,
        servers="alternate",
        registry=registry,
    )
    assert result.mode == "started-alternate" and result.verdict == "regression"
    tok = next(r for r in result.rows if r.metric == "r.output_throughput")
    assert tok.mean_delta_pct == pytest.approx(-50, abs=1) and tok.verdict == "regression"
    # every measured run followed its own fresh start, and an unmeasured warm-up run after that start
    logs = {s: (out / f"server-{s}.log").read_text() for s in "AB"}
    assert logs["A"].count("server pid") == 3 and logs["B"].count("server pid") == 3
    assert all(s.boot_s is not None for s in result.steps)
    assert len([p for p in out.iterdir() if p.name.startswith("warmup-")]) == 6
    # every run's prompts have their own seed, and the prefix cache was reset before each run (warm-ups too)
    seeds = [json.loads((out / f"step{s.step:02d}-{s.side}" / "r.json").read_text())["seed"] for s in result.steps]
    assert len(set(seeds)) == 6 and [s.seed for s in result.steps] == seeds
    assert {s.prefix_cache for s in result.steps} == {"reset"} and logs["A"].count("reset 2") == 3
    assert registry.entries() == []  # every started server was stopped and forgotten


def test_both_keeps_two_servers_up_on_their_own_ports(tmp_path: Path) -> None:
    out = tmp_path / "ab"
    port = free_port()
    a = _side(tmp_path, 100.0, port)
    b = _side(tmp_path, 100.0, port)  # the same config twice: B must move to another port
    sides = LiveSides({"A": a, "B": b}, _bench(tmp_path), out_dir=out, servers="both", seed=5)
    assert sides.sides["B"].port != port
    speed(out, sides.sides["A"], 100.0)
    speed(out, sides.sides["B"], 100.0)
    try:
        for step, side in enumerate("ABBA"):
            sides.measure(side, step)
        assert sides.handle("A").proc is not None and sides.handle("B").proc is not None
        logs = {s: (out / f"server-{s}.log").read_text() for s in "AB"}
        assert logs["A"].count("server pid") == 1 and logs["B"].count("server pid") == 1  # started once, kept warm
    finally:
        sides.close()


def test_b_retries_once_on_another_port_when_its_port_was_taken_before_it_bound_it(tmp_path: Path) -> None:
    """Both sides from one config: B's port is picked up front; here a real socket on 127.0.0.1 takes it the
    moment before B starts (bound, never listening, without SO_REUSEADDR, so the check for an answering
    server passes and B's own bind fails with "Address already in use"). B must start once more on another
    port and the A/B run on as if nothing happened."""
    out = tmp_path / "ab"
    config = _side(tmp_path, 100.0)
    notes: list[str] = []
    taken: dict[int, socket.socket] = {}  # port: the socket that holds it

    def watch(message: str) -> None:
        notes.append(message)
        if message.startswith("starting side "):
            port = int(message.split()[-2])  # the stand-in's argv ends with its port and its speed
            speed(out, config.model_copy(update={"port": port}), 100.0)
            if message.startswith("starting side B:") and not taken:  # the spawn follows this line
                taken[port] = socket.socket()
                taken[port].bind(("127.0.0.1", port))

    registry = ChildRegistry(tmp_path / "children")
    try:
        result = run_ab(
            [str(_yaml(tmp_path / "a.yaml", config))],
            [str(_yaml(tmp_path / "b.yaml", config))],
            pairs=3,
            out_dir=out,
            bench_config=_bench(tmp_path),
            seed=7,
            servers="both",
            warmup_runs=0,
            registry=registry,
            progress=watch,
        )
    finally:
        for sock in taken.values():
            sock.close()
    ports = [int(m.split()[-2]) for m in notes if m.startswith("starting side B:")]
    assert len(ports) == 2 and [ports[0]] == list(taken), notes  # B started on the taken port, then once more
    assert ports[1] not in (ports[0], config.port), ports
    assert notes.count("side B: its port was taken before it bound it; again on another port") == 1, notes
    log = (out / "server-B.log").read_text()
    assert log.count("Address already in use") == 1 and log.count("server pid") == 2, log  # died, then started again
    # the run itself is whole: both servers kept up, every run measured and judged, nothing left behind
    assert result.error is None and result.mode == "started-both" and result.pairs == 3, result.error
    assert sorted(s.side for s in result.steps) == ["A"] * 3 + ["B"] * 3 and all(s.ok for s in result.steps)
    assert result.verdict in ("neutral", "inconclusive"), result.lines()
    assert (out / "server-A.log").read_text().count("server pid") == 1
    assert registry.entries() == []


def test_an_attached_side_never_meets_a_started_one(tmp_path: Path) -> None:
    attached = ServerConfig(base_url="http://127.0.0.1:9", model="m")
    with pytest.raises(ConfigError, match="warm server against a cold one"):
        LiveSides({"A": attached, "B": _side(tmp_path, 1.0)}, _bench(tmp_path), out_dir=tmp_path)


def test_a_candidate_that_loses_requests_is_a_regression(tmp_path: Path) -> None:
    out = tmp_path / "ab"
    a, b = _side(tmp_path, 100.0), _side(tmp_path, 100.0)
    speed(out, a, 100.0)
    speed(out, b, 100.0, lost=1)  # every run of the candidate completes 3 of 4 prompts
    result = run_ab(
        [str(_yaml(tmp_path / "a.yaml", a))],
        [str(_yaml(tmp_path / "b.yaml", b))],
        pairs=3,
        out_dir=out,
        bench_config=_bench(tmp_path),
        seed=2,
        servers="both",
        warmup_runs=0,
    )
    assert result.verdict == "regression" and result.lost == {"baseline": 0.0, "candidate": 3.0}
    assert result.reasons[0] == "candidate lost 3 request(s) (baseline 0)"
    assert not any(s.ok for s in result.steps if s.side == "B") and all(s.ok for s in result.steps if s.side == "A")


def _yaml(path: Path, config: ServerConfig) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({"serving": {"server": config.model_dump(mode="json", exclude_none=True)}}))
    return path


@pytest.mark.parametrize("empty", ["baseline", "candidate"])
@pytest.mark.parametrize("other", ["http://127.0.0.1:9/", "recorded"])
def test_a_side_with_nothing_in_it_is_one_config_error_naming_it(empty: str, other: str, tmp_path: Path) -> None:
    # an empty side against a live one used to fall through to an IndexError; against files, to "no common metric"
    if other == "recorded":
        other = str(tmp_path / "a.json")
        Path(other).write_text("{}")
    sides = {"baseline": [other], "candidate": [other], empty: []}
    with pytest.raises(ConfigError, match=f"the {empty} side names no recorded file and no server"):
        run_ab(sides["baseline"], sides["candidate"], out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()  # refused before anything was measured or written
