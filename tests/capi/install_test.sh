#!/usr/bin/env bash
# What an app developer does with an installed edgevl: `cmake --install` into a prefix, build
# the C99 example against it through pkg-config alone, check the SONAME and the exported
# symbols; then `cpack -G DEB` and check the package's contents.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
# A cross build passes the target's tools: CC (compiler), NM, and RUN (the emulator the app
# runs under).
set -euo pipefail
CC=${CC:-cc}
NM=${NM:-nm}
RUN=${RUN:-}
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/usr" >/dev/null
pc=$(find "$tmp/usr" -name edgevl.pc)
test -n "$pc" || { echo "no edgevl.pc installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
test -x "$tmp/usr/bin/edgevl" || { echo "no CLI installed"; exit 1; }
test -f "$tmp/usr/include/edgevl.h" || { echo "no header installed"; exit 1; }
test -f "$libdir/libedgevl.a" || { echo "no static library installed"; exit 1; }

export PKG_CONFIG_PATH="$libdir/pkgconfig"
sed -i "s|^prefix=.*|prefix=$tmp/usr|" "$pc"
# A sanitizer build's library needs the app linked with the same runtime.
san=()
readelf -d "$libdir/libedgevl.so" | grep -q 'NEEDED.*libasan' && san=(-fsanitize=address,undefined)
# shellcheck disable=SC2046
$CC -std=c99 -Wall -Wextra -Werror -pedantic "${san[@]}" "$src/examples/c/chat.c" -o "$tmp/app" \
  $(pkg-config --cflags --libs edgevl) -Wl,-rpath,"$libdir"
set +e
$RUN "$tmp/app" >/dev/null 2>&1
rc=$?
set -e
test "$rc" = 1 || { echo "the installed example should print its usage and exit 1, got $rc"; exit 1; }
soname=$(readelf -d "$libdir/libedgevl.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
test "$soname" = libedgevl.so.1 || { echo "SONAME is '$soname'"; exit 1; }
others=$($NM -D --defined-only "$libdir/libedgevl.so" | awk '$2 != "A" && $3 !~ /^edgevl_/' | wc -l)
test "$others" = 0 || { echo "libedgevl.so exports $others symbols outside the C API"; exit 1; }

# The Debian package (dpkg-shlibdeps reads the library's dependencies).
(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/deb" >/dev/null)
deb=$(ls "$tmp"/deb/*.deb)
contents=$(dpkg-deb -c "$deb")
for f in usr/bin/edgevl usr/include/edgevl.h libedgevl.so.1 edgevl.pc; do
  grep -q "$f" <<<"$contents" || { echo "$f missing from $deb"; exit 1; }
done
depends=$(dpkg-deb -f "$deb" Depends)
grep -q libfmt <<<"$depends" || { echo "Depends lacks libfmt: $depends"; exit 1; }
echo "installed, linked through pkg-config, packaged: $(basename "$deb") ($depends)"
