#include "runtime/execution/causal_attention.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "core/align.h"

namespace edgevl {

namespace {

// A thread's buffer of at least n floats, 64-byte aligned (grows, never shrinks: no allocation
// once the largest chunk ran).
float* thread_buffer(std::vector<float>& buf, size_t n) {
  if (buf.size() < n + 16) buf.resize(n + 16);
  return align64(buf.data());
}

// The AMX-BF16 kernel (cpu::causal_attention_bf16): each KV head's K and V packed once into its
// tile layout, then tasks of KV head x 64 stacked rows (a pair of the 32-row blocks the kernel
// runs in lockstep), handed out largest (latest) first so that the threads finish together.
// Small tasks keep the pool balanced when a thread is descheduled (the host may be shared).
void causal_attention_amx(cpu::ThreadPool& pool, const Op& op, const float* q, int64_t m,
                          const uint8_t* kc, const uint8_t* vc, const KvCaches& kv, int64_t n_kv,
                          const int32_t* positions, float* y) {
  const AttentionAttrs at = op.attention();
  const int nh = at.n_heads, nkv = at.n_kv_heads, hd = at.head_dim, group = nh / nkv;
  const int64_t per = cpu::causal_attention_pack_elems(kv.type, n_kv, hd);
  thread_local std::vector<uint16_t> packed;  // [nkv][K, V][per]
  if (packed.size() < size_t(2 * nkv * per + 32)) packed.resize(size_t(2 * nkv * per + 32));
  uint16_t* kv_tiles = align64(packed.data());
  pool.parallel_for(2 * nkv, [&](int64_t t) {
    const bool is_v = t >= nkv;
    const int h = int(t % nkv);
    cpu::causal_attention_pack(is_v ? vc : kc, kv.type, nkv, hd, kv.capacity, h, n_kv, is_v,
                               kv_tiles + (2 * h + is_v) * per);
  });
  constexpr int64_t rb = 64;
  const int64_t rows = m * group, n_blk = (rows + rb - 1) / rb, ld = int64_t(nh) * hd;
  pool.parallel_for(nkv * n_blk, [&](int64_t t) {
    const int64_t h = t % nkv, r0 = (n_blk - 1 - t / nkv) * rb;
    const uint16_t* kp = kv_tiles + 2 * h * per;
    cpu::causal_attention_bf16(q + h * group * hd, ld, r0, std::min(rows, r0 + rb), group, hd,
                               positions, kp, kp + per, kv.type, n_kv, at.scale, y + h * group * hd,
                               ld);
  });
}

}  // namespace

// The f32 path: per KV head, the group's queries are stacked as rows: S = Q K^T, causal mask +
// softmax, O = P V with V transposed to f32. The work is split into independent tasks, KV head x
// block of queries, each running its matmuls serially on one thread: a task needs no pool
// synchronization (the per-matmul dispatches cost a time slice whenever the other thread is
// descheduled), and a block multiplies only the keys its queries can see (the causal triangle:
// at 4 blocks per chunk the first block of the first chunk reads 1/4 of the keys of the last).
// Dropping keys that get probability 0 leaves every result bit-identical to the full matmuls:
// the f32 kernel's per-output sum is a fixed function of k (the dropped terms added +0), and
// the kept key count is a multiple of 4 (or all keys), so the column grouping of its 4-wide
// horizontal sums is unchanged.
// Step 1 reads each KV head once per chunk: V (and a q8 K) into f32, V transposed to [hd][n_kv]
// (n_kv x head_dim conversions next to rows x n_kv x head_dim multiply-adds); an f32 or f16 K
// slab ([capacity][head_dim] rows) is read by the matmul straight from the cache.
void causal_attention(cpu::ThreadPool& pool, const Op& op, const float* q, int64_t m,
                      const uint8_t* kc, const uint8_t* vc, const KvCaches& kv, int64_t n_kv,
                      const int32_t* positions, float* y) {
  if (cpu::has_causal_attention_bf16(kv.type))
    return causal_attention_amx(pool, op, q, m, kc, vc, kv, n_kv, positions, y);
  const AttentionAttrs at = op.attention();
  const int64_t nh = at.n_heads, nkv = at.n_kv_heads, hd = at.head_dim, group = nh / nkv;
  const bool q8 = kv.type == DType::Q8;
  const size_t slab = size_t(kv.capacity) * size_t(hd) * dtype_size(kv.type);
  // V^T (and a q8 K) of every KV head, shared by the tasks (owned by the dispatching thread).
  thread_local std::vector<float> shared;
  float* vt = thread_buffer(shared, size_t((q8 ? 2 : 1) * nkv * n_kv * hd));
  float* kf = vt + nkv * hd * n_kv;  // q8 only: [nkv][n_kv][hd]
  pool.parallel_for(nkv * (q8 ? 2 : 1), [&](int64_t t) {
    const int64_t h = t % nkv;
    if (t >= nkv) {
      cpu::kv_head_to_f32(kc, kv.type, int(nkv), int(hd), kv.capacity, int(h), n_kv,
                          kf + h * n_kv * hd);
      return;
    }
    thread_local std::vector<float> tmp;
    float* f = thread_buffer(tmp, size_t(n_kv * hd));
    cpu::kv_head_to_f32(vc, kv.type, int(nkv), int(hd), kv.capacity, int(h), n_kv, f);
    float* v = vt + h * hd * n_kv;
    for (int64_t j = 0; j < n_kv; ++j)
      for (int64_t d = 0; d < hd; ++d) v[d * n_kv + j] = f[j * hd + d];
  });
  // ~256 rows per task (32 queries of Qwen2-0.5B's 7-query groups), blocks of equal size
  // handed out largest first so that the threads finish together.
  const int64_t n_blk = (m * group + 255) / 256, qb = (m + n_blk - 1) / n_blk;
  pool.parallel_for(nkv * n_blk, [&](int64_t t) {
    const int64_t h = t % nkv, b = n_blk - 1 - t / nkv;
    const int64_t i0 = b * qb, i1 = std::min(m, i0 + qb), rows = (i1 - i0) * group;
    if (rows <= 0) return;
    int64_t seen = 0;
    for (int64_t i = i0; i < i1; ++i) seen = std::max<int64_t>(seen, positions[i] + 1);
    const int64_t nk = std::min(n_kv, (seen + 3) / 4 * 4);  // keys this block multiplies
    thread_local std::vector<float> buf;
    float* qs = thread_buffer(buf, size_t(2 * rows * hd + rows * nk + hd * nk + 48));
    float* os = align64(qs + rows * hd);  // [rows][hd]
    float* sc = align64(os + rows * hd);  // [rows][nk]
    float* vb = align64(sc + rows * nk);  // [hd][nk]
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t g = 0; g < group; ++g)
        std::copy_n(q + i * nh * hd + (h * group + g) * hd, hd, qs + ((i - i0) * group + g) * hd);
    if (q8)
      cpu::matmul(pool, qs, rows, hd, kf + h * n_kv * hd, DType::F32, nk, nullptr, sc);
    else
      cpu::matmul(pool, qs, rows, hd, kc + size_t(h) * slab, kv.type, nk, nullptr, sc);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t visible = std::min<int64_t>(positions[i] + 1, n_kv);
      for (int64_t g = 0; g < group; ++g) {
        float* row = sc + ((i - i0) * group + g) * nk;
        cpu::softmax_rows(row, 1, visible, at.scale);
        std::fill(row + visible, row + nk, 0.f);
      }
    }
    for (int64_t d = 0; d < hd; ++d) std::copy_n(vt + (h * hd + d) * n_kv, nk, vb + d * nk);
    cpu::matmul(pool, sc, rows, nk, vb, DType::F32, hd, nullptr, os);
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t g = 0; g < group; ++g)
        std::copy_n(os + ((i - i0) * group + g) * hd, hd, y + i * nh * hd + (h * group + g) * hd);
  });
}

}  // namespace edgevl
