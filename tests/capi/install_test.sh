#!/usr/bin/env bash
# What an app developer does with an installed edgevl: `cmake --install` into a prefix, build
# the C99 example against it through pkg-config alone (shared, and libedgevl.a with
# `pkg-config --static`), again after moving the installed tree (the .pc is relocatable), check
# the SONAME and the exported symbols; then `cpack -G DEB` and check the package's contents and
# that its .pc says /usr.
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

# A sanitizer build's library needs the app linked with the same runtime.
san=()
readelf -d "$libdir/libedgevl.so" | grep -q 'NEEDED.*libasan' && san=(-fsanitize=address,undefined)
# Builds the example against the installation whose libdir is $1; runs it (it prints its usage
# and exits 1 without arguments). $2: shared or static.
build_app() {
  local lib=$1 kind=$2 app=$tmp/app-$2
  export PKG_CONFIG_PATH="$lib/pkgconfig"
  if [[ $kind == shared ]]; then
    # shellcheck disable=SC2046
    $CC -std=c99 -Wall -Wextra -Werror -pedantic "${san[@]}" "$src/examples/c/chat.c" -o "$app" \
      $(pkg-config --cflags --libs edgevl) -Wl,-rpath,"$(pkg-config --variable=libdir edgevl)"
  else
    # libedgevl.a itself (the linker prefers the .so beside it), then Libs.private: every
    # library the archive's objects need must be there.
    # shellcheck disable=SC2046
    $CC -std=c99 -Wall -Wextra -Werror -pedantic "${san[@]}" "$src/examples/c/chat.c" -o "$app" \
      $(pkg-config --cflags edgevl) "$(pkg-config --variable=libdir edgevl)/libedgevl.a" \
      $(pkg-config --static --libs edgevl | sed 's/-ledgevl\b//')
    if readelf -d "$app" | grep -q 'NEEDED.*libedgevl'; then
      echo "the static build still needs libedgevl.so"; exit 1
    fi
  fi
  set +e
  $RUN "$app" >/dev/null 2>&1
  local rc=$?
  set -e
  test "$rc" = 1 || { echo "the installed example ($kind) should print its usage and exit 1, got $rc"; exit 1; }
}
build_app "$libdir" shared
build_app "$libdir" static
# Relocatable: the same tree moved elsewhere still builds (the .pc finds its own prefix).
mv "$tmp/usr" "$tmp/moved"
build_app "${libdir/$tmp\/usr/$tmp/moved}" shared
mv "$tmp/moved" "$tmp/usr"
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
mkdir "$tmp/x" && dpkg-deb -x "$deb" "$tmp/x"
debpc=$(find "$tmp/x" -name edgevl.pc)
grep -qx 'prefix=/usr' "$debpc" || { echo "the .deb's edgevl.pc: $(head -1 "$debpc")"; exit 1; }
depends=$(dpkg-deb -f "$deb" Depends)
grep -q libfmt <<<"$depends" || { echo "Depends lacks libfmt: $depends"; exit 1; }
echo "installed, linked through pkg-config, packaged: $(basename "$deb") ($depends)"
