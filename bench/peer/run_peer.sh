#!/usr/bin/env bash
# edgevl vs llama.cpp on the same shapes, same threads, same run (DESIGN.md section 7).
#
#   bench/peer/run_peer.sh [peer.py options...]     e.g. --archs qwen2-0.5b,qwen2.5-1.5b
#
# 1. creates build/venv-peer and installs numpy, gguf, threadpoolctl and llama-cpp-python,
#    which compiles llama.cpp from source with LLAMA_CMAKE_ARGS (below). If that build fails,
#    the reason is kept in build/peer/llama-cpp-python-build.log and the run goes on with
#    edgevl only (its llama.cpp rows are left out and the reason is printed).
# 2. runs bench/peer/peer.py: synth checkpoints, .evb + GGUF conversions, both engines, the
#    machine's bandwidth / SGEMM bounds; writes build/peer/latest.json and
#    bench/results/<date>-<cpu>.md.
#
# Needs build/edgevl (with the `bench` subcommand): scripts/build or
#   cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build
# EDGEVL=/path/to/edgevl overrides it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="$root/build/venv-peer"
mkdir -p "$root/build/peer"
log="$root/build/peer/llama-cpp-python-build.log"

# llama.cpp build flags. Not GGML_NATIVE: -march=native on this Sapphire Rapids class CPU turns
# on the AMX path, and g++ 12's _tile_loadconfig intrinsic can drop the tile-config stores
# (DESIGN.md section 8: SIGILL on the first tile load). So: every AVX-512 extension this CPU
# has (F/BW/DQ/VL via GGML_AVX512, VBMI, VNNI, BF16) plus AVX-VNNI, and AMX explicitly off.
LLAMA_CMAKE_ARGS="${LLAMA_CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
-DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
-DGGML_AVX_VNNI=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_BLAS=OFF \
-DGGML_OPENMP=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}"

export LLAMA_CMAKE_ARGS
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check numpy gguf threadpoolctl

llama_error=""
if ! "$venv/bin/python" -c "import llama_cpp" 2>/dev/null; then
  echo "[peer] building llama-cpp-python (compiles llama.cpp; log: $log)" >&2
  echo "[peer] CMAKE_ARGS=$LLAMA_CMAKE_ARGS" >&2
  if ! CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" \
      "$venv/bin/pip" install -v --no-cache-dir --disable-pip-version-check llama-cpp-python \
      >"$log" 2>&1; then
    llama_error="llama-cpp-python failed to build: $(grep -m1 -E 'error|Error' "$log" || tail -1 "$log")"
    echo "[peer] $llama_error (full log: $log)" >&2
  fi
fi

edgevl="${EDGEVL:-$root/build/edgevl}"
if ! "$edgevl" bench --help >/dev/null 2>&1; then
  echo "[peer] $edgevl has no 'bench' subcommand: build edgevl first (or set EDGEVL=...)" >&2
  exit 1
fi
extra=()
if [[ -n "$llama_error" ]]; then extra+=(--no-llama --llama-error "$llama_error"); fi
exec "$venv/bin/python" "$root/bench/peer/peer.py" --edgevl "$edgevl" "${extra[@]}" "$@"
