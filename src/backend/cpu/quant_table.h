#pragma once
// Internal: per-ISA entry points of the quantized matmuls (see quant.h for the formats).
// quant_dispatch.cpp quantizes the activations, splits the weight panels over the threads and
// calls one table; the ISA files fill a table each. Only plain data crosses this boundary, and
// the layout helpers below have internal linkage, so no code compiled with one ISA's flags can
// be picked by the linker for another TU (same rule as kernel_table.h).
#include <cstddef>
#include <cstdint>

#include "core/packed_layout.h"

namespace edgevl::cpu {
namespace {

// Panel sizes (core/packed_layout.h) under the names the kernels use.
constexpr int64_t qt_round_up(int64_t v, int64_t m) {
  return layout::round_up(v, m);
}
constexpr int64_t qt_q8_panel_bytes(int64_t Kp) {
  return layout::q8_panel_bytes_kp(Kp);
}
constexpr int64_t qt_q4_panel_bytes(int64_t Kp, int64_t G, bool zp) {
  return layout::q4_panel_bytes_kp(Kp, G, zp);
}

}  // namespace

// One quantized matmul call. Panels are the 16-row groups of the packed weight.
struct QuantArgs {
  const float* x;  // [M][K] f32 activations (A16 paths)
  int64_t M, K;
  int64_t Kp;          // padded K of the weight format
  const int8_t* xq;    // [M][ldq] int8 activations, zero past K (A8 paths)
  int64_t ldq;         // Kp rounded up to the table's ldq_align
  const float* xs;     // [M] activation scales
  const int32_t* xgs;  // [M][Kp/G] per-group sums of xq (Q4 A8)
  const float* xpad;   // [M][Kp] x padded with zeros (A16 with M <= kA16DirectRows)
  const uint8_t* w;    // packed weights
  int64_t N;
  int group;        // Q4 only
  bool zero_point;  // Q4 only
  const float* bias;
  float* y;  // [M][N]
  // A16: the direct kernel at any M (its per-row order does not depend on M; matmul_q8's
  // row_invariant), instead of the dequantize-to-scratch GEMM from kA16DirectRows + 1 rows.
  bool a16_direct_any_m = false;
};

namespace {
// Where the codes, scales and zero points of each group sit in a Q4 panel of this call.
constexpr layout::Q4Layout q4_layout_of(const QuantArgs& a) {
  return layout::q4_layout(a.Kp, a.group, a.zero_point);
}
}  // namespace

// A16 calls with at most this many rows read the packed weights directly (no scratch).
constexpr int64_t kA16DirectRows = 4;

// Scratch floats an A16 call may use (one buffer per thread, provided by the dispatcher).
constexpr int64_t kQuantScratchFloats = 256 * 64;

struct QuantTable {
  const char* name;
  // Per-row int8 quantization (quant.h); biased: stores xq + 128 as uint8 (XOR 0x80) instead.
  void (*quantize_rows)(const float* x, int64_t M, int64_t K, int64_t ldq, int8_t* xq, float* xs,
                        bool biased);
  // q8_a8 wants its activations biased: xq + 128 stored as uint8 (XOR 0x80), for vpdpbusd.
  bool q8_x_biased;
  // Each computes y columns of panels [p0, p1) for all M rows.
  void (*q8_a8)(const QuantArgs& a, int64_t p0, int64_t p1);
  void (*q4_a8)(const QuantArgs& a, int64_t p0, int64_t p1);
  void (*q8_a16)(const QuantArgs& a, int64_t p0, int64_t p1, float* scratch);
  void (*q4_a16)(const QuantArgs& a, int64_t p0, int64_t p1, float* scratch);
  // A table that handles only large-M A8 calls (AMX) sends A16 calls and A8 calls with fewer
  // than min_rows_a8 rows to `fallback` (null: this table handles every call).
  const QuantTable* fallback = nullptr;
  int64_t min_rows_a8 = 0;
  // Activation buffer its A8 kernels need: row stride ldq a multiple of ldq_align bytes, and
  // all-zero rows up to a multiple of row_align (AMX tile loads read 64-byte x 16-row blocks).
  int64_t ldq_align = 1, row_align = 1;
  // Panel chunks for the threads: multiples of panel_align panels (the widest tile of its A8
  // kernels), and with even_chunks sized so that they spread evenly over the threads (see
  // for_panel_chunks in quant_dispatch.cpp).
  int64_t panel_align = 4;
  bool even_chunks = false;
  // q4_a8 reads QuantArgs::xgs (AMX subtracts the zero point from the weights instead).
  bool q4_group_sums = true;
  // Optional: W4A8 calls of at least q4_prefill_min_rows rows (that allow it, see matmul_q4)
  // go to q4_prefill instead of q4_a8 (AMX: the weights requantized to int8 per call).
  void (*q4_prefill)(const QuantArgs& a, int64_t p0, int64_t p1) = nullptr;
  int64_t q4_prefill_min_rows = 0;
};

const QuantTable& quant_scalar_kernels();
#if defined(__x86_64__)
const QuantTable& quant_avx2_kernels();
const QuantTable& quant_avx512_kernels();
const QuantTable& quant_avxvnni_kernels();
const QuantTable& quant_avx512vnni_kernels();
// AMX-INT8 for A8 calls (all of them with every_row, else those with enough rows to gain),
// AVX-512-VNNI for the rest.
const QuantTable& quant_amx_kernels(bool every_row);
#endif
#if defined(__aarch64__)
const QuantTable& quant_neon_kernels();     // SMULL + SADALP (armv8-a)
const QuantTable& quant_dotprod_kernels();  // SDOT (armv8.2 FEAT_DotProd)
// SMMLA (FEAT_I8MM) for A8 calls of 2 rows and more, the dotprod table for the rest.
const QuantTable& quant_i8mm_kernels();
#endif

}  // namespace edgevl::cpu
