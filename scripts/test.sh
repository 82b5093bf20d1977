#!/usr/bin/env bash
# Set up ds4sync with its test and kernel extras (.venv) and vLLM's CPU build (.venv-serving), then run the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0  # first and pinned: the CPU build; the build tests compile against it
.venv/bin/python -m pip install -q -e '.[test,kernel]'  # kernel: triton, whose interpreter runs the kernels on the CPU
bash scripts/serving-env.sh  # vLLM's CPU build in .venv-serving, for the tests marked `serving`
# Headless Chromium for the trend page's browser test (skipped without it); quick when already there.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get update -q && $SUDO apt-get install -y -q chromium || echo "chromium not installed: the trend browser test will skip"
fi
bash scripts/lint.sh  # ruff and mypy first: a style or type error fails fast
exec .venv/bin/python -m pytest "$@"
