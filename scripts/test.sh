#!/usr/bin/env bash
# Set up (scripts/setup.sh), then lint and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_NUM_THREADS=1
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
