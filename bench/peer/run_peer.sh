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
#
# PEER_ISA=LEVEL runs both engines at one of edgevl's x86 levels on a CPU that has more (a row
# of the per-level comparison, measured where no machine of that kind is at hand): llama.cpp
# built with exactly that level's instruction sets in its own venv (build/venv-peer-LEVEL),
# edgevl under EDGEVL_ISA=LEVEL, and for the AVX2 levels the SGEMM bound from OpenBLAS's
# Haswell kernels. The levels and the llama.cpp switches each turns on:
#   avx2         AVX2 + FMA + F16C (Haswell .. Zen 3)
#   avx2-vnni    + AVX-VNNI (Alder Lake and later laptops: no AVX-512)
#   avx512       + AVX-512 F/BW/VL/DQ (Skylake-SP)
#   avx512-vnni  + AVX-512 VNNI (Cascade Lake, Ice Lake)
#   avx512-bf16  + AVX-512 BF16 (Zen 4 / Zen 5, Sapphire Rapids without its AMX)
# A level the CPU lacks is refused before anything is built.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="$root/build/venv-peer"
peer_isa="${PEER_ISA:-}"
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ "$cpu_flags" == *" $1 "* ]]; }
onoff() { if has "$1"; then echo ON; else echo OFF; fi; }
# llama.cpp's switches per level (ON/OFF for AVX-VNNI, AVX-512, AVX-512 VNNI, AVX-512 BF16) and
# the CPU flags the level needs.
level_vnni=OFF level_512=OFF level_512vnni=OFF level_512bf16=OFF need="avx2 fma f16c"
case "$peer_isa" in
  "") ;;
  avx2) ;;
  avx2-vnni) level_vnni=ON need="$need avx_vnni" ;;
  avx512) level_512=ON need="$need avx512f avx512bw avx512vl avx512dq" ;;
  avx512-vnni)
    level_512=ON level_512vnni=ON need="$need avx512f avx512bw avx512vl avx512dq avx512_vnni" ;;
  avx512-bf16)
    level_512=ON level_512vnni=ON level_512bf16=ON
    need="$need avx512f avx512bw avx512vl avx512dq avx512_vnni avx512_bf16" ;;
  *)
    echo "[peer] PEER_ISA=$peer_isa: not a level (avx2, avx2-vnni, avx512, avx512-vnni," \
      "avx512-bf16; unset for the CPU's best)" >&2
    exit 2
    ;;
esac
if [[ -n "$peer_isa" ]]; then
  for f in $need; do
    if ! has "$f"; then
      echo "[peer] PEER_ISA=$peer_isa needs the CPU flag $f, which this CPU lacks" >&2
      exit 2
    fi
  done
  venv="$root/build/venv-peer-$peer_isa"
  export EDGEVL_ISA="$peer_isa"
  [[ "$peer_isa" == avx2* ]] && export PEER_OPENBLAS_CORETYPE=Haswell
fi
mkdir -p "$root/build/peer"
log="$root/build/peer/llama-cpp-python-build.log"

# llama.cpp build flags, picked from this CPU's /proc/cpuinfo flags so that the peer runs the
# best path it has here and no instruction the CPU lacks (a Zen 4 has AVX-512 VNNI/BF16 but no
# AVX-VNNI; Alder Lake laptops have AVX-VNNI but no AVX-512). Not GGML_NATIVE with g++ on an AMX
# CPU: g++ 12's _tile_loadconfig intrinsic can drop the tile-config stores (DESIGN.md section 8:
# SIGILL on the first tile load). With AMX and clang present, llama.cpp's AMX path is built
# with clang, GGML_NATIVE and -D__AMX_INT8__ (clang 14 spells the macro __AMXINT8__ and
# llama.cpp tests gcc's spelling: without it the AMX code is silently left out). The flags
# chosen are printed and recorded in the build log.
common="-DGGML_BLAS=OFF -DGGML_OPENMP=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
if [[ -n "$peer_isa" ]]; then
  default_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_AVX512=$level_512 -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=$level_512vnni \
-DGGML_AVX512_BF16=$level_512bf16 -DGGML_AVX_VNNI=$level_vnni -DGGML_AMX_TILE=OFF \
-DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF $common"
  peer_path="g++, the $peer_isa level only (PEER_ISA=$peer_isa: AVX-VNNI $level_vnni, AVX-512 \
$level_512, AVX-512 VNNI $level_512vnni, AVX-512 BF16 $level_512bf16)"
elif has amx_tile && has amx_int8 && command -v clang >/dev/null && command -v clang++ >/dev/null; then
  export CC=clang CXX=clang++ CFLAGS="-D__AMX_INT8__ -D__AMX_BF16__" CXXFLAGS="-D__AMX_INT8__ -D__AMX_BF16__"
  default_args="-DGGML_NATIVE=ON $common"
  peer_path="clang, GGML_NATIVE (AMX)"
else
  default_args="-DGGML_NATIVE=OFF -DGGML_AVX=$(onoff avx) -DGGML_AVX2=$(onoff avx2) \
-DGGML_FMA=$(onoff fma) -DGGML_F16C=$(onoff f16c) -DGGML_AVX512=$(onoff avx512f) \
-DGGML_AVX512_VBMI=$(onoff avx512vbmi) -DGGML_AVX512_VNNI=$(onoff avx512_vnni) \
-DGGML_AVX512_BF16=$(onoff avx512_bf16) -DGGML_AVX_VNNI=$(onoff avx_vnni) \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF $common"
  peer_path="g++, flags from /proc/cpuinfo"
  has amx_tile && peer_path="$peer_path (AMX present but clang missing: AMX path off)"
fi
LLAMA_CMAKE_ARGS="${LLAMA_CMAKE_ARGS:-$default_args}"
echo "[peer] llama.cpp build: $peer_path" >&2

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
