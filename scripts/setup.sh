#!/usr/bin/env bash
# Create .venv and install openadapt with its development tools. Idempotent; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch first, pinned to the CPU build that lies on disk here; the package itself only asks for torch>=2.4.
# On a GPU machine, install your CUDA build of torch before running this script: it is then kept.
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[train,dev]"
# The validator's default sandbox on Linux without Docker.
if ! command -v bwrap >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null
  else
    echo "warning: bubblewrap (bwrap) is not installed; the validator needs it (or Docker)" >&2
  fi
fi
