#!/bin/sh
# The cross build's CMAKE_CROSSCOMPILING_EMULATOR (toolchain-aarch64.cmake): runs an AArch64
# program under qemu-user with the Debian cross libraries, on the CPU model EDGEVL_QEMU_CPU
# (default max: every extension qemu emulates). Also the prefix the tests use to start the
# CLI, so a child process runs on the same emulated CPU as its parent.
exec qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu "${EDGEVL_QEMU_CPU:-max}" "$@"
