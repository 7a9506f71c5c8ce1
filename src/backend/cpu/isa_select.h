#pragma once
// Internal: what the dispatchers share — the CPU checks behind each ISA file suffix, and the
// table in use (chosen from CPUID on first call, replaceable by the force_isa test hooks).
#include <atomic>

#include "backend/cpu/kernels.h"

namespace edgevl::cpu {

// *_avx2.cpp files are built with AVX2 + FMA + F16C + BMI2.
inline bool avx2_ok() {
  const CpuFeatures& f = cpu_features();
  return f.avx2 && f.fma && f.f16c && f.bmi2;
}
// *_avx512.cpp files add AVX-512 F/BW/VL/DQ (Skylake-X and later); kernels needing VNNI or
// BF16 live in files of their own suffix (cmake/EdgevlSources.cmake).
inline bool avx512_ok() {
  const CpuFeatures& f = cpu_features();
  return avx2_ok() && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
}

template <class Table>
class ActiveTable {
 public:
  explicit ActiveTable(const Table* (*best)()) : best_(best) {}
  const Table& get() {
    const Table* t = current_.load(std::memory_order_acquire);
    if (!t) {
      t = best_();
      current_.store(t, std::memory_order_release);
    }
    return *t;
  }
  void set(const Table* t) { current_.store(t, std::memory_order_release); }

 private:
  const Table* (*best_)();
  std::atomic<const Table*> current_{nullptr};
};

}  // namespace edgevl::cpu
