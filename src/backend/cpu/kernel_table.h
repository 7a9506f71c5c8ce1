#pragma once
// Internal: the per-ISA kernel entry points. dispatch.cpp owns the threading and picks one table;
// the ISA files (compiled with their own -m flags) fill a table each. Everything crossing this
// boundary is plain pointers and integers, so no inline/template code is shared between
// translation units compiled for different ISAs (which could let the linker keep an AVX-512
// copy of a function for a machine without AVX-512).
#include <cstdint>

#include "core/dtype.h"

namespace edgevl::cpu {

// Raw 16-bit element tags, so overloads can tell half from bfloat16.
struct f16_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};

struct MatmulArgs {
  const float* x;  // [M][K]
  int64_t M, K;
  const void* w;  // [N][K]
  DType wtype;
  int64_t N;
  const float* bias;  // [N] or null
  float* y;           // [M][N]
};

struct AttnArgs {
  const float* q;  // [n_q][n_heads][head_dim]
  int n_heads, head_dim;
  const void* k_cache;  // [n_kv_heads][capacity][head_dim] (core/kv_layout.h)
  const void* v_cache;
  const float* k_scale;  // q8: [n_kv_heads][capacity] row scales; null for float caches
  const float* v_scale;
  DType kv_type;
  int n_kv_heads;
  int64_t capacity;
  float scale;
  float* out;
};

// Scratch floats a matmul_cols call may use (the dispatcher provides one buffer per thread).
constexpr int64_t kMatmulScratchFloats = 64 * 1024;

struct KernelTable {
  const char* name;
  // Computes output columns [n0, n1) of y for all M rows.
  void (*matmul_cols)(const MatmulArgs& a, int64_t n0, int64_t n1, float* scratch);
  // Outputs of query i, heads [h0, h1) over their first n_keys keys. The heads share one KV head
  // (h1 - h0 <= 4), so a SIMD path reads (and converts) each cache row once for all of them.
  void (*attention_heads)(const AttnArgs& a, int64_t i, int h0, int h1, int64_t n_keys);
  void (*rmsnorm)(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y);
  void (*layernorm)(const float* x, const float* w, const float* b, float eps, int64_t rows,
                    int64_t dim, float* y);
  void (*rope)(float* x, int64_t n_tok, int n_heads, int head_dim, const int32_t* positions,
               const float* cos_table, const float* sin_table);
  // k_scale/v_scale: the q8 caches' scale arrays (null for float caches).
  void (*kv_store)(const float* k, const float* v, int64_t n, int n_kv_heads, int head_dim,
                   int64_t pos0, void* k_cache, void* v_cache, float* k_scale, float* v_scale,
                   DType kv_type, int64_t capacity);
  // n cache rows of head_dim elements (scales: their q8 scales, else null) -> f32 [n][head_dim].
  void (*kv_rows_to_f32)(const void* rows, const float* scales, DType kv_type, int64_t n,
                         int head_dim, float* dst);
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*gelu_erf)(const float* x, float* out, int64_t n);
  void (*add)(const float* a, const float* b, float* out, int64_t n);
  void (*convert_to_f32)(const void* src, DType t, float* dst, int64_t n);
  void (*softmax_rows)(float* x, int64_t rows, int64_t cols, float scale);
};

// Each returns a complete table (entries an ISA does not specialise point at scalar code).
const KernelTable& scalar_kernels();
#if defined(__x86_64__)
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();
#endif

}  // namespace edgevl::cpu
