#pragma once
// Quantized weight formats (Q8, Q4) and their CPU matmul kernels.
//
// Weights are packed once, at compile time, into the exact layout the kernels read; the packed
// bytes are what the model binary stores. Activations stay f32 at the interface: the W8A8 / W4A8
// paths quantize them per row (token) to int8 inside the matmul and do int8 dot products with
// int32 accumulation; the A16 paths dequantize the weights on the fly and use float FMA.
//
// ---------------------------------------------------------------- common
// All multi-byte values are little-endian. Output rows n of the [N][K] weight are grouped in
// panels of 16 consecutive rows (N is padded to Np = ceil(N/16)*16 with all-zero rows whose
// scale is 0). Within a panel, weights are interleaved as "16 rows x 4 k" blocks of 64 bytes:
// byte (r*4 + i) of block b belongs to row 16p+r, input index 4b+i. One 512-bit load of a
// block feeds one vpdpbusd producing 16 outputs (AVX2 reads it as two 256-bit halves of 8
// rows). K is padded with zeros (never refused): to Kp = ceil(K/4)*4 for Q8, ceil(K/G)*G for Q4.
// Panels are stored one after the other; each panel's size is a multiple of 64 bytes, so the
// kernels stream a panel's bytes front to back exactly once per GEMV.
//
// ---------------------------------------------------------------- Q8 (int8, per output row)
// q[n][k] = clamp(round(w[n][k] / s[n]), -127, 127), s[n] = max_k |w[n][k]| / 127 (s = 0 and
// q = 0 for an all-zero row); w ~= s[n] * q[n][k]. Rounding: to nearest, ties away from zero.
// Panel p (q8_panel_bytes(K) = 16*Kp + 128 bytes):
//   [0, 16*Kp)          Kp/4 blocks of 64 bytes: int8 q, byte r*4+i of block b = q[16p+r][4b+i]
//   [16*Kp, +64)        16 x f32 scale s[16p+r]
//   [16*Kp+64, +64)     16 x int32 row sum  sum_k q[16p+r][k]   (see "u8 x s8" below)
// q8_packed_bytes(N, K) = Np/16 * (16*Kp + 128).
//
// ---------------------------------------------------------------- Q4 (int4, per row x group)
// Groups of G in {32, 64, 128} consecutive k; ng = Kp/G groups per row. Stored codes are
// unsigned nibbles c in [0, 15] with a zero point z: w ~= s[n][g] * (c - z).
//   symmetric (zero_point = false): z = 8 (implied, not stored), c = clamp(round(w / s), -8, 7)
//     + 8 (so c in [0, 15]), s = m / d with m the group's value of largest magnitude and d
//     the divisor in {-10, -9.5, ..., -6} whose (f16-rounded) scale gives the least squared
//     error over the group (codes rounded to nearest even for this estimate, summed in f32 as
//     q4_symmetric_scale does), the first on ties. d = -8 maps m to the code
//     -8, so all 16 codes are used (s is negative when m is positive); d = -7 is the plain
//     max|w| / 7 grid, so the error is never above that one's; |d| > 8 clips m.
//   asymmetric (zero_point = true): lo = min(min w, 0), hi = max(max w, 0), s = (hi - lo) / 15,
//     z = round(-lo / s) in [0, 15] (stored per row and group), c = clamp(round(w / s) + z, 0, 15).
// The scale is stored as an IEEE f16 (s is rounded to f16 first, then the codes are computed
// with the rounded scale; a scale above the f16 range is refused at packing). Rounding: to
// nearest, ties away from zero. An all-zero group (or one whose scale rounds to 0) gets s = 0,
// c = z (= 8 or 0).
// Panel p (q4_panel_bytes(K, G, zp) bytes; offsets in core/packed_layout.h, Q4Layout): the
// groups in pairs, each pair one run of bytes so that a panel is a single stream:
//   codes of group g      G/8 blocks of 64 bytes; in block b of group g, byte r*4+i holds
//                         c[16p+r][g*G + 8b + i] in its low nibble and c[16p+r][g*G + 8b + 4 + i]
//                         in its high nibble (two "16 x 4" blocks share 64 bytes: AND 0x0F and
//                         (>>4) & 0x0F give both)
//   codes of group g+1    likewise
//   scales line (64 B)    16 x f16 s[16p+r][g], then 16 x f16 s[16p+r][g+1]
//   zero line (64 B)      only if zero_point: 16 x uint8 z[16p+r][g], 16 x z[..][g+1], 32 zeros
// An odd number of groups ends with a pair of one group (its lines half used, the rest zero).
// q4_packed_bytes(N, K, G, zp) = Np/16 * q4_panel_bytes(K, G, zp).
//
// ---------------------------------------------------------------- activations (A8)
// Per row m: a[m] = max_k |x[m][k]| / 127 (0 for a zero row), xq = clamp(round_even(x * (127 /
// max|x|)), -127, 127) as int8; rounding is to nearest, ties to even (the SIMD convert).
// Q8: acc[m][n] = sum_k xq*q (int32, exact), y = float(acc) * (a[m] * s[n]) (+ bias[n]).
// Q4: per group acc_g = sum_k xq*c - z * sum_k xq (int32, exact),
//     y = sum_g float(acc_g) * (a[m] * s[n][g]) accumulated in group order (+ bias[n]).
// The scalar reference and every SIMD path compute these integers exactly and apply the float
// scaling in the same order, so W8A8 / W4A8 outputs are bit-identical across ISAs.
// u8 x s8: vpdpbusd multiplies unsigned by signed bytes. Q4 codes are already unsigned (0..15),
// times the signed activations. For Q8 the AVX-512-VNNI path feeds xq + 128 (XOR 0x80) as the
// unsigned operand and subtracts 128 * (stored row sum) (AVX-VNNI likewise); int32
// wrap-around cancels, so the result is exact whenever the true sum fits, i.e. K <= 131072
// (checked). The AVX2 path uses vpmaddubsw(|q|, sign(xq, q)) + vpmaddwd instead (no saturation:
// |x|,|q| <= 127).
//
// AMX (Sapphire Rapids and later): the "16 x 4" blocks are also the AMX B-tile rows, so 16
// consecutive blocks of a Q8 panel are one 16 x 64-byte TDPBSSD tile (s8 x s8, no bias). Q4
// panels are unpacked per call into signed c - z bytes of the same layout; the per-group integer
// sum xq * (c - z) equals the one above, so AMX results are bit-identical too.
//
// A16 (quantize_activations = false): y = sum_k x[m][k] * w~[n][k] (+ bias), w~ the dequantized
// weight above, float accumulation (order differs between ISAs; results agree to rounding).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "backend/cpu/thread_pool.h"
#include "core/packed_layout.h"

