#!/bin/sh
# The cross build's CMAKE_CROSSCOMPILING_EMULATOR (toolchain-aarch64.cmake): runs an AArch64
# program under qemu-user with the Debian cross libraries, on the CPU model EDGEVL_QEMU_CPU
# (default max: every extension qemu emulates). Also the prefix the tests use to start the
# CLI, so a child process runs on the same emulated CPU as its parent.
#
# The AArch64 dynamic loader is started explicitly with the library path, rather than through
# qemu's -L prefix: on a Zen 3 VM (kernel 6.18, qemu 7.2.22) `qemu-aarch64 -L
# /usr/aarch64-linux-gnu` hung before the guest printed anything, even for hello world, while
# the explicit loader ran it at once. /usr/lib/aarch64-linux-gnu holds the multiarch libraries
# (fmt, pcre2, jpeg, gtest).
exec qemu-aarch64 -cpu "${EDGEVL_QEMU_CPU:-max}" /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 \
  --library-path /usr/aarch64-linux-gnu/lib:/usr/lib/aarch64-linux-gnu "$@"
