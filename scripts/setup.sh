#!/usr/bin/env bash
# Installs what edgevl needs to build and test: Debian/Ubuntu packages, and (x86_64) the QNN HTP
# library from PyPI into build/qnn-venv.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
PKGS=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  libfmt-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libstb-dev libjpeg-dev
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev ffmpeg
  libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev
  python3 python3-venv chromium chromium-driver python3-selenium
  libjs-marked libjs-highlight.js node-dompurify
  pybind11-dev python3-dev python3-pytest python3-numpy python3-pil
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all build dependencies present"
fi

# The Qualcomm QNN HTP library (its x86_64 backend, offline prepare and simulator) for the HTP
# backend and its tests: PyPI's onnxruntime-qnn wheel, into build/qnn-venv (the runtime finds it
# there, or wherever EDGEVL_QNN_LIB_DIR points). The CPU build never needs it;
# EDGEVL_NO_QNN=1 skips it, and its tests then skip.
QNN_WHEEL="onnxruntime-qnn==2.7.0"
if [ "${EDGEVL_NO_QNN:-0}" != 1 ] && [ "$(uname -m)" = x86_64 ]; then
  if ! ls build/qnn-venv/lib/python3*/site-packages/onnxruntime_qnn/libQnnHtp.so >/dev/null 2>&1; then
    echo "setup: installing $QNN_WHEEL into build/qnn-venv (the QNN HTP library)"
    mkdir -p build
    python3 -m venv build/qnn-venv
    build/qnn-venv/bin/pip install -q --disable-pip-version-check --no-deps "$QNN_WHEEL"
  else
    echo "setup: QNN HTP library present (build/qnn-venv)"
  fi
fi
