#!/usr/bin/env bash
# Style and types, as CI checks them before the tests: ruff check, ruff format --check, mypy (pydantic plugin)
# over the package, the kernel suite (kernels/) and the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
echo "lint: ruff check, ruff format --check, mypy"
"$PY" -m ruff check -q .
"$PY" -m ruff format --check -q .
"$PY" -m mypy
