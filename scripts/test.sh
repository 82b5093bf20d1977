#!/usr/bin/env bash
# Set up ds4sync with its test and kernel extras (.venv) and vLLM's CPU build (.venv-serving), then run the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0  # first and pinned: the CPU build; the build tests compile against it
.venv/bin/python -m pip install -q -e '.[test,kernel]'  # kernel: triton, whose interpreter runs the kernels on the CPU
bash scripts/serving-env.sh  # vLLM's CPU build in .venv-serving, for the tests marked `serving`
bash scripts/lint.sh  # ruff and mypy first: a style or type error fails fast
exec .venv/bin/python -m pytest "$@"
