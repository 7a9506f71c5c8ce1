// The ISA levels and the selection of the active one. Compiled without ISA flags: it only
// hands out tables after cpu_features() confirmed that the CPU and the OS support the level.
#include "backend/cpu/isa_levels.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/quant_table.h"
#include "core/error.h"

namespace edgevl::cpu {

namespace {

// The two tables of a level with a row threshold (level_tables.h): its own ("best") and its
// test hook's, for calls of every size.
template <auto tables>
decltype(auto) best() {
  return tables(false);
}
template <auto tables>
decltype(auto) every_row() {
  return tables(true);
}

// The list, lowest first. The features are those of the ISA file suffixes
// (cmake/EdgevlSources.cmake): *_avx2 files are built with AVX2 + FMA + F16C + BMI2, *_avx512
// adds F/BW/VL/DQ, and so on. cpu_features() reports AMX only once Linux granted the process
// the tile data state.
const IsaLevel kLevels[] = {
    {"scalar", "portable C++ (the reference kernels)", nullptr, "", scalar_kernels,
     quant_scalar_kernels},
#if defined(__x86_64__)
    {"avx2", "AVX2 + FMA f32, vpmaddubsw int8", nullptr, "avx2 fma f16c bmi2", avx2_kernels,
     quant_avx2_kernels},
    {"avx2-vnni", "AVX2 + FMA f32, AVX-VNNI vpdpbusd ymm int8", "avx2", "avxvnni", avx2_kernels,
     quant_avxvnni_kernels},
    {"avx512", "AVX-512 f32, vpmaddubsw zmm int8", "avx2", "avx512f avx512bw avx512vl avx512dq",
     avx512_kernels, quant_avx512_kernels},
    {"avx512-vnni", "AVX-512 f32, vpdpbusd zmm int8", "avx512", "avx512vnni", avx512_kernels,
     quant_avx512vnni_kernels},
    {"avx512-bf16", "AVX-512 f32, vdpbf16ps bf16 for large calls, vpdpbusd zmm int8", "avx512-vnni",
     "avx512bf16", best<avx512bf16_kernels>, quant_avx512vnni_kernels},
    {"amx", "AMX-BF16 / AMX-INT8 tiles for large calls, AVX-512 VNNI below", "avx512-bf16",
     "amx_tile amx_int8 amx_bf16", best<amx_kernels>, best<quant_amx_kernels>},
    // Test hooks: the bf16 / AMX kernels for calls of every size (so tests reach them with a
    // few rows).
    {"avx512-bf16-all-rows", "vdpbf16ps for every call", "avx512-bf16", "",
     every_row<avx512bf16_kernels>, quant_avx512vnni_kernels, true},
    {"amx-all-rows", "AMX tiles for every call", "amx", "", every_row<amx_kernels>,
     every_row<quant_amx_kernels>, true},
#endif
#if defined(__aarch64__)
    // The features are those of the arm file suffixes (cmake/EdgevlSources.cmake): *_dotprod
    // files are built for armv8.2-a+dotprod, *_fp16 for armv8.2-a+fp16, *_i8mm adds i8mm to
    // dotprod, *_bf16 adds bf16. fp16 sits above dotprod: the Armv8.2 cores with FP16
    // arithmetic (Cortex-A55/A75/A76, Neoverse N1 and later) all have dot products.
    {"neon", "NEON f32 FMA, SMULL + SADALP int8", nullptr, "neon", neon_kernels,
     quant_neon_kernels},
    {"dotprod", "NEON f32 FMA, SDOT int8", "neon", "dotprod", neon_kernels, quant_dotprod_kernels},
    {"fp16", "FMLA .8h fp16 GEMM for the vision tower's large calls, SDOT int8, NEON f32",
     "dotprod", "fp16", best<fp16_kernels>, quant_dotprod_kernels},
    {"i8mm", "FMLA .8h vision GEMM, SMMLA int8 GEMM, SDOT int8 GEMV", "fp16", "i8mm",
     best<fp16_kernels>, quant_i8mm_kernels},
    {"bf16", "BFDOT bf16 GEMM for large calls, SMMLA / SDOT int8, NEON f32", "i8mm", "bf16",
     best<bf16_kernels>, quant_i8mm_kernels},
    // Test hooks: the FMLA .8h / BFDOT GEMMs for calls of every size.
    {"fp16-all-rows", "FMLA .8h for every call", "fp16", "", every_row<fp16_kernels>,
     quant_dotprod_kernels, true},
    {"bf16-all-rows", "BFDOT for every call", "bf16", "", every_row<bf16_kernels>,
     quant_i8mm_kernels, true},
#endif
};

const IsaLevel* find_level(std::string_view name) {
  for (const IsaLevel& l : kLevels)
    if (name == l.name) return &l;
  return nullptr;
}

// The features of l this CPU lacks, space-separated ("" when it runs l).
std::string missing_features(const IsaLevel& l) {
  std::string missing = l.base ? missing_features(*find_level(l.base)) : "";
  std::string_view needs = l.adds;
  while (!needs.empty()) {
    const size_t end = std::min(needs.find(' '), needs.size());
    const std::string_view name = needs.substr(0, end);
    needs.remove_prefix(std::min(end + 1, needs.size()));
    if (!cpu_has(name)) missing += std::string(missing.empty() ? "" : " ") + std::string(name);
  }
  return missing;
}

const IsaLevel& detected_best() {
  const IsaLevel* best = &kLevels[0];
  for (const IsaLevel& l : kLevels)
    if (!l.hidden && missing_features(l).empty()) best = &l;
  return *best;
}

std::string known_names() {
  std::string s;
  for (const IsaLevel& l : kLevels)
    if (!l.hidden) s += std::string(s.empty() ? "" : ", ") + l.name;
  return s;
}

// The default: EDGEVL_ISA when it names a level this CPU runs, else the best detected one.
// A library cannot stop its host program over an environment variable, so a bad value is
// reported on stderr once and ignored (the CLI validates it up front with a clear error).
const IsaLevel& default_level() {
  static const IsaLevel* level = [] {
    const char* env = std::getenv("EDGEVL_ISA");
    if (env && *env && std::string_view(env) != "best") {
      const IsaLevel* l = find_level(env);
      if (l && missing_features(*l).empty()) return l;
      std::fprintf(stderr, "edgevl: ignoring EDGEVL_ISA=%s (%s)\n", env,
                   l ? ("this CPU lacks " + missing_features(*l)).c_str()
                     : ("known levels: " + known_names()).c_str());
    }
    return &detected_best();
  }();
  return *level;
}

struct Active {
  std::atomic<const IsaLevel*> level{nullptr};
  std::atomic<const KernelTable*> kernels{nullptr};
  std::atomic<const QuantTable*> quant{nullptr};
  void set(const IsaLevel& l) {
    kernels.store(&l.kernels(), std::memory_order_release);
    quant.store(&l.quant(), std::memory_order_release);
    level.store(&l, std::memory_order_release);
  }
  const IsaLevel& get() {
    const IsaLevel* l = level.load(std::memory_order_acquire);
    if (!l) {
      set(default_level());
      l = level.load(std::memory_order_acquire);
    }
    return *l;
  }
};
Active g_active;

}  // namespace

std::span<const IsaLevel> isa_level_list() {
  return kLevels;
}

const KernelTable& active_kernels() {
  const KernelTable* t = g_active.kernels.load(std::memory_order_acquire);
  if (!t) g_active.get(), t = g_active.kernels.load(std::memory_order_acquire);
  return *t;
}

const QuantTable& active_quant() {
  const QuantTable* t = g_active.quant.load(std::memory_order_acquire);
  if (!t) g_active.get(), t = g_active.quant.load(std::memory_order_acquire);
  return *t;
}

std::vector<std::string> isa_levels(bool with_test_hooks) {
  std::vector<std::string> names;
  for (const IsaLevel& l : kLevels)
    if (with_test_hooks || !l.hidden) names.emplace_back(l.name);
  return names;
}

std::string isa_missing_features(std::string_view level) {
  const IsaLevel* l = find_level(level);
  check(l != nullptr, "unknown ISA level '{}' (known: {})", level, known_names());
  return missing_features(*l);
}

void select_isa(std::string_view level) {
  if (level.empty() || level == "best") return g_active.set(default_level());
  const IsaLevel* l = find_level(level);
  check(l != nullptr && !l->hidden, "unknown ISA level '{}' (known: {}, best)", level,
        known_names());
  const std::string missing = missing_features(*l);
  check(missing.empty(), "ISA level '{}' cannot run on this CPU: it lacks {} (detected: {})", level,
        missing, cpu_features_string());
  g_active.set(*l);
}

bool force_isa(std::string_view level) {
  if (level == "best") {
    g_active.set(default_level());
    return true;
  }
  const IsaLevel* l = find_level(level);
  if (!l || !missing_features(*l).empty()) return false;
  g_active.set(*l);
  return true;
}

const char* active_isa() {
  return g_active.get().name;
}

}  // namespace edgevl::cpu
