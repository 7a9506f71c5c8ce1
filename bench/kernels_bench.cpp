// Matmul speed at the Qwen2-0.5B MLP shape (K=896, N=4864): decode GEMV (reported as weight
// GB/s, the bound being DRAM bandwidth) and a 128-row prefill GEMM (GFLOP/s), F16 weights.
//
// "cold" rotates over enough weight copies (>= 512 MB) that every call streams from DRAM, like
// decode does once the whole model is larger than the last-level cache; "hot" reuses one copy.
// BF16 GEMMs: the InternViT MLP shapes (1025 x 1024 -> 4096 and 1024 -> 1024) and a row sweep at
// the Qwen MLP shape (to place the AMX-BF16 threshold); EDGEVL_ISA=avx512 vs amx (or vs
// avx512-bf16, VDPBF16PS on CPUs without AMX) compares the f32 AVX-512 path with the bf16 GEMM
// (second argument: M, third K, fourth N; fifth: 0 bf16 rows repacked per call, 1 f16 rows as
// bf16, 2 bf16p panels packed at compile time).
// Run: kernels_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/bf16_panels.h"
#include "backend/cpu/kernels.h"

namespace {

using namespace edgevl;
using namespace edgevl::cpu;

constexpr int64_t kK = 896, kN = 4864;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

// n_copies weight matrices of [kN][kK] f16, 64-byte aligned like an mmapped .evb.
std::vector<std::unique_ptr<uint16_t, AlignedFree>> make_weights(int n_copies) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<uint16_t> one(size_t(kN * kK));
  for (auto& h : one) h = f32_to_f16(d(rng));
  std::vector<std::unique_ptr<uint16_t, AlignedFree>> out;
  for (int i = 0; i < n_copies; ++i) {
    auto* p = static_cast<uint16_t*>(std::aligned_alloc(64, one.size() * 2));
    std::memcpy(p, one.data(), one.size() * 2);
    out.emplace_back(p);
  }
  return out;
}

void run_matmul(benchmark::State& st, int64_t M, bool cold) {
  // EDGEVL_ISA=avx2|scalar measures a lower ISA level on the same machine.
  if (const char* isa = std::getenv("EDGEVL_ISA"); isa && !force_isa(isa)) {
    st.SkipWithError("ISA level not supported here");
    return;
  }
  const int threads = int(st.range(0));
  ThreadPool pool(threads);
  const int64_t bytes = kN * kK * 2;
  const int copies = cold ? int((512ll << 20) / bytes + 1) : 1;
  const auto w = make_weights(copies);
  std::vector<float> x(size_t(M * kK), 0.5f), y(size_t(M * kN));
  int c = 0;
  for (auto _ : st) {
    matmul(pool, x.data(), M, kK, w[size_t(c)].get(), DType::F16, kN, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
    c = (c + 1) % copies;
  }
  st.counters["GB/s"] = benchmark::Counter(double(bytes) * double(st.iterations()) / 1e9,
                                           benchmark::Counter::kIsRate);
  st.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * double(M * kN * kK) * double(st.iterations()) / 1e9, benchmark::Counter::kIsRate);
  st.SetLabel(kernel_paths()[1].second);
}

