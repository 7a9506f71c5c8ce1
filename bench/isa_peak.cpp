// Register-only peak of the instructions edgevl's GEMMs are built on, with 1 thread and with
// all threads: the physical bound that the per-level speed targets are fractions of.
//
//   build/bench/isa_peak [threads] [--json]
//
// Each loop keeps 12 independent accumulators in registers (enough to cover the latency of
// every instruction measured on current x86 cores) and touches no memory. Ops count a multiply
// and an add as two: an f32 FMA zmm is 32 ops, vdpbf16ps zmm 64, vpdpbusd zmm 128, AVX-VNNI
// vpdpbusd ymm 64, and the int8 triple vpmaddubsw + vpmaddwd + vpaddd 64 (ymm) or 128 (zmm).
// Instructions the CPU lacks are reported as such, never run. Medians of 5 runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/kernels.h"

#if defined(__x86_64__)
#include "backend/cpu/x86/intrin_x86.h"
#endif

namespace {

constexpr long kIters = 20'000'000;  // x 12 instructions: ~0.1-0.3 s per run

#if defined(__x86_64__)
// Each kernel updates 12 accumulators per iteration (the fixed-count inner loop unrolls into
// registers; the operands are loop-invariant, the accumulators carry the dependency) and
// returns a value derived from all of them, so none is dead code. (GCC 12 copies each
// accumulator to a fresh register around every vpdpbusd / vdpbf16ps intrinsic; the copies are
// eliminated at register rename and cost nothing measurable here. Tying the accumulators in
// inline asm instead made it keep the array in memory: a store per step, a third of the rate.)
__attribute__((target("avx512f"))) float fma_zmm(long iters) {
  const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_set1_ps(1.f);
  for (long i = 0; i < iters; ++i)
    for (auto& a : acc) a = _mm512_fmadd_ps(a, b, c);
  __m512 s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, acc[j]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) float fma_ymm(long iters) {
  const __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
  __m256 acc[12];
  for (auto& a : acc) a = _mm256_set1_ps(1.f);
  for (long i = 0; i < iters; ++i)
    for (auto& a : acc) a = _mm256_fmadd_ps(a, b, c);
  __m256 s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, acc[j]);
  return _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f,avx512bf16"))) float dpbf16_zmm(long iters) {
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80), c = (__m512bh)_mm512_set1_epi16(0x3a83);
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_set1_ps(1.f);
  for (long i = 0; i < iters; ++i)
    for (auto& a : acc) a = _mm512_dpbf16_ps(a, b, c);
  __m512 s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, acc[j]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,avx512vnni"))) float dpbusd_zmm(long iters) {
  const __m512i b = _mm512_set1_epi8(3), c = _mm512_set1_epi8(-2);
  __m512i acc[12];
  for (auto& a : acc) a = _mm512_set1_epi32(1);
  for (long i = 0; i < iters; ++i)
    for (auto& a : acc) a = _mm512_dpbusd_epi32(a, b, c);
  __m512i s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_epi32(s, acc[j]);
  return float(_mm512_reduce_add_epi32(s));
}

__attribute__((target("avx2,avxvnni"))) float dpbusd_ymm(long iters) {
  const __m256i b = _mm256_set1_epi8(3), c = _mm256_set1_epi8(-2);
  __m256i acc[12];
  for (auto& a : acc) a = _mm256_set1_epi32(1);
  for (long i = 0; i < iters; ++i)
    for (auto& a : acc) a = _mm256_dpbusd_avx_epi32(a, b, c);
  __m256i s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm256_add_epi32(s, acc[j]);
  return float(_mm256_extract_epi32(s, 0));
}

// The AVX2 int8 dot product: u8 x s8 pairs to int16 (vpmaddubsw), pairs of int16 to int32
// (vpmaddwd with ones), accumulated (vpaddd): 32 multiply-adds per triple. The product does not
// depend on the accumulator, so an empty asm makes the operand opaque before every product: with
// it once an iteration, GCC computed one product for all 12 accumulators and spilled them, a
// figure set by the spills, not by vpmaddubsw (458 G ops/s on 2 Zen 5 threads, and 2062 for zmm).
__attribute__((target("avx2"))) float maddubs_ymm(long iters) {
  const __m256i c = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  __m256i b = _mm256_set1_epi8(3);
  __m256i acc[12];
  for (auto& a : acc) a = _mm256_set1_epi32(1);
  for (long i = 0; i < iters; ++i)
    for (auto& a : acc) {
      asm volatile("" : "+x"(b));
      a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(b, c), ones));
    }
  __m256i s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm256_add_epi32(s, acc[j]);
  return float(_mm256_extract_epi32(s, 0));
}

