#pragma once
// What this CPU can run: detection (CPUID + XGETBV on x86-64, the auxiliary vector's HWCAPs on
// AArch64) and the one table of feature names. The ISA levels (backend/cpu/isa_levels.cpp), the
// .evb header's required-feature bits (format/evb.h) and every report (`bench`, `--isa`, errors)
// name features by this table. Kept free of ISA-specific compile flags: it runs before we know
// which instructions are allowed.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace edgevl::cpu {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, bmi2 = false, avx512f = false, avx512bw = false,
       avx512vl = false, avx512dq = false, avx512bf16 = false, avx512vnni = false,
       avx512fp16 = false, avxvnni = false, amx_tile = false, amx_int8 = false, amx_bf16 = false;
  // AArch64 (getauxval HWCAP / HWCAP2): Advanced SIMD, SDOT/UDOT, SMMLA, BFDOT/BFMMLA, and
  // half-precision arithmetic (scalar fphp and vector asimdhp, reported as one).
  bool neon = false, dotprod = false, i8mm = false, bf16 = false, fp16 = false;
};
const CpuFeatures& cpu_features();  // detected once

// A feature's name and flag. The table's order is the .evb header's bit order
// (EvbTarget::required_features bit i = entry i): append only, never reorder.
struct CpuFeatureName {
  std::string_view name;
  bool CpuFeatures::*flag;
};
std::span<const CpuFeatureName> cpu_feature_names();
// Whether this CPU has the feature `name` (false for a name not in the table).
bool cpu_has(std::string_view name);
// This CPU's features in table order, space-separated ("none" when it has none).
std::string cpu_features_string();
// The processor's model name (/proc/cpuinfo), "unknown" when it does not say.
std::string cpu_model_name();

int default_thread_count();  // physical cores usable by this process

}  // namespace edgevl::cpu