// range(4) = 1: F16 weights through the bf16-compute opt-in (matmul_bf16_compute); 2: bf16p
// panels; 3: F16 weights through matmul_f16_weights (on AMX the 4-product split).
void BM_gemm_bf16(benchmark::State& st) {
  if (const char* isa = std::getenv("EDGEVL_ISA"); isa && !force_isa(isa)) {
    st.SkipWithError("ISA level not supported here");
    return;
  }
  const int64_t M = st.range(1), K = st.range(2), N = st.range(3);
  ThreadPool pool(int(st.range(0)));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const bool f16 = st.range(4) == 1 || st.range(4) == 3, panels = st.range(4) == 2;
  std::vector<uint16_t> w(size_t(N * K));
  for (auto& h : w) h = f16 ? f32_to_f16(d(rng)) : f32_to_bf16(d(rng));
  std::vector<uint16_t> packed(bf16_panel_bytes(N, K) / 2);
  pack_bf16_panels(w.data(), N, K, packed.data());
  std::vector<float> x(size_t(M * K)), y(size_t(M * N));
  for (auto& v : x) v = d(rng);
  for (auto _ : st) {
    if (st.range(4) == 3)
      matmul_f16_weights(pool, x.data(), M, K, w.data(), N, nullptr, y.data());
    else if (f16)
      matmul_bf16_compute(pool, x.data(), M, K, w.data(), DType::F16, N, nullptr, y.data());
    else if (panels)
      matmul_bf16_panels(pool, x.data(), M, K, packed.data(), N, nullptr, y.data());
    else
      matmul(pool, x.data(), M, K, w.data(), DType::BF16, N, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * double(M * N * K) * double(st.iterations()) / 1e9, benchmark::Counter::kIsRate);
  st.SetLabel(st.range(4) == 3 ? kernel_paths()[1].second
              : f16            ? "f16 as bf16"
              : panels         ? "bf16p (packed at compile time)"
                               : kernel_paths()[2].second);
}

void BM_gemv_f16_cold(benchmark::State& st) {
  run_matmul(st, 1, true);
}
void BM_gemv_f16_hot(benchmark::State& st) {
  run_matmul(st, 1, false);
}
void BM_gemm128_f16(benchmark::State& st) {
  run_matmul(st, 128, false);
}

BENCHMARK(BM_gemv_f16_cold)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemv_f16_hot)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemm128_f16)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_gemm_bf16)
    ->ArgsProduct({{1, 2}, {1025}, {1024}, {4096, 1024}, {0, 1, 2, 3}})
    ->ArgsProduct({{1, 2}, {1025}, {4096}, {1024}, {0, 2, 3}})
    ->ArgsProduct({{1, 2}, {1025}, {1024}, {3072}, {2}})  // InternViT qkv
    // The vision attention per head: S = Q K^T and O = P V.
    ->ArgsProduct({{1, 2}, {1025}, {64}, {1025}, {0}})
    ->ArgsProduct({{1, 2}, {1025}, {1025}, {64}, {0}})
    // ... as the executor runs them: one head per thread, 205-query blocks, keys padded to 1040.
    ->ArgsProduct({{1}, {205}, {64}, {1040}, {0}})
    ->ArgsProduct({{1}, {205}, {1040}, {64}, {0}})
    ->ArgsProduct({{1}, {1, 2, 4, 8, 16, 32, 64, 128}, {896}, {4864}, {0, 3}})
    ->UseRealTime();

// One vision attention head (1025 tokens, head_dim 64, rows 3 heads apart like the executor's
// q/k/v values) through the fused bf16 kernel (AMX-BF16, or VDPBF16PS: EDGEVL_ISA=amx /
// avx512-bf16 picks one), on one thread; counters in GFLOP/s.
void BM_self_attention_bf16(benchmark::State& st) {
  if (const char* isa = std::getenv("EDGEVL_ISA"); isa && !force_isa(isa))
    return st.SkipWithError("ISA level not supported here");
  const int64_t n = st.range(0), hd = st.range(1), ld = 16 * hd;
  if (!has_self_attention_bf16(int(hd))) return st.SkipWithError("no bf16 attention kernel");
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  std::vector<float> q(size_t(n * ld)), k(size_t(n * ld)), v(size_t(n * ld)), out(size_t(n * ld));
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = d(rng);
  for (auto _ : st)
    self_attention_head_bf16(q.data(), ld, k.data(), v.data(), ld, n, int(hd), 0.125f, out.data(),
                             ld);
  st.counters["GFLOP/s"] = benchmark::Counter(4.0 * double(n) * double(n) * double(hd),
                                              benchmark::Counter::kIsIterationInvariantRate);
  for (const auto& [family, path] : kernel_paths())
    if (family == "self_attention_vision") st.SetLabel(path);
}
BENCHMARK(BM_self_attention_bf16)->Args({1025, 64})->Args({257, 64})->Args({1025, 128});

}  // namespace

// Greedy's pick over Qwen2's 151,936 logits (L2-resident, as after the head): the level's
// argmax; EDGEVL_ISA=scalar gives the scalar loop.
void BM_argmax_vocab(benchmark::State& st) {
  std::vector<float> x(151936);
  std::mt19937 rng(3);
  std::normal_distribution<float> d;
  for (auto& v : x) v = d(rng);
  for (auto _ : st) {
    x[size_t(rng() % x.size())] += 1e-3f;
    benchmark::DoNotOptimize(argmax(x.data(), int64_t(x.size())));
  }
}
BENCHMARK(BM_argmax_vocab);

BENCHMARK_MAIN();
