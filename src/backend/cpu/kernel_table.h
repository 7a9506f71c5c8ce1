#pragma once
// Internal: the per-ISA kernel entry points. dispatch.cpp owns the threading and picks one table;
// the ISA files (compiled with their own -m flags) fill a table each. Everything crossing this
// boundary is plain pointers and integers, so no inline/template code is shared between
// translation units compiled for different ISAs (which could let the linker keep an AVX-512
// copy of a function for a machine without AVX-512).
#include <cstdint>

#include "backend/cpu/delta_rule_args.h"
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

// bf16 GEMM on bf16 weights (AMX-BF16 tiles, or VDPBF16PS on AVX512-BF16 without AMX): the
// activations already rounded to bf16 by to_bf16_rows, in 16-row x 32-k tile blocks: row m, k
// at xb[(m / 16) * 16 * ldx + (k / 32) * 512 + (m % 16) * 32 + k % 32], ldx = Kp = K rounded up
// to 32, rows up to M rounded to 16, zero padded, xb 64-byte aligned (a tile row must not
// straddle cache lines).
struct Bf16GemmArgs {
  const uint16_t* xb;
  int64_t ldx, M, K, Kp;
  const uint16_t* w;  // [N][K] bf16, or f16 with w_f16 (converted to bf16 in the repack)
  bool w_f16;
  int64_t N;
  const float* bias;  // [N] or null
  float* y;           // [M][N]
  // Fused epilogue instead of y: gelu(x W^T + b) rounded to bf16 into yb, the tile blocks of
  // the next matmul's input (same layout as xb, ldyb = N, N a multiple of 32).
  uint16_t* yb = nullptr;
  int64_t ldyb = 0;
  // With y: y = (x W^T + b) + residual ([M][N]; may be y itself).
  const float* residual = nullptr;
  // w is in the bf16p layout (bf16_panels.h): panels read in place, nothing repacked.
  bool w_panels = false;
  // F16 weights (w_f16) at near-f32 accuracy: x = x_hi + x_lo, both rounded to bf16 (xb, and
  // x_lo in the same layout, further on in the same buffer as xb), w = w_hi + w_lo split exactly in
  // the repack (an f16 has 11 significant bits); the four products give (x_hi + x_lo) w exactly, so
  // each term of the dot product is within 2^-17 of x w (x_lo keeps 8 of the 16 bits below x_hi's),
  // with f32 accumulation. (Three products, without x_lo w_lo, measured up to 1.3e-5.)
  const uint16_t* x_lo = nullptr;
};

// One head of full attention (kernels.h self_attention_head_bf16): row i of the head's q, k, v
// at q + i * ldq, k / v + i * ldkv; output row i at out + i * ldo.
struct SelfAttnArgs {
  const float *q, *k, *v;
  int64_t ldq, ldkv, n;
  int head_dim;
  float scale;
  float* out;
  int64_t ldo;
  // Instead of out: bf16 blocks of the whole [n][ld_blocks] output (Bf16GemmArgs layout), this
  // head's columns starting at col0 (a multiple of 16).
  uint16_t* out_blocks = nullptr;
  int64_t ld_blocks = 0, col0 = 0;
  // The near-f32 contract of self_attention_head_split instead (f32 output only).
  bool split = false;
};

