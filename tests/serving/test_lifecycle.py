"""Servers that die, sleep, hang or vanish: start-up outcomes, the overall deadline, wedges, dead URLs,
KV reads of dead servers, and Ctrl-C, against real child processes and scripted HTTP servers on 127.0.0.1
(the scripted server stands in for a server that hangs on purpose)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from scripted import Response, ScriptedServer, healthy_routes
from servinghelp import ROOT, free_port

from ds4sync.cli import main
from ds4sync.core.children import ChildRegistry
from ds4sync.core.proc import group_members
from ds4sync.models.serving_settings import KvBaseline, ServerConfig, ServingConfig
from ds4sync.serving import kvcache
from ds4sync.serving.client import OpenAIClient
from ds4sync.serving.gate import run_serving_gate
from ds4sync.serving.server import (
    ServerStartError,
    attach,
    guard,
    start_server,
    stop_server,
    wait_ready,
    worker_death,
)
from tests.cli_json import data as cli_data
from tests.timing import scaled

MSG = [{"role": "user", "content": "q"}]
CASE = {"name": "a", "messages": MSG, "expect": "x"}


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer(healthy_routes())
    yield server
    server.close()


def _serving(**fields: object) -> ServingConfig:
    return ServingConfig.model_validate(fields)


def test_a_server_that_exits_and_one_that_sleeps_give_different_outcomes(tmp_path: Path) -> None:
    port = free_port()
    died = _serving(
        server={
            "command": [
                sys.executable,
                "-c",
                "print('loading weights'); print('boom: bad dtype'); raise SystemExit(3)",
            ],
            "port": port,
            "model": "m",
            "poll_interval_s": 0.05,
        },
        probes=["health"],
    )
    sleeping = _serving(
        server={
            "command": [sys.executable, "-c", "print('still loading', flush=True); import time; time.sleep(600)"],
            "port": port,
            "model": "m",
            "startup_timeout_s": 1,
            "poll_interval_s": 0.05,
            "stop_grace_s": 1,
        },
        probes=["health"],
    )
    a = run_serving_gate(died, out_dir=tmp_path / "a")
    b = run_serving_gate(sleeping, out_dir=tmp_path / "b")
    assert a.startup is not None and b.startup is not None
    assert (a.startup.kind, a.startup.exit_code) == ("died", 3)
    assert a.startup.log_tail[-1] == "boom: bad dtype" and "exited with code 3" in a.startup.message
    assert b.startup.kind == "still-loading" and b.startup.exit_code is None and b.startup.process_state in ("S", "R")
    assert b.startup.log_tail == ("still loading",) and b.startup.stop_exit_code == -signal.SIGINT
    assert a.brief()["startup"] != b.brief()["startup"]
    assert [p.reason for p in a.probes] == ["server did not start (died)"]


def test_cli_text_shows_the_log_tail_and_json_the_outcome(
    builder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    builder.commit({"a.txt": "a"}, "init")
    cfg = tmp_path / "serving.yaml"
    command = [sys.executable, "-c", "print('line one'); print('CUDA out of memory'); raise SystemExit(3)"]
    cfg.write_text(yaml.safe_dump({"serving": {"server": {"command": command, "port": free_port(), "model": "m"}}}))
    args = [
        "serving",
        "gate",
        "--repo",
        str(builder.path),
        "--serving-config",
        str(cfg),
        "--state-dir",
        str(tmp_path / "s"),
    ]
    assert main(args) == 7  # nothing measured: not a probe's failure
    text = capsys.readouterr().out
    assert "start-up: died, exit code 3" in text
    assert "  | line one\n  | CUDA out of memory" in text  # the tail itself, not just "log tail:"
    assert main([*args, "--json"]) == 7
    data = cli_data(capsys.readouterr().out)
    assert data["startup"]["kind"] == "died" and data["startup"]["exit_code"] == 3
    assert data["startup"]["log_tail"][-1] == "CUDA out of memory" and data["startup"]["ready_s"] is None
    assert data["probes"][0]["reason"] == "server did not start (died)"


def test_attaching_to_a_dead_url_says_nothing_answers() -> None:
    config = ServerConfig(
        base_url=f"http://127.0.0.1:{free_port()}", model="m", attach_timeout_s=0.5, poll_interval_s=0.1
    )
    start = time.monotonic()
    with pytest.raises(ServerStartError) as info:
        wait_ready(attach(config))
    assert time.monotonic() - start < 5
    assert info.value.kind == "unreachable" and "no server answers at" in info.value.what
    assert "process alive" not in info.value.what and info.value.outcome is not None
    assert info.value.outcome.kind == "unreachable" and info.value.outcome.started is False


def test_an_eval_against_a_hung_server_is_named_wedged_and_the_rest_skipped(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    scripted.routes[("POST", "/v1/chat/completions")] = lambda _b: Response(hang=True)
    scripted.routes[("POST", "/v1/completions")] = lambda _b: Response(hang=True)
    config = _serving(
        server={
            "base_url": scripted.url,
            "model": "m",
            "request_timeout_s": scaled(0.5),
            "guard_timeout_s": scaled(0.5),
        },
        probes=["health", "eval", "kv_capacity", "throughput"],
        eval={"cases": [CASE], "repeat": 5000, "concurrency": 4, "timeout_s": scaled(0.5)},
        deadline_s=60,
    )
    start = time.monotonic()
    result = run_serving_gate(config, out_dir=tmp_path)
    took = time.monotonic() - start
    assert took < scaled(10)  # not 5,000 requests x 0.5 s
    status = {p.name: p.status for p in result.probes}
    assert status == {"health": "passed", "eval": "failed", "kv_capacity": "skipped", "throughput": "skipped"}
    evald = result.probes[1]
    assert evald.details["not_run"] > 4900 and evald.details["wedged"].startswith("wedged")
    assert result.wedged is not None and result.wedged.startswith("after eval: wedged")
    chats = [p for m, p, _ in scripted.seen if p == "/v1/chat/completions"]
    assert len(chats) <= 8  # the requests in flight when the first timed out, no more


def test_the_overall_deadline_bounds_all_probes(scripted: ScriptedServer, tmp_path: Path) -> None:
    # requests hang, each would wait 30 s (both limits scale alike); the whole gate may take 1.5 s
    scripted.routes[("POST", "/v1/chat/completions")] = lambda _b: Response(hang=True)
    config = _serving(
        server={"base_url": scripted.url, "model": "m", "request_timeout_s": scaled(30), "guard_timeout_s": 0.5},
        probes=["exact", "recall", "health"],
        exact=[CASE],
        deadline_s=1.5,
    )
    start = time.monotonic()
    result = run_serving_gate(config, out_dir=tmp_path)
    assert time.monotonic() - start < scaled(6)  # the deadline, not three 30 s timeouts
    assert result.probes[0].status == "error" and "deadline" in result.probes[0].details["cases"][0]["error"]["message"]
    assert [p.status for p in result.probes[1:]] == ["skipped", "skipped"]
    assert result.deadline_passed and "deadline of 1.5 s passed" in result.probes[-1].summary


def test_kv_probe_never_reads_an_old_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO CPU KV cache size: 99,999 tokens\nAvailable KV cache memory: 9.00 GiB\n")  # a previous server
    code = (
        "import http.server, sys\n"
        "handler = http.server.BaseHTTPRequestHandler\n"
        "http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), handler).serve_forever()"
    )
    port = free_port()
    config = ServerConfig(command=(sys.executable, "-c", code, "{port}"), port=port, model="m", stop_grace_s=1)
    handle = start_server(config, log_path=log)
    try:
        assert handle.log_text() == ""  # this server wrote nothing yet: the old lines are not its own
        with OpenAIClient(handle.url, "m", timeout_s=scaled(2)) as client:
            deadline = time.monotonic() + scaled(30)
            while True:  # wait until it listens (its /metrics answers 501: no capacity there)
                try:
                    client.get("/")
                    break
                except Exception:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            alive = kvcache.probe_kv_capacity(client, handle.log_text(), KvBaseline(tokens=99_999))
            assert alive.status == "failed" and "/metrics" in alive.summary
            stop_server(handle)
            dead = kvcache.probe_kv_capacity(client, log.read_text(), KvBaseline(tokens=99_999))
            assert dead.status == "failed" and "did not answer /metrics (connect" in dead.summary
    finally:
        stop_server(handle)


def test_ctrl_c_stops_the_gate_and_its_server(scripted: ScriptedServer, builder, tmp_path: Path) -> None:
    builder.commit({"a.txt": "a"}, "init")
    scripted.routes[("POST", "/v1/chat/completions")] = lambda _b: Response(hang=True)
    cfg = tmp_path / "serving.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "serving": {
                    "server": {"base_url": scripted.url, "model": "m", "request_timeout_s": 300},
                    "probes": ["eval"],
                    "eval": {"cases": [CASE], "repeat": 100, "concurrency": 2, "timeout_s": 300},
                }
            }
        )
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "ds4sync.cli", "serving", "gate", "--repo", str(builder.path)),
            *("--serving-config", str(cfg), "--state-dir", str(tmp_path / "s")),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # wait until the eval runs (its requests hang)
        if "probe eval" in line:
            break
    deadline = time.monotonic() + 30
    while sum(p == "/v1/chat/completions" for _, p, _ in scripted.seen) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=scaled(30))
    assert code == 130 and time.monotonic() - start < 10


def test_next_command_ends_the_server_of_a_killed_one(tmp_path: Path) -> None:
    # ds4sync stand-in: starts a server (a process tree) through start_server with the registry, then is SIGKILLed
    registry_dir = tmp_path / "children"
    tree = (
        "import subprocess, sys, time\n"
        "[subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']) for _ in range(2)]\n"
        "time.sleep(600)"
    )
    owner = f"""
