// Decode attention over the KV cache at the Qwen2-0.5B shape (14 query heads, 2 KV heads, head
// dim 64), f16 vs q8 caches, one query token against `depth` cached ones. Rotates over 24
// layers' caches, like a decode step does, so at depth 3328 (24 x 1.7 MB of f16 K+V) the cache
// streams from DRAM rather than L2. Reports the KV bytes read per second (core/kv_layout.h).
// Run: kv_attention_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/kv_layout.h"

namespace {

using namespace edgevl;
using namespace edgevl::cpu;

constexpr int kHeads = 14, kKvHeads = 2, kHeadDim = 64, kLayers = 24;

void run_attention(benchmark::State& st, DType kv_type) {
  if (const char* isa = std::getenv("EDGEVL_ISA"); isa && !force_isa(isa)) {
    st.SkipWithError("ISA level not supported here");
    return;
  }
  const int64_t depth = st.range(0);
  ThreadPool pool(int(st.range(1)));
  const int64_t cap = depth + 1;
  const KvLayout lay{kv_type, kKvHeads, kHeadDim, cap};
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> k(size_t(cap * kKvHeads * kHeadDim)), v(k.size());
  for (auto& x : k) x = d(rng);
  for (auto& x : v) x = d(rng);
  std::vector<std::vector<uint8_t>> kc(kLayers), vc(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    kc[size_t(l)].resize(lay.cache_bytes());
    vc[size_t(l)].resize(lay.cache_bytes());
    kv_store(k.data(), v.data(), cap, kKvHeads, kHeadDim, 0, kc[size_t(l)].data(),
             vc[size_t(l)].data(), kv_type, cap);
  }
  std::vector<float> q(size_t(kHeads * kHeadDim), 0.1f), out(q.size());
  const int32_t pos = int32_t(depth);
  for (auto _ : st) {
    for (int l = 0; l < kLayers; ++l)
      attention(pool, q.data(), 1, kHeads, kHeadDim, kc[size_t(l)].data(), vc[size_t(l)].data(),
                kv_type, kKvHeads, cap, cap, &pos, 0.125f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double bytes = 2.0 * kLayers * lay.token_bytes() * double(cap);
  st.counters["KV_GB/s"] =
      benchmark::Counter(bytes * double(st.iterations()) / 1e9, benchmark::Counter::kIsRate);
  st.counters["KV_MB"] = bytes / 1e6;
}

void BM_decode_attention_f16(benchmark::State& st) {
  run_attention(st, DType::F16);
}
void BM_decode_attention_q8(benchmark::State& st) {
  run_attention(st, DType::Q8);
}

// Args: depth, threads.
BENCHMARK(BM_decode_attention_f16)
    ->ArgsProduct({{512, 3328}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_decode_attention_q8)
    ->ArgsProduct({{512, 3328}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
