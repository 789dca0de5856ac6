#!/usr/bin/env bash
# Install llama-cpp-python (the embedded designer's backend) into .venv, built so that it runs on this machine.
# Idempotent: a working install is kept; one built with llama.cpp's AMX kernels is rebuilt without them.
#
# llama-cpp-python builds llama.cpp from source, by default for the CPU it is built on (-march=native). On a
# Sapphire Rapids Xeon that build takes llama.cpp's AMX kernels, and they segfaulted in the first matrix product
# of both Q4_K_M models here (ggml_backend_amx_mul_mat, 2026-12-02; ggml-org/llama.cpp#20824). So on x86-64 it is
# built for AVX2 instead: portable (pip's wheel cache may hand the wheel to another machine) and, measured on
# that Xeon with the 1.5B model, 8.7 tokens/s where an AVX-512 build gave 9.1. Set CMAKE_ARGS to build otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
SPEC="llama-cpp-python>=0.3.16"
PORTABLE="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
state() {  # ok | amx | missing
  .venv/bin/python -c "
import sys
try:
    import llama_cpp
except ImportError:
    sys.exit(print('missing'))
print('amx' if 'AMX_INT8 = 1' in llama_cpp.llama_print_system_info().decode() else 'ok')" 2>/dev/null || echo missing
}
case "$(state)" in
  ok) exit 0 ;;
  amx)
    echo "llama-cpp-python was built with llama.cpp's AMX kernels, which crash here: rebuilding it without them (about 4 minutes on 2 cores)"
    .venv/bin/python -m pip cache remove 'llama_cpp_python*' >/dev/null 2>&1 || true  # the AMX wheel, cached
    extra=(--force-reinstall --no-deps) ;;
  missing)
    echo "installing llama-cpp-python; it builds from source where no wheel fits: about 4 minutes on 2 cores"
    extra=() ;;
esac
flags=""
[ "$(uname -m)" = x86_64 ] && flags="$PORTABLE"
CMAKE_ARGS="${CMAKE_ARGS:-$flags}" .venv/bin/python -m pip install -q "${extra[@]}" "$SPEC"
if [ "$(state)" != ok ]; then
  echo "error: llama-cpp-python is still $(state) after the build (CMAKE_ARGS=${CMAKE_ARGS:-$flags})" >&2
  exit 1
fi
.venv/bin/python -c "import llama_cpp; print('llama-cpp-python', llama_cpp.__version__, 'installed')"
