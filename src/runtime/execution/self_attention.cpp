#include "runtime/execution/self_attention.h"

#include <algorithm>
#include <vector>

#include "backend/cpu/bf16_panels.h"
#include "backend/cpu/kernels.h"
#include "core/align.h"
#include "core/dtype.h"
#include "core/error.h"

namespace edgevl {

namespace {

// bf16 towers without the fused kernel: per head S = Q K^T, softmax, O = P V as matmuls on bf16
// K and V^T (f32 Q and P). One head per task, each thread on its own buffers: the kernels called
// inside run serially on that thread, so a head needs no pool synchronization (thousands per
// tile otherwise, each costing a time slice when the other thread is descheduled). K and V^T are
// gathered straight into bf16 in the bf16p panel layout (bf16_panels.h), which the SIMD levels'
// matmul_bf16_panels reads in place with the activations in registers as broadcasts (the rows
// form converted K again for every 96 queries and ran 64-long dot products, a horizontal sum
// each). Keys are padded to a multiple of 16 (zero K rows and V^T columns: their scores are 0
// and skipped by the softmax, their products with V are 0) so that score rows start on cache
// lines. Queries go in blocks of rows so that a block's scores stay in L2 from S = Q K^T
// through the softmax to O = P V.
void bf16_matmuls(cpu::ThreadPool& pool, const Op& op, const SelfAttentionIo& io) {
  const AttentionAttrs at = op.attention();
  const int64_t hd = at.head_dim, nh = at.n_heads, group = at.n_heads / at.n_kv_heads, m = io.m,
                qc = io.qc, kc = io.kc;
  const int64_t ldp = (m + 15) / 16 * 16;
  const int64_t n_blk = (m + 255) / 256, blk = (m + n_blk - 1) / n_blk;
  // K: [ldp keys][hd] panels; V^T: [hd][ldp keys] panels (element counts, 64-byte multiples).
  const size_t k_elems = cpu::bf16_panel_bytes(ldp, hd) / 2,
               v_elems = cpu::bf16_panel_bytes(hd, ldp) / 2;
  const int64_t kp_k = cpu::bf16_panel_k(hd), kp_v = cpu::bf16_panel_k(ldp);
  pool.parallel_for(nh, [&](int64_t h) {
    thread_local std::vector<float> buf;
    buf.resize((k_elems + v_elems) / 2 + size_t(2 * blk * hd + blk * ldp + 16));
    auto* kb = reinterpret_cast<uint16_t*>(align64(buf.data()));
    uint16_t* vb = kb + k_elems;
    float* qb = reinterpret_cast<float*>(vb + v_elems);
    float* ob = qb + blk * hd;
    float* sb = ob + blk * hd;  // [blk][ldp]
    const float* k0 = io.k + (h / group) * hd;
    const float* v0 = io.v + (h / group) * hd;
    // In 32-bit words, a panel row holds 16 columns' bf16 pairs (bf16_panels.h): K's word
    // (key r, d pair j) and V^T's word (column d, key pair r / 2) are each written with plain
    // strides here, not through bf16_panel_index per element (a fifth of this attention's time
    // on the f32-FMA levels went to this gather).
    auto* kw = reinterpret_cast<uint32_t*>(kb);
    auto* vw = reinterpret_cast<uint32_t*>(vb);
    const auto pair = [](float lo, float hi) {
      return uint32_t(f32_to_bf16(lo)) | uint32_t(f32_to_bf16(hi)) << 16;
    };
    // The rows are kc floats apart (a page or more): no hardware prefetch follows them, so
    // fetch 8 rows ahead (the loads were 2/3 of this loop's time).
    for (int64_t r = 0; r < m; r += 2) {
      for (int64_t rr = r + 8; rr < std::min(m, r + 10); ++rr)
        for (int64_t d = 0; d < hd; d += 16) {
          __builtin_prefetch(k0 + rr * kc + d);
          __builtin_prefetch(v0 + rr * kc + d);
        }
      for (int64_t x = r; x < std::min(m, r + 2); ++x) {
        const float* kr = k0 + x * kc;
        uint32_t* kd = kw + (x / 16) * 8 * kp_k + x % 16;
        for (int64_t j = 0; j < hd / 2; ++j) kd[j * 16] = pair(kr[2 * j], kr[2 * j + 1]);
        if (hd % 2) kd[(hd / 2) * 16] = f32_to_bf16(kr[hd - 1]);
      }
      const float* va = v0 + r * kc;
      const float* vz = r + 1 < m ? va + kc : nullptr;  // an odd last key pairs with zeros
      uint32_t* vd = vw + (r / 2) * 16;
      for (int64_t d = 0; d < hd; ++d)
        vd[(d / 16) * 8 * kp_v + d % 16] = pair(va[d], vz ? vz[d] : 0.f);
    }
    // Padding: the K rows past m and the k columns past hd; the V^T columns past m and the rows
    // past hd (panels of 16).
    for (int64_t r = m; r < ldp; ++r)
      for (int64_t d = 0; d < kp_k; ++d) kb[cpu::bf16_panel_index(r, d, kp_k)] = 0;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t d = hd + hd % 2; d < kp_k; ++d) kb[cpu::bf16_panel_index(r, d, kp_k)] = 0;
    for (int64_t d = 0; d < (hd + 15) / 16 * 16; ++d)
      for (int64_t r = d < hd ? (m + 1) / 2 * 2 : 0; r < kp_v; ++r)
        vb[cpu::bf16_panel_index(d, r, kp_v)] = 0;
    for (int64_t r0 = 0; r0 < m; r0 += blk) {
      const int64_t rows = std::min(blk, m - r0);
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(io.q + (r0 + r) * qc + h * hd, hd, qb + r * hd);
      cpu::matmul_bf16_panels(pool, qb, rows, hd, kb, ldp, nullptr, sb);
      for (int64_t r = 0; r < rows; ++r) cpu::softmax_rows(sb + r * ldp, 1, m, at.scale);
      cpu::matmul_bf16_panels(pool, sb, rows, ldp, vb, hd, nullptr, ob);
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(ob + r * hd, hd, io.y + (r0 + r) * qc + h * hd);
    }
  });
}

// f32 (f32 towers, and f16 towers where there is no split kernel): as bf16_matmuls, with K and
// V^T copied as f32 rows for matmul() instead. One head per task on the thread's own buffers and
// query blocks whose scores stay in L2: heads in turn, each product split over the pool with
// all m x m scores at once, ran at 0.7 of the bf16 form's rate on the AVX2 level.
void f32_matmuls(cpu::ThreadPool& pool, const Op& op, const SelfAttentionIo& io) {
  const AttentionAttrs at = op.attention();
  const int64_t hd = at.head_dim, nh = at.n_heads, group = at.n_heads / at.n_kv_heads, m = io.m,
                qc = io.qc, kc = io.kc;
  const int64_t n_blk = (m + 255) / 256, blk = (m + n_blk - 1) / n_blk;
  pool.parallel_for(nh, [&](int64_t h) {
    thread_local std::vector<float> buf;
    buf.resize(size_t(2 * m * hd + 2 * blk * hd + blk * m));
    float* kh = buf.data();   // [m][hd]
    float* vt = kh + m * hd;  // V^T of the head: [hd][m]
    float* qb = vt + m * hd;
    float* ob = qb + blk * hd;
    float* sb = ob + blk * hd;  // [blk][m]
    const int64_t kvh = h / group;
    for (int64_t r = 0; r < m; ++r) {
      std::copy_n(io.k + r * kc + kvh * hd, hd, kh + r * hd);
      const float* vr = io.v + r * kc + kvh * hd;
      for (int64_t d = 0; d < hd; ++d) vt[d * m + r] = vr[d];
    }
    for (int64_t r0 = 0; r0 < m; r0 += blk) {
      const int64_t rows = std::min(blk, m - r0);
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(io.q + (r0 + r) * qc + h * hd, hd, qb + r * hd);
      cpu::matmul(pool, qb, rows, hd, kh, DType::F32, m, nullptr, sb);
      cpu::softmax_rows(sb, rows, m, at.scale);
      cpu::matmul(pool, sb, rows, m, vt, DType::F32, hd, nullptr, ob);
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(ob + r * hd, hd, io.y + (r0 + r) * qc + h * hd);
    }
  });
}

}  // namespace

