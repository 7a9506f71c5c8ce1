#pragma once
// 64-byte alignment of scratch pointers (a cache line; AMX tile rows and AVX-512 loads must not
// straddle one). Internal linkage: the ISA-specific kernel files include this too, and an
// inline function with external linkage could leave the linker a copy built for another level.
#include <cstdint>

namespace edgevl {
namespace {

template <class T>
T* align64(T* p) {
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63));
}

}  // namespace
}  // namespace edgevl
