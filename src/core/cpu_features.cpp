// CPU feature detection and core counting. Kept free of any ISA-specific compile flags: this
// code runs before we know which instructions are allowed.
#include "core/cpu_features.h"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif
#if defined(__linux__)
#include <sched.h>
#endif

namespace edgevl::cpu {

namespace {

#if defined(__x86_64__)
uint64_t read_xcr0() {
  uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

// Linux keeps AMX tile data disabled until a process asks for it.
bool request_amx_permission() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
  const bool fma = c & (1u << 12), f16c = c & (1u << 29);
  const uint64_t xcr0 = osxsave ? read_xcr0() : 0;
  // The OS must save the YMM (bits 1,2) / opmask+ZMM (bits 5,6,7) / tile (17,18) state.
  const bool os_avx = avx && (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;
  if (!os_avx) return f;
  f.fma = fma;
  f.f16c = f16c;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = b & (1u << 5);
  f.bmi2 = b & (1u << 8);
  if (os_avx512) {
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vnni = c & (1u << 11);
    f.avx512fp16 = d & (1u << 23);
  }
  const bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24), amx_int8 = d & (1u << 25);
  const unsigned max_sub = a;
  if (max_sub >= 1) {
    __cpuid_count(7, 1, a, b, c, d);
    f.avxvnni = a & (1u << 4);
    if (os_avx512) f.avx512bf16 = a & (1u << 5);
  }
  if (os_amx && amx_tile && request_amx_permission()) {
    f.amx_tile = true;
    f.amx_int8 = amx_int8;
    f.amx_bf16 = amx_bf16;
  }
  return f;
}
#elif defined(__aarch64__) && defined(__linux__)
// The kernel reports in the auxiliary vector what both the CPU and the kernel support (it
// hides the rest), so this is the one source to trust, as XGETBV is on x86.
CpuFeatures detect() {
  CpuFeatures f;
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  f.neon = hw & HWCAP_ASIMD;
  f.fp16 = (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP);
  f.dotprod = hw & HWCAP_ASIMDDP;
  f.i8mm = hw2 & HWCAP2_I8MM;
  f.bf16 = hw2 & HWCAP2_BF16;
  return f;
}
#else
CpuFeatures detect() {
  return {};
}
#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

std::span<const CpuFeatureName> cpu_feature_names() {
  static constexpr CpuFeatureName kNames[] = {
      {"avx2", &CpuFeatures::avx2},
      {"fma", &CpuFeatures::fma},
      {"f16c", &CpuFeatures::f16c},
      {"bmi2", &CpuFeatures::bmi2},
      {"avx512f", &CpuFeatures::avx512f},
      {"avx512bw", &CpuFeatures::avx512bw},
      {"avx512vl", &CpuFeatures::avx512vl},
      {"avx512dq", &CpuFeatures::avx512dq},
      {"avx512vnni", &CpuFeatures::avx512vnni},
      {"avx512bf16", &CpuFeatures::avx512bf16},
      {"amx_tile", &CpuFeatures::amx_tile},
      {"amx_int8", &CpuFeatures::amx_int8},
      {"amx_bf16", &CpuFeatures::amx_bf16},
      {"avxvnni", &CpuFeatures::avxvnni},
      {"neon", &CpuFeatures::neon},
      {"dotprod", &CpuFeatures::dotprod},
      {"i8mm", &CpuFeatures::i8mm},
      {"bf16", &CpuFeatures::bf16},
      {"fp16", &CpuFeatures::fp16},
      {"avx512fp16", &CpuFeatures::avx512fp16},
  };
  static_assert(std::size(kNames) <= 64, "the .evb header has 64 feature bits");
  return kNames;
}

bool cpu_has(std::string_view name) {
  for (const CpuFeatureName& f : cpu_feature_names())
    if (f.name == name) return cpu_features().*f.flag;
  return false;
}

std::string cpu_features_string() {
  std::string s;
  for (const CpuFeatureName& f : cpu_feature_names()) {
    if (!(cpu_features().*f.flag)) continue;
    if (!s.empty()) s += ' ';
    s += f.name;
  }
  return s.empty() ? "none" : s;
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  // x86 says "model name"; AArch64 kernels may say nothing or "Hardware" / "CPU part".
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      const auto start = p == std::string::npos ? p : line.find_first_not_of(" \t", p + 1);
      if (start != std::string::npos) return line.substr(start);
    }
  return "unknown";
}

int default_thread_count() {
  const int fallback = std::max(1u, std::thread::hardware_concurrency());
#if defined(__linux__)
  // Count distinct (package, core) pairs among the CPUs we may run on: SMT siblings share the
  // FMA units and the cache, so using them slows the compute-bound kernels down.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return fallback;
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const std::string base = fmt::format("/sys/devices/system/cpu/cpu{}/topology/", cpu);
    std::ifstream core_f(base + "core_id"), pkg_f(base + "physical_package_id");
    int core = -1, pkg = -1;
    if (!(core_f >> core) || !(pkg_f >> pkg)) return std::min(fallback, CPU_COUNT(&set));
    cores.emplace(pkg, core);
  }
  if (!cores.empty()) return int(cores.size());
#endif
  return fallback;
}

}  // namespace edgevl::cpu
