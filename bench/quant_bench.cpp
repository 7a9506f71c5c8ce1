// Quantized matmul speed at the Qwen2-0.5B MLP shape (K=896, N=4864): decode GEMV (1 row) and
// 128- and 512-row prefill GEMMs (and 128 rows of the down projection, K=4864 N=896), for W8A8,
// W8A16, W4A8 and W4A16 (G=32 symmetric, the w4 presets' default here), 1 and 2 threads;
// BM_gemm_rows_* sweep M (second argument) to place the row thresholds (AMX, W4A8 prefill route);
// BM_prefill512_* run the four Qwen2-0.5B prefill shapes at M = 512 with 2 threads. GB/s counts
// the packed weight bytes (scales included) read per call; GFLOP/s counts 2*M*N*K.
//
// "cold" GEMV rotates over enough packed copies (>= 512 MB) that every call streams from DRAM,
// like decode once the model is larger than the last-level cache; "hot" reuses one copy.
// Run: quant_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// EDGEVL_ISA=LEVEL (kernels.h isa_levels(): amx, avx512-bf16, ..., scalar; "amx-all-rows" runs
// AMX at every M) measures one kernel level on the same machine.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"

namespace {

using namespace edgevl::cpu;

constexpr int64_t kK = 896, kN = 4864;
constexpr int kGroup = 32;

enum Kind { kQ8A8, kQ8A16, kQ4A8, kQ4A16 };

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Buf = std::unique_ptr<uint8_t, AlignedFree>;

size_t packed_bytes(Kind k, int64_t K, int64_t N) {
  return k == kQ8A8 || k == kQ8A16 ? q8_packed_bytes(N, K) : q4_packed_bytes(N, K, kGroup, false);
}

// n_copies packed weight matrices, 64-byte aligned like an mmapped .evb.
std::vector<Buf> make_weights(Kind k, int n_copies, int64_t K, int64_t N) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.f, 0.02f);
  std::vector<float> w(size_t(N * K));
  for (auto& v : w) v = d(rng);
  const size_t bytes = packed_bytes(k, K, N);
  std::vector<uint8_t> one(bytes);
  if (k == kQ8A8 || k == kQ8A16)
    q8_pack(w.data(), N, K, one.data());
  else
    q4_pack(w.data(), N, K, kGroup, false, one.data());
  std::vector<Buf> out;
  for (int i = 0; i < n_copies; ++i) {
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    std::memcpy(p, one.data(), bytes);
    out.emplace_back(p);
  }
  return out;
}

void run(benchmark::State& st, Kind kind, int64_t M, bool cold, int64_t kK = kK, int64_t kN = kN,
         bool row_invariant = false) {
  if (const char* isa = std::getenv("EDGEVL_ISA"); isa && !force_isa(isa)) {
    st.SkipWithError("ISA level not supported here");
    return;
  }
  const int threads = int(st.range(0));
  ThreadPool pool(threads);
  const size_t bytes = packed_bytes(kind, kK, kN);
  const int copies = cold ? int((512ll << 20) / int64_t(bytes) + 1) : 1;
  const auto w = make_weights(kind, copies, kK, kN);
  std::mt19937 rng(2);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(size_t(M * kK)), y(size_t(M * kN));
  for (auto& v : x) v = d(rng);
  int c = 0;
  for (auto _ : st) {
    const uint8_t* p = w[size_t(c)].get();
    if (kind == kQ8A8 || kind == kQ8A16)
      matmul_q8(pool, x.data(), M, kK, p, kN, nullptr, y.data(), kind == kQ8A8, row_invariant);
    else
      matmul_q4(pool, x.data(), M, kK, p, kN, kGroup, false, nullptr, y.data(), kind == kQ4A8, true,
                row_invariant);
    benchmark::DoNotOptimize(y.data());
    c = (c + 1) % copies;
  }
  st.counters["GB/s"] = benchmark::Counter(double(bytes) * double(st.iterations()) / 1e9,
                                           benchmark::Counter::kIsRate);
  st.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * double(M * kN * kK) * double(st.iterations()) / 1e9, benchmark::Counter::kIsRate);
  st.SetLabel(quant_kernel_isa());
}

