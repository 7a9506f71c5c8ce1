#pragma once
// CPU backend kernels used by the LLM / vision forward pass (float weights).
//
// Every kernel has a scalar reference; SIMD paths (x86: AVX2+FMA+F16C, AVX-VNNI, AVX-512, AMX;
// AArch64: NEON, dotprod, fp16, i8mm, bf16) are picked once at run time from CPUID or the HWCAPs,
// so one binary runs on any x86-64, and another on any AArch64. Activations are always f32; weights
// may be F32/F16/BF16 straight from the mmapped file.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/cpu/delta_rule_args.h"
#include "backend/cpu/thread_pool.h"
#include "core/cpu_features.h"
#include "core/dtype.h"

namespace edgevl::cpu {

// Which implementation each kernel family uses on this CPU, e.g. {"matmul_f16","avx512"}.
std::vector<std::pair<std::string, std::string>> kernel_paths();
// ISA levels (isa_levels.cpp lists them): "scalar", "avx2", "avx2-vnni", "avx512",
// "avx512-vnni", "avx512-bf16", "amx" on x86-64; "scalar", "neon", "dotprod", "fp16", "i8mm",
// "bf16" on AArch64 — every level this build knows, lowest first. The active
// level picks both the float kernels and the quantized matmuls. Its default is the highest
// level the CPU runs, or EDGEVL_ISA when that names a level it runs.
// with_test_hooks adds the hidden force_isa levels ("amx-all-rows", ...).
std::vector<std::string> isa_levels(bool with_test_hooks = false);
// The CPU features `level` needs that this CPU lacks, space-separated ("" when it runs it);
// throws edgevl::Error for an unknown name.
std::string isa_missing_features(std::string_view level);
// Selects a level for all kernels ("best": back to the default). Throws edgevl::Error naming
// the missing features when the CPU cannot run it, or the known levels for an unknown name.
// Not thread-safe against kernels running concurrently.
void select_isa(std::string_view level);
const char* active_isa();  // the active level's name
// Test hook: select_isa that returns false instead of throwing; also takes the hidden levels
// "amx-all-rows" and "avx512-bf16-all-rows" (those bf16 / tile kernels for calls of every size,
// so tests reach them with few rows).
bool force_isa(std::string_view level);

// y[M,N] = x[M,K] * W^T (+ bias[N] if non-null). W row-major [N][K] in F32, F16 or BF16.
// On AMX-BF16 CPUs, BF16 weights with M >= 8 rows use TDPBF16PS (on AVX512-BF16 CPUs without
// AMX: VDPBF16PS, same threshold): x is rounded to bf16 (nearest even) first, the accuracy
// contract of a bf16 model; all other cases multiply f32 x exactly.
void matmul(ThreadPool& pool, const float* x, int64_t M, int64_t K, const void* w, DType wtype,
            int64_t N, const float* bias, float* y);
// matmul() for the F16 weight matrices of linear layers: on AMX-BF16 CPUs, from 32 rows on, at
// near-f32 accuracy on the AMX-BF16 GEMM: w splits exactly into two bf16 (an f16 has 11
// significant bits), x into two (16 significant bits), four products per term, so each term
// x w is within 2^-17 relative, with f32 accumulation (Bf16GemmArgs::x_lo). Four times the
// tile work of bf16, still 2.4-3.5x faster than matmul()'s AVX-512 f32 FMA on f16 weights
// (kernels_bench BM_gemm_bf16 .../3). Elsewhere exactly matmul(). Attention over an f16 KV
// cache keeps matmul() (f32 numerics).
void matmul_f16_weights(ThreadPool& pool, const float* x, int64_t M, int64_t K, const uint16_t* w,
                        int64_t N, const float* bias, float* y);
// matmul() for callers that accept bf16 compute: additionally runs F16 weights on the bf16
// GEMM (AMX-BF16 or AVX512-BF16, same row threshold), converting them to bf16 (nearest even)
// in the per-call repack.
// That drops 3 of the 10 f16 mantissa bits of every weight (relative error up to 2^-9), on
// top of the bf16 rounding of x, so it is opt-in: matmul() never changes f16 numerics.
// Without a bf16 GEMM, or below the threshold, it is exactly matmul().
void matmul_bf16_compute(ThreadPool& pool, const float* x, int64_t M, int64_t K, const void* w,
                         DType wtype, int64_t N, const float* bias, float* y);
// bf16 activations handed between ops as tile blocks (the layout the AMX GEMM reads its input
// in: Bf16GemmArgs in kernel_table.h) instead of f32 rows, so that an intermediate that only
// feeds bf16 matmuls is never written in f32, read back and rounded again. Results are
// bit-identical to the f32 sequence on the same path (same kernels, same rounding). Only where
// bf16_blocks_supported(M, panel_weights) (a bf16 GEMM: AMX-BF16, AVX512-BF16 or Arm BFDOT,
// and M at or above its row threshold; the Arm fp16 level's GEMM, whose blocks are f16, only
// when every matmul around the blocks has bf16p weights, i.e. in the vision tower); blocks of
// M x K take bf16_blocks_bytes(M, K) bytes, 64-byte aligned, with K a multiple of 32.
bool bf16_blocks_supported(int64_t M, bool panel_weights = true);
size_t bf16_blocks_bytes(int64_t M, int64_t K);
// A bf16-weight matmul from f32 rows x or from blocks xb (exactly one non-null), to f32 rows y
// or, with gelu_yb, to gelu(x W^T + b) as blocks (exactly one non-null). With residual (f32
// output only): y = (x W^T + b) + residual, the residual read before y is written (y may be it).
// w_panels: w is in the bf16p layout (bf16_panels.h), else bf16 rows [N][K].
void matmul_bf16_blocks(ThreadPool& pool, const float* x, const uint16_t* xb, int64_t M, int64_t K,
                        const uint16_t* w, bool w_panels, int64_t N, const float* bias, float* y,
                        uint16_t* gelu_yb, const float* residual = nullptr);
// layernorm() of x[M][K] rounded into blocks.
void layernorm_to_bf16_blocks(ThreadPool& pool, const float* x, const float* w, const float* b,
                              float eps, int64_t M, int64_t K, uint16_t* xb);
// matmul() for bf16p weights (DType::BF16P, bf16_panels.h): the same bf16 contract as BF16
// weights on AMX or AVX512-BF16 (any M: nothing to repack, the panels are read in place);
// elsewhere unpacked to rows per call, then matmul() on them (f32 FMA on exact bf16 weights).
void matmul_bf16_panels(ThreadPool& pool, const float* x, int64_t M, int64_t K, const void* w,
                        int64_t N, const float* bias, float* y);
// The index of the first largest value of x[0..n) (n >= 1), NaNs skipped: greedy decoding's
// pick, the first maximum winning like torch.argmax; 0 when every value is NaN.
int64_t argmax(const float* x, int64_t n);
// y = x / sqrt(mean(x^2) + eps) * weight, per row.
void rmsnorm(const float* x, const float* weight, float eps, int64_t rows, int64_t dim, float* y);
// y = (x - mean) / sqrt(var + eps) * weight + bias, per row (biased variance, like torch).
void layernorm(const float* x, const float* weight, const float* bias, float eps, int64_t rows,
               int64_t dim, float* y);
// Rotate-half RoPE in place on x[n_tok][n_heads][head_dim]; cos/sin tables [max_pos][head_dim/2].
void rope_rotate_half(float* x, int64_t n_tok, int n_heads, int head_dim, const int32_t* positions,
                      const float* cos_table, const float* sin_table);
// Attention over one layer's KV cache ([n_kv_heads][capacity][head_dim] of F32 or F16, or Q8 with
// per (token, head) scales: core/kv_layout.h).
// q/out: [n_q][n_heads][head_dim]. Query i sees keys j <= q_pos[i] (q_pos null: all n_kv keys).
// A query that sees no key gets a zero output. n_heads must be a multiple of n_kv_heads.
void attention(ThreadPool& pool, const float* q, int64_t n_q, int n_heads, int head_dim,
               const void* k_cache, const void* v_cache, DType kv_type, int n_kv_heads,
               int64_t capacity, int64_t n_kv, const int32_t* q_pos, float scale, float* out);
// One query row of a decode batch or a speculative verification: its own cache (or the same
// cache as other rows) and the keys it sees.
struct AttentionRow {
  const float* q;  // [n_heads][head_dim]
  const void* k_cache;
  const void* v_cache;
  DType kv_type;
  int64_t capacity;
  int64_t n_keys;  // keys 0 .. n_keys - 1
  float* out;      // [n_heads][head_dim]
};
// attention() of each row alone (n_q = 1), as one dispatch over the pool: every row's output is
// the bits its own call gives.
void attention_rows(ThreadPool& pool, std::span<const AttentionRow> rows, int n_heads, int head_dim,
                    int n_kv_heads, float scale);
// Writes n rows of k/v ([n][n_kv_heads][head_dim]) at positions pos0.. into the caches
// (Q8: quantized per token and head, scale = max|x| / 127, round to nearest).
void kv_store(const float* k, const float* v, int64_t n, int n_kv_heads, int head_dim, int64_t pos0,
              void* k_cache, void* v_cache, DType kv_type, int64_t capacity);
// The first n tokens of KV head `head` of one cache (K or V of a layer) as f32 [n][head_dim].
void kv_head_to_f32(const void* cache, DType kv_type, int n_kv_heads, int head_dim,
                    int64_t capacity, int head, int64_t n, float* dst);
// One head of full (non-causal) attention over n rows in bf16 precision, the accuracy contract
// of a bf16 tower: q, k and v rounded to bf16 (nearest even); scores s = q k^T in f32;
// e = exp(scale * (s - max_j s)) in f32, rounded to bf16 for the product with v; out =
// (bf16(e) v) / sum(e) with f32 accumulation. Row i of q at q + i * ldq, of k and v at
// + i * ldkv, of out at out + i * ldo. Runs on the calling thread (callers spread heads over
// the pool). Returns false, doing nothing, when this CPU has no such kernel (AMX-BF16 or
// AVX512-BF16) or
// head_dim is not a multiple of 16. With out_blocks, writes instead this head's columns
// col0.. of the whole output as the bf16 blocks a bf16 matmul reads (see matmul_bf16_blocks;
// blocks_ld = the output width), rounded like that matmul would round the f32 output.
bool self_attention_head_bf16(const float* q, int64_t ldq, const float* k, const float* v,
                              int64_t ldkv, int64_t n, int head_dim, float scale, float* out,
                              int64_t ldo, uint16_t* out_blocks = nullptr, int64_t blocks_ld = 0,
                              int64_t col0 = 0);
// The same attention at near-f32 accuracy (the f16 tower): q, k, v and the exp weights e are
// each split into two bf16 (16 significant bits, error < 2^-17 relative) and every product
// taken as the four hi/lo products, f32 accumulation: scores within ~2^-16 of sum|q k|, about
// 4x the tile work of the bf16 contract and ~10x faster than the f32 matmul path. f32 output
// only; false (nothing done) where has_self_attention_split is false (AMX-BF16 only).
bool self_attention_head_split(const float* q, int64_t ldq, const float* k, const float* v,
                               int64_t ldkv, int64_t n, int head_dim, float scale, float* out,
                               int64_t ldo);
// Whether self_attention_head_bf16 runs for this head_dim on this CPU (and forced ISA level):
// AMX-BF16, or AVX512-BF16 (VDPBF16PS).
bool has_self_attention_bf16(int head_dim);
// Whether self_attention_head_split runs (AMX-BF16 only).
bool has_self_attention_split(int head_dim);
// Scalar reference of the same contract (std::exp; tests compare the kernel against it).
void self_attention_head_bf16_ref(const float* q, int64_t ldq, const float* k, const float* v,
                                  int64_t ldkv, int64_t n, int head_dim, float scale, float* out,
                                  int64_t ldo);
// Prefill (causal, grouped-query) attention of one KV head on AMX-BF16, in near-f32 precision:
// operands are split into bf16 parts (x0 = bf16(x), x1 = bf16(x - x0), ...) whose products are
// summed in f32: q in three parts and k exactly in two (f16) or in three (f32) for scores of f32
// precision; p and v in two parts for an f16 cache (p keeps 16 bits), in three for an f32 cache
// (f32-class throughout). The softmax is online over steps
// of 128 keys, exp the 2^x polynomial of the vision kernel (relative error < 2.7e-6). Only where
// has_causal_attention_bf16 (AMX-BF16 and an f32 or f16 cache; q8 caches take the f32 path).
bool has_causal_attention_bf16(DType kv_type);
// uint16 elements causal_attention_pack writes for n_kv keys (K or V of one KV head).
int64_t causal_attention_pack_elems(DType kv_type, int64_t n_kv, int head_dim);
// The first n_kv rows of KV head `head` of a cache (K, or V with is_v) in the kernel's tile
// layout, dst 64-byte aligned.
void causal_attention_pack(const void* cache, DType kv_type, int n_kv_heads, int head_dim,
                           int64_t capacity, int head, int64_t n_kv, bool is_v, uint16_t* dst);
// Rows [row0, row1) of the `group` heads sharing that KV head, stacked query-major (row r =
// query r / group, head r % group of the group): query i, head g at q + i * ldq + g * head_dim
// (out likewise with ldo) sees keys j <= positions[i], j < n_kv (a query that sees none gets
// zeros). kp / vp: its packed K and V. Runs on the calling thread.
void causal_attention_bf16(const float* q, int64_t ldq, int64_t row0, int64_t row1, int group,
                           int head_dim, const int32_t* positions, const uint16_t* kp,
                           const uint16_t* vp, DType kv_type, int64_t n_kv, float scale, float* out,
                           int64_t ldo);
// Gated DeltaNet (Qwen3.5's linear-attention layers).
// Causal depthwise conv of `rows` consecutive tokens of one sequence over `channels`, then SiLU:
// y[t][c] = silu(sum_j w[c][j] x[t - taps + 1 + j][c]) (w [channels][taps]). The rows before
// t = 0 come from `state` ([taps - 1][channels], oldest first: the previous tokens' raw inputs,
// zeros at a sequence's start), which is left holding the last taps - 1 raw rows. y must not
// alias x.
void causal_conv1d_silu(const float* x, int64_t rows, int64_t channels, const float* w, int taps,
                        float* state, float* y);
// The gated delta rule (backend/cpu/delta_rule_impl.h says the math) over a.rows tokens, value
// heads spread over the pool. Auto: the chunked form (C = 64) for more than one row, the
// recurrent form for one; both forms agree to rounding.
enum class DeltaRuleForm { Auto, Recurrent, Chunked };
void gated_delta_rule(ThreadPool& pool, const DeltaRuleArgs& a,
                      DeltaRuleForm form = DeltaRuleForm::Auto);
// Per row of dim: y = x / sqrt(mean(x^2) + eps) * w * silu(z) (the GDN output norm).
void gated_rmsnorm(const float* x, const float* z, const float* w, float eps, int64_t rows,
                   int64_t dim, float* y);
// out = x * sigmoid(gate) (Qwen3.5's gated attention output).
void sigmoid_mul(const float* x, const float* gate, float* out, int64_t n);

void silu_mul(const float* gate, const float* up, float* out, int64_t n);  // silu(gate) * up
void gelu_erf(const float* x, float* out, int64_t n);                      // exact (erf) GELU
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): torch's gelu(approximate="tanh").
void gelu_tanh(const float* x, float* out, int64_t n);
// In place, per row: x = softmax(scale * x).
void softmax_rows(float* x, int64_t rows, int64_t cols, float scale);
void add(const float* a, const float* b, float* out, int64_t n);
void convert_to_f32(const void* src, DType t, float* dst, int64_t n);  // F32/F16/BF16 -> f32

}  // namespace edgevl::cpu
