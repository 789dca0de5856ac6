#!/usr/bin/env bash
# Create .venv and install openadapt with its development tools. Idempotent; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"
# The validator's default sandbox on Linux without Docker.
if ! command -v bwrap >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null
  else
    echo "warning: bubblewrap (bwrap) is not installed; the validator needs it (or Docker)" >&2
  fi
fi