void BM_gemv_q8a8_cold(benchmark::State& st) {
  run(st, kQ8A8, 1, true);
}
void BM_gemv_q8a16_cold(benchmark::State& st) {
  run(st, kQ8A16, 1, true);
}
void BM_gemv_q4a8_cold(benchmark::State& st) {
  run(st, kQ4A8, 1, true);
}
void BM_gemv_q4a16_cold(benchmark::State& st) {
  run(st, kQ4A16, 1, true);
}
void BM_gemv_q8a8_hot(benchmark::State& st) {
  run(st, kQ8A8, 1, false);
}
void BM_gemv_q4a8_hot(benchmark::State& st) {
  run(st, kQ4A8, 1, false);
}
void BM_gemv_q4a16_hot(benchmark::State& st) {
  run(st, kQ4A16, 1, false);
}
void BM_gemm512_q8a8(benchmark::State& st) {
  run(st, kQ8A8, 512, false);
}
void BM_gemm512_q4a8(benchmark::State& st) {
  run(st, kQ4A8, 512, false);
}
// The MLP down projection (K=4864, N=896): 56 panels, which the threads must share evenly.
void BM_gemm128_down_q8a8(benchmark::State& st) {
  run(st, kQ8A8, 128, false, kN, kK);
}
void BM_gemm128_down_q4a8(benchmark::State& st) {
  run(st, kQ4A8, 128, false, kN, kK);
}
void BM_gemm_rows_q8a8(benchmark::State& st) {
  run(st, kQ8A8, st.range(1), false);
}
void BM_gemm_rows_q4a8(benchmark::State& st) {
  run(st, kQ4A8, st.range(1), false);
}
// The Qwen2-0.5B prefill shapes at the 512-row chunk: shape index st.range(1) = 0: q / o
// projections (K=896, N=896), 1: k / v (K=896, N=128), 2: gate / up (K=896, N=4864), 3: down
// (K=4864, N=896). GFLOP/s here is the int8 GOP/s of the W8A8 / W4A8 GEMM (2*M*N*K per call).
constexpr int64_t kPrefillShapes[4][2] = {{896, 896}, {896, 128}, {896, 4864}, {4864, 896}};
void BM_prefill512_q8a8(benchmark::State& st) {
  const auto& s = kPrefillShapes[st.range(1)];
  run(st, kQ8A8, 512, false, s[0], s[1]);
}
void BM_prefill512_q4a8(benchmark::State& st) {
  const auto& s = kPrefillShapes[st.range(1)];
  run(st, kQ4A8, 512, false, s[0], s[1]);
}
void BM_gemm128_q8a8(benchmark::State& st) {
  run(st, kQ8A8, 128, false);
}
void BM_gemm128_q8a16(benchmark::State& st) {
  run(st, kQ8A16, 128, false);
}
void BM_gemm128_q4a8(benchmark::State& st) {
  run(st, kQ4A8, 128, false);
}
void BM_gemm128_q4a16(benchmark::State& st) {
  run(st, kQ4A16, 128, false);
}

// Batched decode (Engine::decode_batch): st.range(1) rows of different sequences through one
// row-invariant call, weights from DRAM. GB/s stays the weight bytes per call: at the bandwidth
// wall it holds while the rows grow. The head (K=896, N=151936, Q8 with f32 activations) is
// the one A16 call of the W8A8 / W4A8 presets.
void BM_batch_q8a8_cold(benchmark::State& st) {
  run(st, kQ8A8, st.range(1), true, kK, kN, true);
}
void BM_batch_q4a8_cold(benchmark::State& st) {
  run(st, kQ4A8, st.range(1), true, kK, kN, true);
}
void BM_batch_head_q8a16(benchmark::State& st) {
  run(st, kQ8A16, st.range(1), true, kK, 151936, true);
}
BENCHMARK(BM_batch_q8a8_cold)->ArgsProduct({{1, 2}, {1, 2, 4, 8, 9, 16}})->UseRealTime();
BENCHMARK(BM_batch_q4a8_cold)->ArgsProduct({{1, 2}, {1, 2, 4, 8, 16}})->UseRealTime();
BENCHMARK(BM_batch_head_q8a16)->ArgsProduct({{1, 2}, {1, 2, 4, 8, 16}})->UseRealTime();

BENCHMARK(BM_gemv_q8a8_cold)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemv_q8a16_cold)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemv_q4a8_cold)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemv_q4a16_cold)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemv_q8a8_hot)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemv_q4a8_hot)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemv_q4a16_hot)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemm128_q8a8)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemm128_q8a16)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemm128_q4a8)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemm128_q4a16)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemm512_q8a8)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemm512_q4a8)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemm128_down_q8a8)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemm128_down_q4a8)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_prefill512_q8a8)->ArgsProduct({{2}, {0, 1, 2, 3}})->UseRealTime();
BENCHMARK(BM_prefill512_q4a8)->ArgsProduct({{2}, {0, 1, 2, 3}})->UseRealTime();
BENCHMARK(BM_gemm_rows_q8a8)->ArgsProduct({{1}, {8, 12, 16, 24, 32, 48, 64}})->UseRealTime();
BENCHMARK(BM_gemm_rows_q4a8)->ArgsProduct({{1}, {8, 12, 16, 24, 32, 48, 64}})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
