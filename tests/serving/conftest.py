"""Fixtures for the serving tier: a real vLLM CPU server on 127.0.0.1 (one per session).

Tests marked ``serving`` skip, saying so, only when the serving environment
(``scripts/serving-env.sh``) is absent. Helpers live in ``servinghelp.py`` and the scripted
HTTP server in ``scripted.py`` (plain module names: several ``conftest`` modules exist).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from servinghelp import HERE, OFFLINE_ENV, progress, server_config, serving_python

from ds4sync.core.proc import run
from ds4sync.serving.server import ServerHandle, start_server, stop_server, wait_ready
from tests.timing import scaled


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
    res = run(
        [str(vllm_python), str(HERE / "make_tiny_llama.py"), str(out)],
        cwd=out,
        timeout_s=scaled(300),
        env_overrides=OFFLINE_ENV,
    )
    assert res, f"model build failed: {res.describe()}\n{res.output[-2000:]}"
    return out


@pytest.fixture(scope="session")
def vllm_server(
    vllm_python: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerHandle]:
    """One real vLLM CPU server for the session, ready (health 200, model listed)."""
    log = tmp_path_factory.mktemp("vllm-session") / "server.log"
    handle = start_server(server_config(vllm_python, tiny_model), log_path=log)
    try:
        wait_ready(handle, progress=progress)
        yield handle
    finally:
        stop_server(handle)
