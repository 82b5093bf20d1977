#!/usr/bin/env bash
# Set up a virtual environment with ds4sync and its test/kernel extras, then run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0  # first and pinned: the CPU build; the build tests compile against it
.venv/bin/python -m pip install -q -e '.[test,kernel]'  # kernel: triton, whose interpreter runs the kernels on the CPU
exec .venv/bin/python -m pytest "$@"
