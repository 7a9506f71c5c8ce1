#!/usr/bin/env bash
# llama.cpp's own tools (llama-bench, llama-mtmd-cli, llama-quantize) and its converter, for
# bench/peer/vlm_peer.py: the peer on the Qwen-VL families, whose GGUF and vision projector only
# llama.cpp's converter writes.
#
#   bench/peer/llama_tools.sh            -> build/peer-src/llama-build/bin, prints the two paths
#   PEER_ISA=avx2 bench/peer/llama_tools.sh   -> build/peer-src/llama-build-avx2: AVX2 + FMA + F16C
#                                            only (run vlm_peer.py with EDGEVL_ISA=avx2 and
#                                            PEER_OPENBLAS_CORETYPE=Haswell beside it); likewise
#                                            avx2-vnni, avx512, avx512-vnni, avx512-bf16
#
# The source is the llama.cpp that llama-cpp-python vendors (the sdist from PyPI, the version
# below: the same peer run_peer.sh builds through pip), built with the instruction sets this
# CPU's /proc/cpuinfo lists (GGML_NATIVE off, so a shared build never takes one it lacks), no
# AMX path (run_peer.sh says why), OpenMP threads as llama-bench uses by default.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
src_root="$root/build/peer-src"
src="$src_root/llama_cpp_python-$version/vendor/llama.cpp"
out="$src_root/llama-build${PEER_ISA:+-$PEER_ISA}"
mkdir -p "$src_root"
if [[ ! -f "$src/CMakeLists.txt" ]]; then
  "$root/build/venv/bin/pip" download -q --no-deps --no-binary :all: \
    "llama-cpp-python==$version" -d "$src_root"
  tar xzf "$src_root/llama_cpp_python-$version.tar.gz" -C "$src_root"
fi
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
# One of edgevl's x86 levels (run_peer.sh lists them): the build takes only that level's
# instruction sets, which the CPU must have.
avx512_base="avx512f avx512bw avx512vl avx512dq"
case "${PEER_ISA:-}" in
  "") level="" ;;
  avx2) level="avx2 fma f16c" ;;  # the laptop class: nothing past AVX2
  avx2-vnni) level="avx2 fma f16c avx_vnni" ;;
  avx512) level="avx2 fma f16c $avx512_base" ;;
  avx512-vnni) level="avx2 fma f16c $avx512_base avx512_vnni" ;;
  avx512-bf16) level="avx2 fma f16c $avx512_base avx512_vnni avx512_bf16" ;;
  *)
    echo "PEER_ISA=$PEER_ISA: not a level (avx2, avx2-vnni, avx512, avx512-vnni, avx512-bf16)" >&2
    exit 2
    ;;
esac
if [[ -n "$level" ]]; then
  for f in $level; do
    if [[ "$cpu_flags" != *" $f "* ]]; then
      echo "PEER_ISA=$PEER_ISA needs the CPU flag $f, which this CPU lacks" >&2
      exit 2
    fi
  done
  cpu_flags=" $level "
fi
onoff() { if [[ "$cpu_flags" == *" $1 "* ]]; then echo ON; else echo OFF; fi; }
cmake -S "$src" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DGGML_AVX=ON -DGGML_AVX2="$(onoff avx2)" -DGGML_FMA="$(onoff fma)" -DGGML_F16C="$(onoff f16c)" \
  -DGGML_AVX512="$(onoff avx512f)" -DGGML_AVX512_VBMI="$(onoff avx512vbmi)" \
  -DGGML_AVX512_VNNI="$(onoff avx512_vnni)" -DGGML_AVX512_BF16="$(onoff avx512_bf16)" \
  -DGGML_AVX_VNNI="$(onoff avx_vnni)" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
  -DGGML_BLAS=OFF -DGGML_OPENMP=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF >/dev/null
cmake --build "$out" -j "${JOBS:-2}" --target llama-bench llama-mtmd-cli llama-quantize >/dev/null
echo "--llama-bin $out/bin --llama-src $src"
