"""Fixtures for the serving tier: a real vLLM CPU server on 127.0.0.1 and scripted HTTP servers.

The real server needs the serving environment (``scripts/serving-env.sh``): its python is
``$DS4SYNC_SERVING_PYTHON`` or ``.venv-serving/bin/python`` at the repository root. Tests
marked ``serving`` skip, saying so, only when that interpreter is absent. One server is
started per session; tests that kill or break a server start their own.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ds4sync.proc import run
from ds4sync.serving.config import ServerConfig
from ds4sync.serving.server import ServerHandle, start_server, stop_server, wait_ready

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MODEL_NAME = "tiny"
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "INFO", "OMP_NUM_THREADS": "2",
               # named tool_choice through the JSON-schema path, so arguments follow the schema exactly
               "VLLM_ENFORCE_STRICT_TOOL_CALLING": "0"}

# JSON arguments without free whitespace: a random model would otherwise pad them with newlines forever.
STRUCTURED_OUTPUTS = '{"backend": "xgrammar", "disable_any_whitespace": true}'

sys.path.insert(0, str(HERE))


def serving_python() -> Path | None:
    """The serving environment's interpreter, or None when it was never created."""
    explicit = os.environ.get("DS4SYNC_SERVING_PYTHON")
    path = Path(explicit) if explicit else ROOT / ".venv-serving" / "bin" / "python"
    return path if path.is_file() else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def vllm_command(python: Path, model_dir: Path, *extra: str) -> tuple[str, ...]:
    """The vLLM OpenAI server command (``{host}``/``{port}`` filled from ServerConfig)."""
    return (str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
            "--served-model-name", MODEL_NAME, "--host", "{host}", "--port", "{port}", "--max-model-len", "4096",
            "--dtype", "bfloat16", "--max-num-seqs", "8", *extra)


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The serving environment's python; skips the test when the environment is absent."""
    python = serving_python()
    if python is None:
        pytest.skip("serving environment absent: run scripts/serving-env.sh (or set DS4SYNC_SERVING_PYTHON)")
    return python


@pytest.fixture(scope="session")
def tiny_model(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama and tokenizer written by tests/serving/make_tiny_llama.py."""
    out = tmp_path_factory.mktemp("tiny-llama")
    res = run([str(vllm_python), str(HERE / "make_tiny_llama.py"), str(out)], cwd=out, timeout_s=300,
              env_overrides=OFFLINE_ENV)
    assert res, f"model build failed: {res.describe()}\n{res.output[-2000:]}"
    return out


def server_config(python: Path, model_dir: Path, **overrides: object) -> ServerConfig:
    """A ServerConfig that starts vLLM on a free 127.0.0.1 port."""
    fields: dict[str, object] = {
        "command": vllm_command(python, model_dir, "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                                "--structured-outputs-config", STRUCTURED_OUTPUTS),
        "host": "127.0.0.1", "port": free_port(), "model": MODEL_NAME, "env": OFFLINE_ENV,
        "startup_timeout_s": 240, "poll_interval_s": 0.5, "stop_grace_s": 20, "request_timeout_s": 120,
        "guard_timeout_s": 30}
    fields.update(overrides)
    return ServerConfig.model_validate(fields)


@pytest.fixture(scope="session")
def vllm_server(vllm_python: Path, tiny_model: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    """One real vLLM CPU server for the session, ready (health 200, model listed)."""
    log = tmp_path_factory.mktemp("vllm-session") / "server.log"
    handle = start_server(server_config(vllm_python, tiny_model), log_path=log)
    try:
        wait_ready(handle)
        yield handle
    finally:
        stop_server(handle)