// Prefill causal attention of the query heads sharing one KV head, on AMX-BF16
// (causal_attention_amx.cpp; kernels.h causal_attention_bf16 states the contract).
struct CausalAttnArgs {
  const float* q;  // query i, head g of the group at q + i * ldq + g * head_dim
  int64_t ldq;
  int64_t row0, row1;  // the stacked rows r = i * group + g to compute
  int group, head_dim;
  const int32_t* positions;  // query i sees keys j <= positions[i], j < n_kv
  const uint16_t *kp, *vp;   // the KV head's K and V as amx_causal_pack wrote them
  DType kv_type;             // of the cache they were packed from
  int64_t n_kv;
  float scale;
  float* out;  // indexed like q with row stride ldo
  int64_t ldo;
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
  // Decode (split over keys): query i, heads [h0, h1) of one KV head (h1 - h0 <= 8), keys
  // [j0, j1) only. Leaves the unnormalized output rows in o[(h - h0) * head_dim ...], the
  // scaled scores' max in m[h - h0] (-inf when j0 == j1) and sum of exp(score - max) in
  // l[h - h0], for dispatch.cpp to combine the key ranges.
  void (*attention_part)(const AttnArgs& a, int64_t i, int h0, int h1, int64_t j0, int64_t j1,
                         float* o, float* m, float* l);
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
  void (*gelu_tanh)(const float* x, float* out, int64_t n);
  void (*add)(const float* a, const float* b, float* out, int64_t n);
  void (*convert_to_f32)(const void* src, DType t, float* dst, int64_t n);
  void (*softmax_rows)(float* x, int64_t rows, int64_t cols, float scale);
  // kernels.h argmax.
  int64_t (*argmax)(const float* x, int64_t n);
  // Gated DeltaNet (kernels.h): causal_conv1d_silu, the delta rule's value heads [h0, h1) in its
  // chunked or recurrent form, gated_rmsnorm, sigmoid_mul.
  void (*conv1d_silu)(const float* x, int64_t rows, int64_t channels, const float* w, int taps,
                      float* state, float* y);
  void (*delta_rule_heads)(const DeltaRuleArgs& a, int h0, int h1, bool chunked);
  void (*gated_rmsnorm)(const float* x, const float* z, const float* w, float eps, int64_t rows,
                        int64_t dim, float* y);
  void (*sigmoid_mul)(const float* x, const float* gate, float* out, int64_t n);
  // Optional (AMX): bf16-weight matmuls with at least bf16_gemm_min_rows rows round x to bf16
  // with to_bf16_rows (x[M][K] -> xb in the tile blocks of Bf16GemmArgs with ldx = ld, zero
  // for k >= K and for the rows past M of the last 16-row group; x starts a 16-row group) and
  // run bf16_gemm on output columns [n0, n1) (n0 a multiple of 16).
  void (*bf16_gemm)(const Bf16GemmArgs& a, int64_t n0, int64_t n1) = nullptr;
  void (*to_bf16_rows)(const float* x, int64_t M, int64_t K, int64_t ld, uint16_t* xb) = nullptr;
  int64_t bf16_gemm_min_rows = 0;
  // The bf16_gemm serves the vision tower's bf16p weights and the blocks between them only
  // (not bf16 / f16 row weights of an LLM): the fp16 level, whose f16 activations saturate at
  // 65504. Its blocks and GELU output are f16, not bf16 (arm/fp16).
  bool bf16_gemm_panels_only = false;
  // ... and F16 weights with at least f16_split_min_rows rows, x split by to_bf16_rows_split
  // (Bf16GemmArgs::x_lo).
  void (*to_bf16_rows_split)(const float* x, int64_t M, int64_t K, int64_t ld, uint16_t* xb,
                             uint16_t* x_lo) = nullptr;
  int64_t f16_split_min_rows = 0;
  // Optional (AMX, AVX512-BF16): self_attention_head_bf16 for head_dim a multiple of 16.
  void (*self_attention_bf16)(const SelfAttnArgs& a) = nullptr;
  // self_attention_bf16 also takes SelfAttnArgs::split (self_attention_head_split).
  bool self_attention_split = false;
  // The AMX causal prefill kernels (causal_attention_amx.cpp) may run.
  bool causal_attention_amx = false;
  // What kernel_paths() calls the bf16_gemm path.
  const char* bf16_path = nullptr;
  // Optional: columns [n0, n1) (n0 a multiple of 16) of x times weights in the bf16p layout
  // (bf16_panels.h), read in place, f32 products and sums (MatmulArgs::wtype is BF16P).
  void (*matmul_bf16p_cols)(const MatmulArgs& a, int64_t n0, int64_t n1) = nullptr;
};

// The scalar Gated DeltaNet kernels (ref/linear_attention_ref.cpp) scalar_kernels() lists.
void conv1d_silu_ref(const float* x, int64_t rows, int64_t channels, const float* w, int taps,
                     float* state, float* y);
void delta_rule_heads_ref(const DeltaRuleArgs& a, int h0, int h1, bool chunked);
void gated_rmsnorm_ref(const float* x, const float* z, const float* w, float eps, int64_t rows,
                       int64_t dim, float* y);
void sigmoid_mul_ref(const float* x, const float* gate, float* out, int64_t n);

// Each returns a complete table (entries an ISA does not specialise point at scalar code).
const KernelTable& scalar_kernels();
#if defined(__x86_64__)
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();
// The 16-bit GEMM levels (gemm16_driver.h): a base table plus the GEMM for calls from its row
// threshold on, or with every_row for calls of every size (level_tables.h).
// avx512 plus the AMX-BF16 GEMM.
const KernelTable& amx_kernels(bool every_row);
void amx_self_attention_bf16(const SelfAttnArgs& a);  // attention_amx.cpp
// avx512 plus the bf16 GEMM and vision attention on VDPBF16PS (bf16_gemm_avx512bf16.cpp), for
// CPUs with AVX512_BF16 but no AMX.
const KernelTable& avx512bf16_kernels(bool every_row);
// causal_attention_amx.cpp: kernels.h causal_attention_pack / causal_attention_bf16.
int amx_causal_parts(DType kv_type);  // bf16 parts of a packed K / V element
void amx_causal_pack(const void* rows, DType t, int64_t n_kv, int head_dim, bool is_v,
                     uint16_t* dst);
void amx_causal_attention_bf16(const CausalAttnArgs& a);
#endif
#if defined(__aarch64__)
const KernelTable& neon_kernels();  // arm/neon: the float kernels of every AArch64 level
// neon plus the bf16 GEMM on BFDOT (arm/bf16), every_row as for amx_kernels.
const KernelTable& bf16_kernels(bool every_row);
// neon plus the vision tower's bf16 GEMM on FMLA .8h (arm/fp16), every_row as above.
const KernelTable& fp16_kernels(bool every_row);
#endif

}  // namespace edgevl::cpu
