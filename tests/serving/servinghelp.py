"""Helpers for the serving tier tests: where the serving environment is, and how vLLM is started.

The real server needs the serving environment (``scripts/serving-env.sh``): its python is
``$DS4SYNC_SERVING_PYTHON`` or ``.venv-serving/bin/python`` at the repository root. Tests
marked ``serving`` skip, saying so, only when that interpreter is absent. One server is
started per session; tests that kill or break a server start their own.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from ds4sync.models.serving_settings import ServerConfig
from tests.timing import scaled

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MODEL_NAME = "tiny"
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_LOGGING_LEVEL": "INFO",
    # /reset_prefix_cache, which the A/B calls before every measured run
    "VLLM_SERVER_DEV_MODE": "1",
    "OMP_NUM_THREADS": "2",
    # vLLM's CPU worker pins its OpenMP threads by default ("auto": the last cores of the first NUMA node, one
    # core kept for the scheduler), so every test server lands on the same core while the others idle; the
    # kernel's scheduler spreads unpinned threads over all of them (vllm/utils/ompmultiprocessing.py).
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    # named tool_choice through the JSON-schema path, so arguments follow the schema exactly
    "VLLM_ENFORCE_STRICT_TOOL_CALLING": "0",
}

# JSON arguments without free whitespace: a random model would otherwise pad them with newlines forever.
STRUCTURED_OUTPUTS = '{"backend": "xgrammar", "disable_any_whitespace": true}'
# The same, enforced inside the reasoning section too (for the reasoning/final routing test).
REASONING_OUTPUTS = '{"backend": "xgrammar", "disable_any_whitespace": true, "enable_in_reasoning": true}'


def serving_python() -> Path | None:
    """The serving environment's interpreter, or None when it was never created."""
    explicit = os.environ.get("DS4SYNC_SERVING_PYTHON")
    path = Path(explicit) if explicit else ROOT / ".venv-serving" / "bin" / "python"
    return path if path.is_file() else None


def startup_limit_s() -> float:
    """How long a test waits for a vLLM CPU server: 600 s on an idle machine, more when it is loaded.

    A tiny model boots in about 50 s on two idle cores; the limit scales by :func:`tests.timing.time_factor`
    (the load average per core on a shared machine, and ``DS4SYNC_TEST_TIME_FACTOR``), the one factor every
    wait in the tests scales by. Progress is printed meanwhile (see :func:`progress`).
    """
    return scaled(600.0)


def progress(message: str) -> None:
    """Start-up progress on stderr (shown with ``pytest -s``, and in the output of a failing test)."""
    print(f"[serving] {message}", file=sys.stderr, flush=True)


def bench_command(python: Path) -> tuple[str, ...]:
    """The default bench command, ``vllm bench serve``, from the serving environment."""
    return (str(python.parent / "vllm"), "bench", "serve")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def vllm_command(python: Path, model_dir: Path, *extra: str) -> tuple[str, ...]:
    """The vLLM OpenAI server command (``{host}``/``{port}`` filled from ServerConfig)."""
    return (
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        MODEL_NAME,
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--max-model-len",
        "4096",
        # float32, not bfloat16: vLLM's CPU attention takes its AMX kernel for bf16 whenever the CPU reports AMX
        # tiles (torch.cpu._is_amx_tile_supported, vllm/v1/attention/backends/cpu_attn.py::_get_attn_isa), and a
        # CPU that reports tiles without AMX-BF16 kills the engine worker with SIGILL on a 2-token prompt.
        "--dtype",
        "float32",
        "--max-num-seqs",
        "8",
        # no torch.compile / CUDA-graph capture: on a CPU every boot would otherwise recompile (minutes)
        "--enforce-eager",
        *extra,
    )


def server_config(python: Path, model_dir: Path, **overrides: object) -> ServerConfig:
    """A ServerConfig that starts vLLM on a free 127.0.0.1 port."""
    fields: dict[str, object] = {
        "command": vllm_command(
            python,
            model_dir,
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
            "--structured-outputs-config",
            STRUCTURED_OUTPUTS,
            # a request may carry its own chat template (test_live_verdicts sends a broken one)
            "--trust-request-chat-template",
        ),
        "host": "127.0.0.1",
        "port": free_port(),
        "model": MODEL_NAME,
        "env": OFFLINE_ENV,
        "startup_timeout_s": startup_limit_s(),
        "poll_interval_s": 0.5,
        "stop_grace_s": 20,
        "request_timeout_s": scaled(120),
        "guard_timeout_s": scaled(30),
    }
    fields.update(overrides)
    return ServerConfig.model_validate(fields)