import sys, time
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from ds4sync.core.children import ChildRegistry
from ds4sync.models.serving_settings import ServerConfig
from ds4sync.serving.server import start_server
config = ServerConfig(command=({sys.executable!r}, "-c", {tree!r}), port={free_port()}, model="m")
registry = ChildRegistry(Path({str(registry_dir)!r}))
handle = start_server(config, log_path=Path({str(tmp_path / "server.log")!r}), registry=registry)
print(handle.proc.pid, flush=True)
time.sleep(600)
"""
    proc = subprocess.Popen([sys.executable, "-c", owner], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pgid = int(proc.stdout.readline())
    deadline = time.monotonic() + 30
    while len(group_members(pgid)) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert len(group_members(pgid)) == 3  # orphans: nothing ended them
    ended = ChildRegistry(registry_dir).reap_orphans(grace_s=2)
    assert [e.pgid for e in ended] == [pgid] and group_members(pgid) == []


# A stand-in for vLLM whose engine worker died: its API process still answers /health and /v1/models, answers a
# completion with vLLM's HTTP 500, and its log carries vLLM's own line about the worker, with the exit code of a
# real child that ended by the signal given (multiproc_executor.py writes the same line from the same code).
_DEAD_WORKER_SERVER = """
import http.server, json, subprocess, sys
port, sig = int(sys.argv[1]), int(sys.argv[2])
code = subprocess.run([sys.executable, "-c", f"import os; os.kill(os.getpid(), {sig})"]).returncode
print(f"(EngineCore pid=1) ERROR [multiproc_executor.py:315] Worker proc VllmWorker-0 died unexpectedly "
      f"(exit code: {code}), shutting down executor.", flush=True)