// The same triple on zmm (AVX-512BW): the `avx512` level's int8 product (no VNNI), 64
// multiply-adds per triple.
__attribute__((target("avx512f,avx512bw"))) float maddubs_zmm(long iters) {
  const __m512i c = _mm512_set1_epi8(-2), ones = _mm512_set1_epi16(1);
  __m512i b = _mm512_set1_epi8(3);
  __m512i acc[12];
  for (auto& a : acc) a = _mm512_set1_epi32(1);
  for (long i = 0; i < iters; ++i)
    for (auto& a : acc) {
      asm volatile("" : "+v"(b));
      a = _mm512_add_epi32(a, _mm512_madd_epi16(_mm512_maddubs_epi16(b, c), ones));
    }
  __m512i s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_epi32(s, acc[j]);
  return float(_mm512_reduce_add_epi32(s));
}
#endif

struct Probe {
  const char* name;
  const char* level;  // the ISA levels whose GEMMs use it
  double ops_per_instr;
  bool available;
  float (*fn)(long);
};

double run_threads(const Probe& p, int threads) {
  std::vector<double> rates;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<std::thread> pool;
    std::vector<float> sink(static_cast<size_t>(threads));
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { sink[size_t(t)] = p.fn(kIters); });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    volatile float keep = sink[0];
    (void)keep;
    rates.push_back(double(threads) * kIters * 12 * p.ops_per_instr / s);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = edgevl::cpu::default_thread_count();
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0)
      json = true;
    else
      threads = std::max(1, std::atoi(argv[i]));
  }
  std::vector<Probe> probes;
#if defined(__x86_64__)
  const edgevl::cpu::CpuFeatures& f = edgevl::cpu::cpu_features();
  probes = {
      {"f32 fma zmm", "avx512*", 32, f.avx512f, fma_zmm},
      {"f32 fma ymm", "avx2*", 16, f.avx2 && f.fma, fma_ymm},
      {"bf16 vdpbf16ps zmm", "avx512-bf16", 64, f.avx512bf16, dpbf16_zmm},
      {"int8 vpdpbusd zmm", "avx512-vnni, avx512-bf16", 128, f.avx512vnni, dpbusd_zmm},
      {"int8 vpdpbusd ymm (AVX-VNNI)", "avx2-vnni", 64, f.avxvnni, dpbusd_ymm},
      {"int8 vpmaddubsw+vpmaddwd ymm", "avx2", 64, f.avx2, maddubs_ymm},
      {"int8 vpmaddubsw+vpmaddwd zmm", "avx512", 128, f.avx512bw, maddubs_zmm},
  };
#endif
  if (json)
    std::printf("{\"threads\": %d, \"peaks\": [", threads);
  else {
    std::printf(
        "register-only peaks, %d thread(s) and 1; G ops/s (multiply + add = 2), median of 5\n",
        threads);
    std::printf("cpu features: %s\n\n", edgevl::cpu::cpu_features_string().c_str());
    std::printf("| instruction | used by | 1 thread | %d threads |\n|---|---|---|---|\n", threads);
  }
  bool first = true;
  for (const Probe& p : probes) {
    if (!p.available) {
      if (!json) std::printf("| %s | %s | not on this CPU | |\n", p.name, p.level);
      continue;
    }
    const double one = run_threads(p, 1), all = run_threads(p, threads);
    if (json)
      std::printf("%s{\"name\": \"%s\", \"gops_1t\": %.1f, \"gops\": %.1f}", first ? "" : ", ",
                  p.name, one / 1e9, all / 1e9);
    else
      std::printf("| %s | %s | %.0f | %.0f |\n", p.name, p.level, one / 1e9, all / 1e9);
    first = false;
  }
  if (json) std::printf("]}\n");
  return 0;
}