void run_self_attention(cpu::ThreadPool& pool, const Op& op, const SelfAttentionIo& io) {
  const AttentionAttrs at = op.attention();
  const AttentionPrecision precision = at.precision;
  const int64_t hd = at.head_dim, nh = at.n_heads, group = at.n_heads / at.n_kv_heads;
  const bool bf16 = precision == AttentionPrecision::kBf16;
  const bool split = precision == AttentionPrecision::kNearF32 && !io.y_blocks;
  if ((bf16 && cpu::has_self_attention_bf16(int(hd))) ||
      (split && cpu::has_self_attention_split(int(hd)))) {
    // The fused kernel (its bf16 or its split form): one head per task, each on its own
    // thread's buffers.
    pool.parallel_for(nh, [&](int64_t h) {
      const float *q = io.q + h * hd, *k = io.k + (h / group) * hd, *v = io.v + (h / group) * hd;
      if (split)
        cpu::self_attention_head_split(q, io.qc, k, v, io.kc, io.m, int(hd), at.scale,
                                       io.y + h * hd, io.qc);
      else
        cpu::self_attention_head_bf16(q, io.qc, k, v, io.kc, io.m, int(hd), at.scale, io.y + h * hd,
                                      io.qc, io.y_blocks, io.qc, h * hd);
    });
    return;
  }
  check(io.y_blocks == nullptr, "internal: block output needs the fused attention kernel");
  if (bf16) return bf16_matmuls(pool, op, io);
  f32_matmuls(pool, op, io);
}

}  // namespace edgevl