class Handler(http.server.BaseHTTPRequestHandler):
    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self._send(200, {"data": [{"id": "m"}]} if self.path == "/v1/models" else {})
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send(500, {"error": {"message": "EngineCore encountered an issue. See stack trace (above)"}})
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


@pytest.mark.parametrize(
    ("sig", "said"),
    [
        (signal.SIGILL, "died of SIGILL: an instruction this CPU lacks"),
        (signal.SIGKILL, "died of SIGKILL: killed, often by the OOM killer"),
        (signal.SIGSEGV, "died of SIGSEGV"),
    ],
)
def test_the_guard_names_how_the_engine_worker_died(sig: signal.Signals, said: str, tmp_path: Path) -> None:
    config = ServerConfig(
        command=(sys.executable, "-c", _DEAD_WORKER_SERVER, "{port}", str(int(sig))),
        port=free_port(),
        model="m",
        poll_interval_s=0.05,
        stop_grace_s=scaled(5),
        guard_timeout_s=scaled(10),
        startup_timeout_s=scaled(30),
    )
    handle = start_server(config, log_path=tmp_path / "server.log")
    try:
        wait_ready(handle)
        result = guard(handle)
    finally:
        stop_server(handle)
    assert not result.ok
    assert "HTTP 500" in result.reason and result.reason.endswith(f"; engine worker VllmWorker-0 {said}")


def test_a_worker_line_with_no_signal_or_none_is_said_as_is() -> None:
    line = "Worker proc VllmWorker-{n} died unexpectedly (exit code: {code}), shutting down executor."
    assert worker_death("") is None and worker_death("Worker proc X exited") is None
    assert worker_death(line.format(n=0, code="None")) == "engine worker VllmWorker-0 died (exit code None)"
    assert worker_death(line.format(n=0, code=1)) == "engine worker VllmWorker-0 died (exit code 1)"
    two = line.format(n=0, code=-9) + "\n" + line.format(n=1, code=-4)
    assert worker_death(two) == "engine worker VllmWorker-1 died of SIGILL: an instruction this CPU lacks"
