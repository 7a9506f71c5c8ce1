#!/usr/bin/env bash
# The whole test suite in an AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/):
# any report fails the run. EDGEVL_SANITIZE builds the kernels at -O2 (the release rounding),
# the rest of the libraries at -O1 and the CLI's and the tests' own files at -O0
# (CMakeLists.txt), so that the build and the run fit in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[ -f build-asan/CMakeCache.txt ] || cmake -S . -B build-asan "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DEDGEVL_SANITIZE=ON
cmake --build build-asan -j "$(nproc)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# The two longest HTP tests spend their time inside the QNN simulator, which is not
# instrumented; the release suite runs them, and the shorter HTP tests cover our host code here.
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" \
  -E '^QnnHtp\.(W4A16BuildMatchesTheCpusInt4Quality|InternVlImagePromptOnTheSimulator)$'