namespace edgevl::cpu {

constexpr int64_t kQuantPanelRows = layout::kPanelRows;
constexpr int64_t kQuantMaxK = layout::kMaxQuantK;  // int32 accumulation limit (see above)

int64_t q8_padded_k(int64_t K);                                    // ceil(K/4)*4
size_t q8_panel_bytes(int64_t K);                                  // 16*Kp + 128
size_t q8_packed_bytes(int64_t N, int64_t K);                      // ceil(N/16) * q8_panel_bytes(K)
void q8_pack(const float* w, int64_t N, int64_t K, uint8_t* out);  // w: [N][K] row-major
void q8_unpack(const uint8_t* packed, int64_t N, int64_t K, float* w);  // -> s[n] * q[n][k]

// group must be 32, 64 or 128.
int64_t q4_padded_k(int64_t K, int group);  // ceil(K/G)*G
size_t q4_panel_bytes(int64_t K, int group, bool zero_point);
size_t q4_packed_bytes(int64_t N, int64_t K, int group, bool zero_point);
void q4_pack(const float* w, int64_t N, int64_t K, int group, bool zero_point, uint8_t* out);
// The stored (f16) scale of one symmetric Q4 group of `len` weights, by the rule above.
uint16_t q4_symmetric_scale(const float* w, int64_t len);
void q4_unpack(const uint8_t* packed, int64_t N, int64_t K, int group, bool zero_point, float* w);

// Dequantizes selected rows, e.g. the token embeddings of a tied Q8 embedding / lm_head:
// out[i][0..K) = w~[rows[i]][0..K) (bit-identical to q*_unpack). Each row index must be in
// [0, N) (checked).
void q8_unpack_rows(const uint8_t* packed, int64_t N, int64_t K, const int32_t* rows,
                    int64_t n_rows, float* out);
void q4_unpack_rows(const uint8_t* packed, int64_t N, int64_t K, int group, bool zero_point,
                    const int32_t* rows, int64_t n_rows, float* out);

// Per-row symmetric int8 quantization of x[M][K] as above: xq rows of stride ldq >= K (columns
// K..ldq-1 are set to 0), scale[M]. Exposed for tests and for callers that reuse it.
void quantize_rows_i8(const float* x, int64_t M, int64_t K, int64_t ldq, int8_t* xq, float* scale);

// y[M][N] = x[M][K] * W^T (+ bias[N] if non-null), W packed as above (64-byte alignment of
// `packed` helps but is not required). quantize_activations: true = W8A8 / W4A8 (int8 dot
// products), false = W8A16 / W4A16 (float FMA on dequantized weights). Work is split over
// the pool by weight panels; each thread streams its panels once.
//
// row_invariant: every output row is bit-identical to the same row computed alone (M = 1), for
// any M: the call takes the kernels an M = 1 call takes (the same table; the A16 path's direct
// kernel, whose per-row sums run in one order at any row count; never the W4A8 prefill route).
// The A8 kernels already apply one integer and float order per row at any register tile. Used
// by batched decode (runtime/execution/engine.h decode_batch), whose rows are different sequences.
//
// rotation (quantize_activations only): the weights are stored rotated (hadamard.h, evb.h
// TensorEntry::rotation) and x is not: each row is rotated by that block on its way into the
// int8 quantization, 8 rows at a time into a cache-resident buffer, with the same result as
// rotating all of x first (hadamard_rows) and no rotated copy of x.
void matmul_q8(ThreadPool& pool, const float* x, int64_t M, int64_t K, const uint8_t* packed,
               int64_t N, const float* bias, float* y, bool quantize_activations,
               bool row_invariant = false, int rotation = 0);
// fast_prefill: W4A8 calls of many rows may take the selected level's prefill route
// (quant_q4_path; on AMX, AVX-512 VNNI and AVX-VNNI the weights requantized per call to
// int8 with a scale per row, within half a Q8 step of each Q4 weight, then the W8A8 kernel:
// ~1.4x faster on AMX, no longer bit-identical to the W4A8 definition above, but the same
// numbers on every level that has the route); false keeps the W4A8 kernels (calibration does,
// so that a compiled binary does not depend on the compiling CPU).
void matmul_q4(ThreadPool& pool, const float* x, int64_t M, int64_t K, const uint8_t* packed,
               int64_t N, int group, bool zero_point, const float* bias, float* y,
               bool quantize_activations, bool fast_prefill = true, bool row_invariant = false,
               int rotation = 0);

// Kernel selection follows the ISA level (kernels.h select_isa / force_isa).
// Name of the selected path: "scalar", "avx2", "avxvnni", "avx512vnni" or "amx+avx512vnni".
const char* quant_kernel_isa();
// The Q4 path of the selected level, e.g. "amx+avx512vnni (W4A8 >= 32 rows: requantized to
// int8)".
std::string quant_q4_path();
// Rows from which the selected level's W4A8 prefill route applies; 0 when it has none.
int64_t quant_q4_prefill_min_rows();

}  // namespace edgevl::cpu
