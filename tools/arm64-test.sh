#!/usr/bin/env bash
# Cross-builds edgevl for AArch64 (Debian's g++-aarch64-linux-gnu, arm64 libraries through
# multiarch) and runs the CTest suite under qemu-aarch64 once per emulated CPU model, so that
# every kernel level runs: cortex-a53 (NEON only), neoverse-n1 (+ dotprod), max (+ i8mm, bf16).
#
#   tools/arm64-test.sh                       # install, build, all three CPU models, whole suite
#   tools/arm64-test.sh --cpu neoverse-n1     # one model (repeatable)
#   tools/arm64-test.sh -R 'Quant|Kernel'     # a subset of the tests (ctest -R), -E to exclude
#   tools/arm64-test.sh --no-install --build-only
#   tools/arm64-test.sh --ci                  # what CI runs: the kernel tests (ctest label
#                                             # "kernels") on max, the level rules on the others
#
# Exits non-zero on any failure (install, build, or a test on any CPU model). Prints the
# seconds each part took. Environment: BUILD_DIR (default build-arm64), JOBS (default 2),
# CTEST_JOBS (default 2), NICE (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-$ROOT/build-arm64}
JOBS=${JOBS:-2}
CTEST_JOBS=${CTEST_JOBS:-2}
NICE=${NICE:-10}
CPUS=()
CTEST_ARGS=()
INSTALL=1
RUN=1
CI_MODE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) CPUS+=("$2"); shift 2 ;;
    -R|-E|-L|-LE) CTEST_ARGS+=("$1" "$2"); shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    --build-only) RUN=0; shift ;;
    --ci) CI_MODE=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "arm64-test: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ ${#CPUS[@]} -eq 0 ] && CPUS=(cortex-a53 neoverse-n1 max)

declare -a REPORT=()
timed() {  # timed LABEL command...: runs it, records "LABEL: N s (ok|FAILED)"
  local label=$1 t0 rc=0
  shift
  t0=$(date +%s)
  "$@" || rc=$?
  REPORT+=("$(printf '%-28s %6d s  %s' "$label" $(($(date +%s) - t0)) "$([ $rc -eq 0 ] && echo ok || echo FAILED)")")
  return $rc
}
summary() {
  echo "== arm64-test summary"
  printf '  %s\n' "${REPORT[@]}"
}
trap summary EXIT

install_deps() {
  local SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  # Host tools, the header-only libraries (architecture-independent packages), and the arm64
  # builds of the compiled ones. The list mirrors scripts/setup.sh minus what the cross build
  # switches off (the Python / browser server tests, Google Benchmark).
  local host=(g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user cmake ninja-build ccache
    pkg-config nlohmann-json3-dev libcli11-dev)
  local arm=(libfmt-dev:arm64 libpcre2-dev:arm64 libstb-dev:arm64 libjpeg-dev:arm64
    libgtest-dev:arm64 libgmock-dev:arm64 libcpp-httplib-dev:arm64)
  local missing=()
  for p in "${host[@]}" "${arm[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && { echo "arm64-test: all packages present"; return 0; }
  echo "arm64-test: installing ${missing[*]}"
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

configure_build() {
  local targets=()
  [ $CI_MODE -eq 1 ] && targets=(--target edgevl_kernel_tests)
  nice -n "$NICE" cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchain-aarch64.cmake" >/dev/null &&
    nice -n "$NICE" cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
}

# The level files are compiled for armv8.2-a (+dotprod, +i8mm, +bf16), which lets GCC use LSE
# atomics (armv8.1) in their inline library code; a linker that kept such a copy for the whole
# program would crash an armv8.0 core. The only LSE instructions allowed are libgcc's
# outline-atomics helpers (__aarch64_*), which test the CPU before using them.
check_no_lse() {
  local f bad=0
  for f in "$BUILD_DIR/libedgevl.so" "$BUILD_DIR/edgevl"; do
    if aarch64-linux-gnu-objdump -d --no-show-raw-insn "$f" | awk -v file="$f" '
        /^[0-9a-f]+ <.*>:$/ { fn = $2; next }
        $2 ~ /^(ldadd|ldclr|ldeor|ldset|ldsmax|ldsmin|ldumax|ldumin|swp|cas)/ && fn !~ /^<__aarch64_/ {
          print file ": LSE instruction " $2 " in " fn; bad = 1 }
        END { exit bad }'; then
      echo "arm64-test: $(basename "$f"): no LSE atomics outside the outline helpers"
    else
      bad=1
    fi
  done
  return $bad
}

# One CPU model: the whole CTest suite with qemu-aarch64 -cpu MODEL as the emulator (the
# toolchain file's CMAKE_CROSSCOMPILING_EMULATOR reads EDGEVL_QEMU_CPU at test time).
run_model() {
  local extra=()
  [ $CI_MODE -eq 1 ] && read -r -a extra <<<"$(ci_args "$1")"
  EDGEVL_QEMU_CPU=$1 ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$CTEST_JOBS" \
    "${extra[@]}" "${CTEST_ARGS[@]}"
}

# CI's part (the whole suite takes hours a CPU model under emulation): every kernel against its
# scalar reference and the goldens on max, whose features include every level's (the tests
# sweep all the levels a CPU has, so neon and dotprod run there too); on cortex-a53 and
# neoverse-n1 the rules that depend on which features the CPU reports: level selection, the
# .evb feature refusal, and the goldens on the level each picks.
if [ $CI_MODE -eq 1 ]; then
  CPUS=(max neoverse-n1 cortex-a53)
  RULES='Selection|EvbTarget|GoldenLlm'
fi
ci_args() {  # the ctest arguments for one CPU model in --ci mode
  if [ "$1" = max ]; then echo "-L kernels"; else echo "-L kernels -R $RULES"; fi
}

[ $INSTALL -eq 1 ] && timed install install_deps
timed "cross build" configure_build
timed "armv8.0 check" check_no_lse
[ $RUN -eq 0 ] && exit 0
failed=0
for cpu in "${CPUS[@]}"; do
  timed "ctest -cpu $cpu" run_model "$cpu" || failed=1
done
exit $failed
