"""The toolchain a build ran with: python, torch (and its CUDA), nvcc, gcc, cmake, ninja, compiler cache.

Captured before anything is built, so a missing tool is one clear line up front and the
record says exactly what compiled the kernels.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from ds4sync.core.errors import ToolMissingError
from ds4sync.core.proc import run
from ds4sync.models.native_results import Toolchain, ToolInfo

# Recorded when present, whatever the profile requires.
RECORDED_TOOLS = ("nvcc", "gcc", "g++", "cmake", "ninja", "ccache", "sccache", "uv")
_VERSION_RE = re.compile(r"(\d+\.\d+(?:\.\d+)*)")
_MARK = "DS4SYNC-JSON "
_PROBE = f"""
import json, sys
info = {{"python": sys.version.split()[0], "executable": sys.executable, "prefix": sys.prefix}}
try:
    import torch
    info["torch"] = torch.__version__
    info["torch_cuda"] = torch.version.cuda
except Exception as exc:
    info["torch_error"] = f"{{type(exc).__name__}}: {{exc}}"
print("{_MARK}" + json.dumps(info))
"""


def find_tool(name: str, env: Mapping[str, str]) -> str | None:
    """Where ``name`` lives for a build with ``env``: nvcc in ``$CUDA_HOME/bin`` when that is set, else ``PATH``."""
    if name == "nvcc" and env.get("CUDA_HOME"):
        # torch.utils.cpp_extension and vLLM's setup.py compile with $CUDA_HOME/bin/nvcc, not PATH's.
        candidate = Path(env["CUDA_HOME"]) / "bin" / "nvcc"
        return str(candidate) if candidate.is_file() else None
    return shutil.which(name, path=env.get("PATH", ""))


def require_tools(names: Iterable[str], env: Mapping[str, str], *, python: str | None, where: str) -> dict[str, str]:
    """Paths of the required tools (and the target python, when given).

    Raises:
        ToolMissingError: one line naming every missing tool and where it was looked for.
    """
    found: dict[str, str] = {}
    missing: list[str] = []
    for name in names:
        path = find_tool(name, env)
        if path:
            found[name] = path
        elif name == "nvcc" and env.get("CUDA_HOME"):
            missing.append(f"nvcc (not in $CUDA_HOME/bin = {env['CUDA_HOME']}/bin)")
        else:
            missing.append(f"{name} (not on PATH)")
    if python is not None and not (Path(python).is_file() or shutil.which(python, path=env.get("PATH", ""))):
        missing.append(f"python {python} (no such interpreter)")
    if missing:
        raise ToolMissingError(
            f"missing build tools: {', '.join(missing)}",
            where=where,
            fix="install them, or fix CUDA_HOME / PATH / venv in the build profile",
        )
    return found


def capture_toolchain(
    python: str,
    env: Mapping[str, str],
    *,
    auto_cache: bool = False,
    require_torch: bool = False,
    require_torch_cuda: bool = False,
    where: str = "build",
) -> Toolchain:
    """Run the target python and each tool's ``--version``; nothing is built.

    Args:
        python: the interpreter the build installs into.
        env: the build environment (PATH, CUDA_HOME, compiler launchers).
        auto_cache: the project picks sccache/ccache from PATH by itself (vLLM's setup.py does).
        require_torch / require_torch_cuda: fail when torch (with CUDA) is not importable.

    Raises:
        ToolMissingError: the python does not run, or torch (with CUDA) is required and absent.
    """
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ds4sync-probe-") as tmp:
        probe = run([python, "-c", _PROBE], cwd=tmp, env=env, timeout_s=300)
        info = _probe_json(probe.output)
        if not probe or info is None:
            raise ToolMissingError(
                f"the target python does not run ({probe.describe()})",
                where=where,
                fix="check the venv in the build profile",
            )
        if require_torch and not info.get("torch"):
            raise ToolMissingError(
                f"torch is not importable by {python} ({info.get('torch_error')})",
                where=where,
                fix="install torch into the build environment first (or inherit it)",
            )
        if require_torch_cuda and not info.get("torch_cuda"):
            raise ToolMissingError(
                f"torch {info.get('torch')} in {python} has no CUDA",
                where=where,
                fix="use a CUDA build of torch for this profile",
            )
        tools = {name: _tool_info(name, env, tmp) for name in RECORDED_TOOLS}
    cache, how = _compiler_cache(env, tools, auto=auto_cache)
    return Toolchain(
        python=info.get("executable", python),
        python_version=info.get("python", "?"),
        torch=info.get("torch"),
        torch_cuda=info.get("torch_cuda"),
        torch_error=info.get("torch_error"),
        tools=tools,
        compiler_cache=cache,
        compiler_cache_how=how,
        duration_s=round(time.monotonic() - start, 3),
    )


def _probe_json(output: str) -> dict | None:
    for line in output.splitlines():
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK) :])
    return None


def _tool_info(name: str, env: Mapping[str, str], cwd: str) -> ToolInfo:
    path = find_tool(name, env)
    if path is None:
        return ToolInfo(name=name)
    result = run([path, "--version"], cwd=cwd, env=env, timeout_s=60)
    lines = [line.strip() for line in result.output.splitlines() if line.strip()]
    # nvcc's first line is a banner; its version sits on the "release" line.
    banner = next((line for line in lines if "release" in line), None) if name == "nvcc" else None
    banner = banner or next((line for line in lines if _VERSION_RE.search(line)), None)
    match = _VERSION_RE.search(banner or "")
    return ToolInfo(name=name, path=path, version=match.group(1) if match else None, banner=banner)


def _compiler_cache(env: Mapping[str, str], tools: Mapping[str, ToolInfo], *, auto: bool) -> tuple[str | None, str]:
    for var in ("CMAKE_CXX_COMPILER_LAUNCHER", "CMAKE_CUDA_COMPILER_LAUNCHER", "CXX", "CC", "RUSTC_WRAPPER"):
        head = env.get(var, "").split(" ")[0]
        if not head:
            continue
        # A masquerade link (/usr/lib/ccache/c++ -> ccache) counts as much as `ccache c++`.
        found = shutil.which(head, path=env.get("PATH", ""))
        for name in (Path(head).name, Path(found).resolve().name if found else ""):
            if name in ("ccache", "sccache"):
                return name, f"{var}={env[var]}"
    if auto:
        # vLLM setup.py: sccache when on PATH (unless VLLM_DISABLE_SCCACHE), else ccache.
        if tools["sccache"].path and not env.get("VLLM_DISABLE_SCCACHE"):
            return "sccache", "on PATH; the project's setup.py uses it"
        if tools["ccache"].path:
            return "ccache", "on PATH; the project's setup.py uses it"
    return None, "no compiler launcher configured"
