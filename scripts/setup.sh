#!/usr/bin/env bash
# Installs what edgevl needs to build and test, from Debian/Ubuntu packages only.
set -euo pipefail
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
PKGS=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  libfmt-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libstb-dev libjpeg-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev
  python3 chromium chromium-driver python3-selenium
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
