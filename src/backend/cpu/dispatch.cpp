// Public kernel entry points: argument checks, ISA selection and the split of work over the
// thread pool. Compiled without ISA flags; it only calls into an ISA file after cpu_features()
// confirmed the CPU and OS support it.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/attention_decode.h"
#include "backend/cpu/bf16_panels.h"
#include "backend/cpu/isa_levels.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"
#include "core/align.h"
#include "core/error.h"
#include "core/kv_layout.h"
#include "core/packed_layout.h"

namespace edgevl::cpu {

namespace {

const KernelTable& kt() {
  return active_kernels();
}

// Per-thread panel buffer for matmul; allocated on a thread's first matmul, then reused.
float* matmul_scratch() {
  thread_local std::vector<float> buf(static_cast<size_t>(kMatmulScratchFloats));
  return buf.data();
}

void check_kv_type(DType t, const char* what) {
  check(kv_type_supported(t), "{}: unsupported KV cache type {} (expected f32, f16 or q8)", what,
        dtype_name(t));
}

void check_float_type(DType t, const char* what) {
  check(t == DType::F32 || t == DType::F16 || t == DType::BF16,
        "{}: unsupported element type {} (expected f32, f16 or bf16)", what, dtype_name(t));
}

// Splits output columns [0, N) over the pool in chunks of a multiple of 16: each thread streams
// its own weight rows / panels exactly once, which is what both the memory-bound GEMV and the
// blocked GEMM want. A few chunks per thread let a thread that got descheduled be covered by
// the others. Chunks are at least min_cols wide.
template <class F>
void for_column_chunks(ThreadPool& pool, int64_t N, F&& f, int64_t min_cols = 16) {
  const int64_t threads = pool.size();
  int64_t chunk = (N + threads * 4 - 1) / (threads * 4);
  chunk = std::max<int64_t>(min_cols, (chunk + 15) / 16 * 16);
  const int64_t n_chunks = (N + chunk - 1) / chunk;
  pool.parallel_for(n_chunks, [&](int64_t c) { f(c * chunk, std::min(N, (c + 1) * chunk)); });
}

// Output columns split over the pool in chunks of 32 (so a fused epilogue's 32-wide bf16 blocks
// never straddle two threads).
void run_bf16_gemm(ThreadPool& pool, const KernelTable& t, const Bf16GemmArgs& a) {
  const int64_t threads = pool.size(), N = a.N;
  int64_t chunk = (N + threads * 4 - 1) / (threads * 4);
  chunk = std::max<int64_t>(32, (chunk + 31) / 32 * 32);
  const int64_t n_chunks = (N + chunk - 1) / chunk;
  pool.parallel_for(n_chunks,
                    [&](int64_t c) { t.bf16_gemm(a, c * chunk, std::min(N, (c + 1) * chunk)); });
}

// One bf16 GEMM (AMX-BF16 or AVX512-BF16): the input as f32 rows x (rounded to bf16 blocks here,
// rows split over the pool) or as blocks xb; weights as bf16 or f16 rows (repacked per call by the
// kernel) or as bf16p panels (read in place); output as f32 y (optionally + residual) or GELU'd
// blocks. x[M][K] rounded into the calling thread's bf16 blocks of row stride Kp (a multiple of
// 32); with lo, also split (to_bf16_rows_split) with the lo parts in a second buffer.
const uint16_t* to_bf16_blocks(ThreadPool& pool, const KernelTable& t, const float* x, int64_t M,
                               int64_t K, int64_t Kp, const uint16_t** lo = nullptr) {
  // Workers write into the calling thread's buffers: the lambdas use the pointers, since naming
  // a thread_local inside them would refer to the worker's own instance. Tile rows must not
  // straddle cache lines: the starts are 64-byte aligned (Kp is a multiple of 32 elements, so
  // every 16 x 32 block stays aligned).
  // The lo blocks follow the hi ones in the same buffer (the kernel addresses them by offset).
  thread_local std::vector<uint16_t> buf;
  const int64_t elems = (M + 15) / 16 * 16 * Kp;
  buf.resize(size_t((lo ? 2 : 1) * elems + 32));
  uint16_t* b = align64(buf.data());
  uint16_t* bl = lo ? b + elems : nullptr;
  pool.parallel_for((M + 15) / 16, [&](int64_t c) {
    const int64_t m0 = c * 16, m1 = std::min(M, m0 + 16);
    if (bl)
      t.to_bf16_rows_split(x + m0 * K, m1 - m0, K, Kp, b + m0 * Kp, bl + m0 * Kp);
    else
      t.to_bf16_rows(x + m0 * K, m1 - m0, K, Kp, b + m0 * Kp);
  });
  if (lo) *lo = bl;
  return b;
}

void amx_bf16_call(ThreadPool& pool, const KernelTable& t, const float* x, const uint16_t* xb,
                   int64_t M, int64_t K, const uint16_t* w, bool w_f16, bool w_panels, int64_t N,
                   const float* bias, float* y, uint16_t* gelu_yb, const float* residual) {
  const int64_t Kp = (K + 31) / 32 * 32;
  if (x) xb = to_bf16_blocks(pool, t, x, M, K, Kp);
  Bf16GemmArgs a{xb, Kp, M, K, Kp, w, w_f16, N, bias, y};
  a.w_panels = w_panels;
  a.yb = gelu_yb;
  a.ldyb = N;
  a.residual = residual;
  run_bf16_gemm(pool, t, a);
}

void matmul_bf16_amx(ThreadPool& pool, const KernelTable& t, const float* x, int64_t M, int64_t K,
                     const uint16_t* w, bool w_f16, int64_t N, const float* bias, float* y) {
  amx_bf16_call(pool, t, x, nullptr, M, K, w, w_f16, false, N, bias, y, nullptr, nullptr);
}

// F16 weights on AMX-BF16 at near-f32 accuracy (Bf16GemmArgs::x_lo).
void matmul_f16_split_amx(ThreadPool& pool, const KernelTable& t, const float* x, int64_t M,
                          int64_t K, const uint16_t* w, int64_t N, const float* bias, float* y) {
  const int64_t Kp = (K + 31) / 32 * 32;
  const uint16_t* lo = nullptr;
  Bf16GemmArgs a{to_bf16_blocks(pool, t, x, M, K, Kp, &lo), Kp, M, K, Kp, w, true, N, bias, y};
  a.x_lo = lo;
  run_bf16_gemm(pool, t, a);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> kernel_paths() {
  const std::string isa = kt().name;
  std::vector<std::pair<std::string, std::string>> p;
  for (const char* family : {"matmul_f32",
                             "matmul_f16",
                             "matmul_bf16",
                             "attention_f32kv",
                             "attention_f16kv",
                             "attention_q8kv",
                             "kv_rows_to_f32",
                             "rmsnorm",
                             "layernorm",
                             "silu_mul",
                             "gelu_erf",
                             "gelu_tanh",
                             "add",
                             "convert_to_f32",
                             "softmax_rows",
                             "rope_rotate_half",
                             "argmax",
                             "causal_conv1d_silu",
                             "gated_delta_rule",
                             "gated_rmsnorm",
                             "sigmoid_mul"}) {
    std::string path = isa;
    const std::string_view f(family);
    if (f == "matmul_bf16" && kt().bf16_gemm && !kt().bf16_gemm_panels_only)
      path = std::string(kt().bf16_path) + " (M >= " + std::to_string(kt().bf16_gemm_min_rows) +
             ") + " + isa;
    if (f == "matmul_f16" && kt().to_bf16_rows_split)
      path = "amx_bf16x4 (linear layers, M >= " + std::to_string(kt().f16_split_min_rows) + ") + " +
             isa;
    if (f.substr(0, 11) == "attention_f" && has_causal_attention_bf16(DType::F16))
      path = "amx_bf16 (prefill) + " + isa;
    p.emplace_back(family, path);
  }
  if (!kt().bf16_gemm && kt().matmul_bf16p_cols) p.emplace_back("matmul_bf16p", isa + " (fma)");
  if (kt().bf16_gemm && kt().bf16_gemm_panels_only)
    p.emplace_back("matmul_bf16p", std::string(kt().bf16_path) + " (vision tower)");
  if (kt().self_attention_bf16)
    p.emplace_back("self_attention_vision",
                   std::string(kt().bf16_path) + (kt().self_attention_split ? "" : " (bf16 only)"));
  p.emplace_back("matmul_q8", quant_kernel_isa());
  p.emplace_back("matmul_q4", quant_q4_path());
  p.emplace_back("kv_store", "scalar");
  return p;
}

namespace {
// Whether row weights (bf16, or f16 for the callers that accept bf16 compute) of an M-row call
// take the table's 16-bit GEMM: not on a level whose GEMM is for the vision tower's panels only.
bool rows_on_bf16_gemm(const KernelTable& t, int64_t M) {
  return t.bf16_gemm && !t.bf16_gemm_panels_only && M >= t.bf16_gemm_min_rows;
}
}  // namespace

void matmul(ThreadPool& pool, const float* x, int64_t M, int64_t K, const void* w, DType wtype,
            int64_t N, const float* bias, float* y) {
  check_float_type(wtype, "matmul weights");
  check(M >= 0 && K >= 0 && N >= 0, "matmul: negative shape M={} K={} N={}", M, K, N);
  if (M == 0 || N == 0) return;
  const KernelTable& t = kt();
  if (wtype == DType::BF16 && rows_on_bf16_gemm(t, M))
    return matmul_bf16_amx(pool, t, x, M, K, static_cast<const uint16_t*>(w), false, N, bias, y);
  const MatmulArgs a{x, M, K, w, wtype, N, bias, y};
  for_column_chunks(pool, N,
                    [&](int64_t n0, int64_t n1) { t.matmul_cols(a, n0, n1, matmul_scratch()); });
}

void matmul_f16_weights(ThreadPool& pool, const float* x, int64_t M, int64_t K, const uint16_t* w,
                        int64_t N, const float* bias, float* y) {
  const KernelTable& t = kt();
  if (t.to_bf16_rows_split && M >= t.f16_split_min_rows && N > 0 && K > 0)
    return matmul_f16_split_amx(pool, t, x, M, K, w, N, bias, y);
  matmul(pool, x, M, K, w, DType::F16, N, bias, y);
}

bool bf16_blocks_supported(int64_t M, bool panel_weights) {
  const KernelTable& t = kt();
  return panel_weights ? t.bf16_gemm != nullptr && M >= t.bf16_gemm_min_rows
                       : rows_on_bf16_gemm(t, M);
}

size_t bf16_blocks_bytes(int64_t M, int64_t K) {
  return size_t(layout::bf16_blocks_bytes(M, K));
}

void matmul_bf16_blocks(ThreadPool& pool, const float* x, const uint16_t* xb, int64_t M, int64_t K,
                        const uint16_t* w, bool w_panels, int64_t N, const float* bias, float* y,
                        uint16_t* gelu_yb, const float* residual) {
  check(bf16_blocks_supported(M, w_panels),
        "matmul_bf16_blocks: no bf16 GEMM for M={} with {} weights on ISA level {}", M,
        w_panels ? "bf16p" : "bf16 row", kt().name);
  check((x == nullptr) != (xb == nullptr) && (y == nullptr) != (gelu_yb == nullptr),
        "matmul_bf16_blocks: give exactly one input form and one output form");
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; };
  check(!xb || (K % 32 == 0 && aligned(xb)),
        "matmul_bf16_blocks: input blocks need K={} a multiple of 32, 64-byte aligned", K);
  check(!gelu_yb || (N % 32 == 0 && aligned(gelu_yb)),
        "matmul_bf16_blocks: output blocks need N={} a multiple of 32, 64-byte aligned", N);
  check(!residual || y, "matmul_bf16_blocks: a residual needs the f32 output form");
  amx_bf16_call(pool, kt(), x, xb, M, K, w, false, w_panels, N, bias, y, gelu_yb, residual);
}

void matmul_bf16_panels(ThreadPool& pool, const float* x, int64_t M, int64_t K, const void* w,
                        int64_t N, const float* bias, float* y) {
  check(M >= 0 && K >= 0 && N >= 0, "matmul: negative shape M={} K={} N={}", M, K, N);
  if (M == 0 || N == 0) return;
  const KernelTable& t = kt();
  const auto* panels = static_cast<const uint16_t*>(w);
  // With the panels in place there is no per-call repack to amortize: the bf16 GEMM (AMX or
  // VDPBF16PS) from one row on.
  if (t.bf16_gemm)
    return amx_bf16_call(pool, t, x, nullptr, M, K, panels, false, true, N, bias, y, nullptr,
                         nullptr);
  // Other SIMD levels: f32 FMA on the panels in place.
  if (t.matmul_bf16p_cols) {
    // Chunks of 4 panels or more: a chunk of one panel makes single-panel tiles, which feed
    // each broadcast to one FMA (simd_kernels.h panel_tile). The vision attention's O = P V
    // (N = 64, on a pool task, so its chunks run on one thread anyway) ran as 4 of them.
    const MatmulArgs a{x, M, K, w, DType::BF16P, N, bias, y};
    for_column_chunks(
        pool, N, [&](int64_t n0, int64_t n1) { t.matmul_bf16p_cols(a, n0, n1); }, 64);
    return;
  }
  // Scalar: back to rows (once per call, on this thread; the weights are read once either way)
  // and the bf16 kernels.
  thread_local std::vector<uint16_t> rows;
  rows.resize(size_t(N * K));
  unpack_bf16_panels(panels, N, K, 0, N, rows.data());
  matmul(pool, x, M, K, rows.data(), DType::BF16, N, bias, y);
}

void layernorm_to_bf16_blocks(ThreadPool& pool, const float* x, const float* w, const float* b,
                              float eps, int64_t M, int64_t K, uint16_t* xb) {
  check(bf16_blocks_supported(M),
        "layernorm_to_bf16_blocks: no bf16 GEMM (AMX-BF16, AVX512-BF16) for M={}", M);
  check(K % 32 == 0 && reinterpret_cast<uintptr_t>(xb) % 64 == 0,
        "layernorm_to_bf16_blocks: K={} must be a multiple of 32 and xb 64-byte aligned", K);
  const KernelTable& t = kt();
  // 16 rows per task: normalised into a per-thread buffer (64 KB at K = 1024, stays in L2),
  // then rounded into their 16-row group of blocks.
  pool.parallel_for((M + 15) / 16, [&](int64_t c) {
    thread_local std::vector<float> rows;
    rows.resize(size_t(16 * K));
    const int64_t m0 = c * 16, m1 = std::min(M, m0 + 16);
    t.layernorm(x + m0 * K, w, b, eps, m1 - m0, K, rows.data());
    t.to_bf16_rows(rows.data(), m1 - m0, K, K, xb + m0 * K);
  });
}

void matmul_bf16_compute(ThreadPool& pool, const float* x, int64_t M, int64_t K, const void* w,
                         DType wtype, int64_t N, const float* bias, float* y) {
  check_float_type(wtype, "matmul_bf16_compute weights");
  const KernelTable& t = kt();
  if (wtype == DType::F16 && rows_on_bf16_gemm(t, M) && N > 0 && K >= 0)
    return matmul_bf16_amx(pool, t, x, M, K, static_cast<const uint16_t*>(w), true, N, bias, y);
  matmul(pool, x, M, K, w, wtype, N, bias, y);
}

void attention(ThreadPool& pool, const float* q, int64_t n_q, int n_heads, int head_dim,
               const void* k_cache, const void* v_cache, DType kv_type, int n_kv_heads,
               int64_t capacity, int64_t n_kv, const int32_t* q_pos, float scale, float* out) {
  check_kv_type(kv_type, "attention");
  check(n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0,
        "attention: {} query heads is not a multiple of {} kv heads", n_heads, n_kv_heads);
  check(head_dim > 0 && n_kv >= 0 && n_kv <= capacity,
        "attention: bad shape head_dim={} n_kv={} capacity={}", head_dim, n_kv, capacity);
  if (n_q <= 0) return;
  AttnArgs a{q,       n_heads, head_dim,   k_cache,  v_cache, nullptr,
             nullptr, kv_type, n_kv_heads, capacity, scale,   out};
  if (kv_type == DType::Q8) {
    const KvLayout lay{kv_type, n_kv_heads, head_dim, capacity};
    a.k_scale = lay.scales(k_cache);
    a.v_scale = lay.scales(v_cache);
  }
  if (n_q == 1)
    return attention_decode(pool, a, q_pos ? std::min<int64_t>(q_pos[0] + 1, n_kv) : n_kv);
  // A task is up to 4 query heads of one KV head (they share its cache rows); fewer per task
  // when that would leave threads idle.
  const int group = n_heads / n_kv_heads;
  int per_task = std::min(4, group);
  auto sets = [&](int k) { return (group + k - 1) / k; };
  while (per_task > 1 && n_q * n_kv_heads * sets(per_task) < 2 * int64_t(pool.size())) --per_task;
  const int n_sets = sets(per_task);
  const KernelTable& t = kt();
  pool.parallel_for(n_q * n_kv_heads * n_sets, [&](int64_t task) {
    const int64_t i = task / (n_kv_heads * n_sets);
    const int r = int(task % (n_kv_heads * n_sets));
    const int h0 = (r / n_sets) * group + (r % n_sets) * per_task;
    const int h1 = std::min(h0 + per_task, (r / n_sets + 1) * group);
    const int64_t n_keys = q_pos ? std::min<int64_t>(int64_t(q_pos[i]) + 1, n_kv) : n_kv;
    t.attention_heads(a, i, h0, h1, n_keys);
  });
}

void kv_store(const float* k, const float* v, int64_t n, int n_kv_heads, int head_dim, int64_t pos0,
              void* k_cache, void* v_cache, DType kv_type, int64_t capacity) {
  check_kv_type(kv_type, "kv_store");
  check(pos0 >= 0 && n >= 0 && pos0 + n <= capacity,
        "kv_store: positions {}..{} exceed the KV cache capacity {}", pos0, pos0 + n, capacity);
  const KvLayout lay{kv_type, n_kv_heads, head_dim, capacity};
  const bool q8 = kv_type == DType::Q8;
  kt().kv_store(k, v, n, n_kv_heads, head_dim, pos0, k_cache, v_cache,
                q8 ? lay.scales(k_cache) : nullptr, q8 ? lay.scales(v_cache) : nullptr, kv_type,
                capacity);
}

void kv_head_to_f32(const void* cache, DType kv_type, int n_kv_heads, int head_dim,
                    int64_t capacity, int head, int64_t n, float* dst) {
  check_kv_type(kv_type, "kv_head_to_f32");
  check(head >= 0 && head < n_kv_heads && n >= 0 && n <= capacity,
        "kv_head_to_f32: head {} / rows {} outside {} heads x {} tokens", head, n, n_kv_heads,
        capacity);
  const KvLayout lay{kv_type, n_kv_heads, head_dim, capacity};
  const int64_t row0 = int64_t(head) * capacity;
  const auto* rows =
      static_cast<const uint8_t*>(cache) + size_t(row0 * head_dim) * lay.elem_bytes();
  kt().kv_rows_to_f32(rows, kv_type == DType::Q8 ? lay.scales(cache) + row0 : nullptr, kv_type, n,
                      head_dim, dst);
}

void rmsnorm(const float* x, const float* weight, float eps, int64_t rows, int64_t dim, float* y) {
  kt().rmsnorm(x, weight, eps, rows, dim, y);
}

int64_t argmax(const float* x, int64_t n) {
  check(n >= 1, "argmax of an empty row");
  return kt().argmax(x, n);
}

void layernorm(const float* x, const float* weight, const float* bias, float eps, int64_t rows,
               int64_t dim, float* y) {
  kt().layernorm(x, weight, bias, eps, rows, dim, y);
}

void rope_rotate_half(float* x, int64_t n_tok, int n_heads, int head_dim, const int32_t* positions,
                      const float* cos_table, const float* sin_table) {
  check(head_dim % 2 == 0, "rope: head_dim {} is odd", head_dim);
  kt().rope(x, n_tok, n_heads, head_dim, positions, cos_table, sin_table);
}

void causal_conv1d_silu(const float* x, int64_t rows, int64_t channels, const float* w, int taps,
                        float* state, float* y) {
  check(taps >= 1 && channels >= 1 && rows >= 0, "causal_conv1d_silu: bad shape");
  kt().conv1d_silu(x, rows, channels, w, taps, state, y);
}

void gated_delta_rule(ThreadPool& pool, const DeltaRuleArgs& a, DeltaRuleForm form) {
  check(a.hk > 0 && a.hv % a.hk == 0 && a.dk > 0 && a.dv > 0,
        "gated_delta_rule: {} value heads over {} key heads", a.hv, a.hk);
  if (a.rows <= 0) return;
  const bool chunked =
      form == DeltaRuleForm::Chunked || (form == DeltaRuleForm::Auto && a.rows > 1);
  const KernelTable& t = kt();
  // Heads are independent: one task each when there is enough work to pay for the dispatch.
  if (a.rows * a.hv * a.dk * a.dv < (1 << 16) || pool.size() <= 1)
    return t.delta_rule_heads(a, 0, a.hv, chunked);
  pool.parallel_for(a.hv, [&](int64_t h) { t.delta_rule_heads(a, int(h), int(h) + 1, chunked); });
}

void gated_rmsnorm(const float* x, const float* z, const float* w, float eps, int64_t rows,
                   int64_t dim, float* y) {
  kt().gated_rmsnorm(x, z, w, eps, rows, dim, y);
}

void sigmoid_mul(const float* x, const float* gate, float* out, int64_t n) {
  kt().sigmoid_mul(x, gate, out, n);
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  kt().silu_mul(gate, up, out, n);
}
bool has_self_attention_bf16(int head_dim) {
  return kt().self_attention_bf16 && head_dim > 0 && head_dim % 16 == 0;
}

bool self_attention_head_bf16(const float* q, int64_t ldq, const float* k, const float* v,
                              int64_t ldkv, int64_t n, int head_dim, float scale, float* out,
                              int64_t ldo, uint16_t* out_blocks, int64_t blocks_ld, int64_t col0) {
  const KernelTable& t = kt();
  if (!has_self_attention_bf16(head_dim) || n <= 0) return false;
  check(!out_blocks || (col0 % 16 == 0 && blocks_ld % 32 == 0 && col0 + head_dim <= blocks_ld &&
                        reinterpret_cast<uintptr_t>(out_blocks) % 64 == 0),
        "self_attention_head_bf16: bad block output (col0 {}, width {})", col0, blocks_ld);
  SelfAttnArgs a{q, k, v, ldq, ldkv, n, head_dim, scale, out, ldo};
  a.out_blocks = out_blocks;
  a.ld_blocks = blocks_ld;
  a.col0 = col0;
  t.self_attention_bf16(a);
  return true;
}

bool has_self_attention_split(int head_dim) {
  return has_self_attention_bf16(head_dim) && kt().self_attention_split;
}

bool self_attention_head_split(const float* q, int64_t ldq, const float* k, const float* v,
                               int64_t ldkv, int64_t n, int head_dim, float scale, float* out,
                               int64_t ldo) {
  if (!has_self_attention_split(head_dim) || n <= 0) return false;
  SelfAttnArgs a{q, k, v, ldq, ldkv, n, head_dim, scale, out, ldo};
  a.split = true;
  kt().self_attention_bf16(a);
  return true;
}

// The causal kernel comes with the AMX-BF16 table (causal_attention_amx marks it), so a forced
// lower ISA level turns it off like the other AMX kernels.
bool has_causal_attention_bf16(DType kv_type) {
#if defined(__x86_64__)
  return kt().causal_attention_amx && (kv_type == DType::F32 || kv_type == DType::F16);
#else
  (void)kv_type;
  return false;
#endif
}

int64_t causal_attention_pack_elems(DType kv_type, int64_t n_kv, int head_dim) {
#if defined(__x86_64__)
  return amx_causal_parts(kv_type) * ((n_kv + 31) / 32 * 32) * ((head_dim + 31) / 32 * 32);
#else
  (void)kv_type, (void)n_kv, (void)head_dim;
  return 0;
#endif
}

void causal_attention_pack(const void* cache, DType kv_type, int n_kv_heads, int head_dim,
                           int64_t capacity, int head, int64_t n_kv, bool is_v, uint16_t* dst) {
  check(has_causal_attention_bf16(kv_type) && head >= 0 && head < n_kv_heads && n_kv >= 0 &&
            n_kv <= capacity && reinterpret_cast<uintptr_t>(dst) % 64 == 0,
        "causal_attention_pack: unsupported call");
#if defined(__x86_64__)
  const size_t row = size_t(head_dim) * dtype_size(kv_type);
  amx_causal_pack(static_cast<const uint8_t*>(cache) + size_t(head) * size_t(capacity) * row,
                  kv_type, n_kv, head_dim, is_v, dst);
#else
  (void)cache, (void)head_dim, (void)is_v;  // unreachable: the check above fails off x86
#endif
}

void causal_attention_bf16(const float* q, int64_t ldq, int64_t row0, int64_t row1, int group,
                           int head_dim, const int32_t* positions, const uint16_t* kp,
                           const uint16_t* vp, DType kv_type, int64_t n_kv, float scale, float* out,
                           int64_t ldo) {
  check(has_causal_attention_bf16(kv_type) && group > 0 && head_dim > 0 && 0 <= row0 &&
            row0 <= row1 && n_kv > 0,
        "causal_attention_bf16: unsupported call");
#if defined(__x86_64__)
  amx_causal_attention_bf16(CausalAttnArgs{q, ldq, row0, row1, group, head_dim, positions, kp, vp,
                                           kv_type, n_kv, scale, out, ldo});
#else
  (void)q, (void)ldq, (void)positions, (void)kp, (void)vp, (void)scale, (void)out, (void)ldo;
#endif
}

void gelu_tanh(const float* x, float* out, int64_t n) {
  kt().gelu_tanh(x, out, n);
}

void gelu_erf(const float* x, float* out, int64_t n) {
  kt().gelu_erf(x, out, n);
}
void softmax_rows(float* x, int64_t rows, int64_t cols, float scale) {
  kt().softmax_rows(x, rows, cols, scale);
}
void add(const float* a, const float* b, float* out, int64_t n) {
  kt().add(a, b, out, n);
}

void convert_to_f32(const void* src, DType t, float* dst, int64_t n) {
  check_float_type(t, "convert_to_f32");
  kt().convert_to_f32(src, t, dst, n);
}

}  // namespace edgevl::cpu
