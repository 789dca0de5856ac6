#!/usr/bin/env bash
# Set up (scripts/setup.sh), then lint and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests run the real models through llama.cpp: the default designer model and the small one its backend
# tests use (about 1.6 GB in all, fetched once into ~/.cache/openadapt/models/).
export OPENADAPT_SETUP_MODELS="${OPENADAPT_SETUP_MODELS:-qwen2.5-coder-1.5b qwen2.5-coder-0.5b}"
bash scripts/setup.sh
export OMP_NUM_THREADS=1
.venv/bin/ruff check .
# One pytest worker per core (pytest-xdist; work stealing, so the long curriculum runs do not end the suite alone):
# the suite is mostly single-threaded waits on sandboxes and subprocesses.
.venv/bin/python -m pytest -n "${OPENADAPT_TEST_WORKERS:-auto}" --dist worksteal "$@"
