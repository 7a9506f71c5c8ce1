# Cross-compiling for AArch64 Linux with Debian's g++-aarch64-linux-gnu, against the arm64
# libraries installed through multiarch (dpkg --add-architecture arm64; libfmt-dev:arm64, ...):
#   cmake -S . -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake
# tools/arm64-test.sh installs the packages, builds, and runs the tests under qemu-aarch64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Multiarch puts the arm64 libraries beside the host's (/usr/lib/aarch64-linux-gnu): no sysroot,
# CMake searches /usr with the library architecture above. pkg-config must see only the arm64
# .pc files plus the architecture-independent ones (header-only packages).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# Tests and gtest discovery run through qemu-user; the script reads EDGEVL_QEMU_CPU (default
# max) so one build serves every emulated CPU model.
set(CMAKE_CROSSCOMPILING_EMULATOR "${CMAKE_CURRENT_LIST_DIR}/qemu-aarch64.sh")
