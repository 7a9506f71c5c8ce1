// AMX-BF16 prefill attention: causal, grouped-query, over one KV head of an f32 or f16 cache.
// Compiled with the AMX flag set; dispatch.cpp calls it only on CPUs with AMX-BF16.
//
// Numerics (kernels.h causal_attention_bf16): every operand is split into bf16 parts, x = x0 +
// x1 (+ x2) with x0 = bf16(x), x1 = bf16(x - x0), ..., and a product is the sum of the part
// products (i, j) with i + j <= its order, each a TDPBF16PS into the same f32 accumulators:
//   S = Q K^T: q in 3 parts, k exactly in 2 (f16) or in 3 (f32), order 2 (5 or 6 products;
//              what is dropped is below 2^-24 |q| |k|: f32-class scores);
//   O = P V:   p and v in 2 parts (f16 cache; order 1, 3 products: p keeps 16 bits, 2^-17
//              relative) or in 3 (f32 cache; order 2, 6 products: f32-class, what an f32 model
//              asks for: its golden logits moved 6-8e-6 of their range with 2, 2.3-2.7e-6 with
//              3, 1.3-1.8e-6 on the f32 path).
// Why that much: the scores are large (|q| up to ~40 in stories260k), so their error, ~2^-17 of
// sum |q_d k_d| with q in 2 parts (the first version), moved the output by up to 3e-4 relative
// and logits of an f32 model by 6e-4, and flipped the top-1 of near-ties in the w8a8 tests; one
// bf16 product moved logits by 0.23.
//
// Layout of the work: the group's queries are stacked as rows (query-major, like the f32 path
// in runtime/execution/causal_attention.cpp) in blocks of 32. For each block the keys are visited
// in steps of kKeyBlock with an online softmax: S for the step (32 x 128 floats) goes to L1, each
// row's running max and sum are updated, the output rows already accumulated are rescaled by
// exp(old max - new max), and P (split into bf16 tiles) is multiplied into the output at once.
// No score row longer than one step exists; keys past the block's last visible key are never
// touched, and in the step that holds a row's last visible key the rest get p = 0 (the -inf
// mask).
//
// Overlap: the tile products (TMUL) and the softmax (AVX-512) are separate units, so two row
// blocks run in lockstep: while the tiles compute one block's P V and next S, the vector units
// run the other block's softmax, one row every few tile products (Ticker) so that the
// out-of-order core sees both kinds of work at once. Measured on a 128-query chunk at 384 keys
// (Qwen2-0.5B shape, one thread): 1.05 ms with the two run one after the other, 0.88 ms in
// lockstep; the tile work alone takes 0.45 ms (8 ns per TDPBF16PS against 5.5 ns in a loop
// that never stores its accumulators: each 32 x 32 score tile is only 2 x 5 products deep
// before it goes to memory) and the softmax alone 0.27 ms.
//
// K and V are packed once per chunk (amx_causal_pack) into VNNI-2 B tiles, part by part:
//   K: [key block of 16][part][kk][pair r][key c][2] = K[16 jb + c][32 kk + 2 r + t]
//   V: [dim tile dt][part][ks][pair r][dim c][2]     = V[32 ks + 2 r + t][16 dt + c]
// zero past n_kv keys and past head_dim (head_dim padded to a multiple of 32: zero dims add
// nothing to q.k and O columns past head_dim are not stored).
//
// Tiles (all 16 rows x 64 bytes): tmm0..3 a 2 x 2 grid of f32 accumulators (rows 0-15/16-31 x
// two 16-column tiles), tmm4/5 the two A tiles, tmm6/7 the two B tiles.
#if defined(__x86_64__)
#include "backend/cpu/x86/intrin_x86.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu/x86/amx/amx_tile.h"
#include "backend/cpu/x86/avx512/attention_bf16.h"
#include "backend/cpu/x86/avx512/bf16_avx512.h"
#include "core/align.h"

namespace edgevl::cpu {
namespace {

constexpr int64_t kTile = 512;      // bf16 elements of one 16 x 32 tile (1 KB)
constexpr int64_t kKeyBlock = 128;  // keys per online-softmax step
constexpr int64_t kSteps = kKeyBlock / 32;
constexpr int kQParts = 3, kScoreOrder = 2, kMaxParts = 3;

int64_t round32(int64_t x) {
  return (x + 31) / 32 * 32;
}

template <class T>
T* aligned(std::vector<T>& v, size_t n) {
  if (v.size() < n + 64 / sizeof(T)) v.resize(n + 64 / sizeof(T));
  return align64(v.data());
}

// Elements [d, d + 16) of row `row` of n rows of head_dim f32 or f16 values, as f32; zero past
// head_dim and for rows >= n.
__m512 load16(const void* rows, DType t, int64_t n, int64_t hd, int64_t row, int64_t d) {
  if (row >= n || d >= hd) return _mm512_setzero_ps();
  const __mmask16 m = tail_mask(hd - d);
  if (t == DType::F16)
    return _mm512_cvtph_ps(
        _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(rows) + row * hd + d));
  return _mm512_maskz_loadu_ps(m, static_cast<const float*>(rows) + row * hd + d);
}

// One operand of gemm_parts: its two 16-row (A) or 16-column (B) halves at t0 / t1 (part 0),
// part k at + k * part; each advances one tile per k step.
struct Operand {
  const uint16_t *t0, *t1;
  int64_t part;
};

// The part products a gemm sums: (a, b) with a + b <= order, B-part-major and snaking over A
// ((0,0) (1,0) (2,0) (1,1) (0,1) ...): B (K or V) streams from L2 while A (Q or P) stays in L1,
// so B is reloaded once per part and only A in between.
struct Products {
  int n = 0;
  int8_t a[9], b[9];
  Products(int a_parts, int b_parts, int order) {
    for (int j = 0; j < b_parts; ++j)
      for (int k = 0; k < a_parts; ++k) {
        const int i = j % 2 ? a_parts - 1 - k : k;
        if (i + j <= order) a[n] = int8_t(i), b[n] = int8_t(j), ++n;
      }
  }
};

struct Block;
class Kernel;

// Vector work placed between tile products: the softmax rows of one block's step, one row
// every `every` ticks (tile products) of the phase, the rest at its end. A fixed period keeps
// the branch predictable.
struct Ticker {
  const Kernel* k = nullptr;
  Block* b = nullptr;  // null: no vector work this phase
  int64_t t = 0;
  int every = 1, count = 0, next = 0;
  inline void tick();
  inline void drain();
};

// C (32 x 32 floats at c, row stride ldc) = (C if accumulate, else 0) + the sum over ksteps and
// over the products of A part a times B part b; w.tick() after each product.
void gemm_parts(const Operand& A, const Operand& B, const Products& pr, int64_t ksteps, float* c,
                int64_t ldc, bool accumulate, Ticker& w) {
  const int64_t ld = ldc * 4;
  if (accumulate) {
    EVL_TILE_LOAD(0, c, ld);
    EVL_TILE_LOAD(1, c + 16, ld);
    EVL_TILE_LOAD(2, c + 16 * ldc, ld);
    EVL_TILE_LOAD(3, c + 16 * ldc + 16, ld);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t k = 0; k < ksteps; ++k) {
    const int64_t t = k * kTile;
    for (int p = 0; p < pr.n; ++p) {
      const int64_t ao = pr.a[p] * A.part + t, bo = pr.b[p] * B.part + t;
      // Reload only the operand that changed (the first product loads both).
      const bool new_a = p == 0 || pr.a[p] != pr.a[p - 1];
      const bool new_b = p == 0 || pr.b[p] != pr.b[p - 1];
      if (new_a) EVL_TILE_LOAD(4, A.t0 + ao, 64);
      if (new_b) EVL_TILE_LOAD(6, B.t0 + bo, 64);
      _tile_dpbf16ps(0, 4, 6);
      if (new_b) EVL_TILE_LOAD(7, B.t1 + bo, 64);
      _tile_dpbf16ps(1, 4, 7);
      if (new_a) EVL_TILE_LOAD(5, A.t1 + ao, 64);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
      w.tick();
    }
  }
  EVL_TILE_STORE(0, c, ld);
  EVL_TILE_STORE(1, c + 16, ld);
  EVL_TILE_STORE(2, c + 16 * ldc, ld);
  EVL_TILE_STORE(3, c + 16 * ldc + 16, ld);
}

// One block of 32 stacked query rows and its online-softmax state (buffers per thread).
struct Block {
  std::vector<uint16_t> qa_buf, pa_buf;
  std::vector<float> s_buf, o_buf;
  uint16_t* qa = nullptr;  // [part][half][kk][16 rows][32]
  uint16_t* pa = nullptr;  // [part][half][ks][16 rows][32] P of the current step
  float* s = nullptr;      // [32 rows][kKeyBlock] scores of the current step
  float* o = nullptr;      // [32 rows][hdp] output so far, relative to the running max
  int64_t r0 = 0, nr = 0, nk = 0, n_steps = 0;
  int64_t vis[32];  // keys each row sees (0 for padding rows); nk = their maximum
  float mx[32], sum[32];
};

class Kernel {
 public:
  explicit Kernel(const CausalAttnArgs& a)
      : a_(a),
        hd_(a.head_dim),
        hdp_(round32(hd_)),
        nkk_(hdp_ / 32),
        nks_(round32(a.n_kv) / 32),
        kv_parts_(amx_causal_parts(a.kv_type)),
        s_prod_(kQParts, kv_parts_, kScoreOrder),
        o_prod_(kv_parts_, kv_parts_, kv_parts_ - 1),
        scale2_(a.scale * 1.44269504089f) {}  // exp(scale x) = 2^(scale2 x)

  void attach(Block& b) const {
    b.qa = aligned(b.qa_buf, size_t(kQParts * 32 * hdp_));
    b.pa = aligned(b.pa_buf, size_t(kMaxParts * 2 * kSteps * kTile));
    b.s = aligned(b.s_buf, size_t(32 * kKeyBlock));
    b.o = aligned(b.o_buf, size_t(32 * hdp_));
  }

  // Rows r0.. (at most 32, below end) of the stacked queries: visibility, Q split into tiles,
  // zero state.
  void setup(Block& b, int64_t r0, int64_t end) const {
    b.r0 = r0;
    b.nr = std::min<int64_t>(32, end - r0);
    b.nk = 0;
    for (int64_t r = 0; r < 32; ++r) {
      b.vis[r] =
          r < b.nr ? std::clamp<int64_t>(a_.positions[(r0 + r) / a_.group] + 1, 0, a_.n_kv) : 0;
      b.nk = std::max(b.nk, b.vis[r]);
      b.mx[r] = -INFINITY;
      b.sum[r] = 0.f;
    }
    b.n_steps = (b.nk + kKeyBlock - 1) / kKeyBlock;
    __m512i x[kQParts];
    for (int64_t r = 0; r < 32; ++r)
      for (int64_t kk = 0; kk < nkk_; ++kk) {
        for (auto& v : x) v = _mm512_setzero_si512();
        if (r < b.nr) {
          const float* q = row(a_.q, a_.ldq, b.r0 + r);
          split_bf16x32(load16(q, DType::F32, 1, hd_, 0, 32 * kk),
                        load16(q, DType::F32, 1, hd_, 0, 32 * kk + 16), kQParts, x);
        }
        uint16_t* dst = b.qa + ((r / 16) * nkk_ + kk) * kTile + (r % 16) * 32;
        for (int k = 0; k < kQParts; ++k) _mm512_store_si512(dst + k * 2 * nkk_ * kTile, x[k]);
      }
    std::fill_n(b.o, 32 * hdp_, 0.f);
  }

  // 32-key tile steps of step t (0 past the block's last step).
  int64_t substeps(const Block& b, int64_t t) const {
    return t < b.n_steps ? std::min(kSteps, (b.nk - t * kKeyBlock + 31) / 32) : 0;
  }
  // Tile products (ticks) of scores(b, t) and pv(b, t).
  int64_t score_ticks(const Block& b, int64_t t) const { return substeps(b, t) * nkk_ * s_prod_.n; }
  int64_t pv_ticks(const Block& b, int64_t t) const {
    return substeps(b, t) * (hdp_ / 32) * o_prod_.n;
  }

  // S of step t (no-op past the last step).
  void scores(Block& b, int64_t t, Ticker& w) const {
    const Operand q{b.qa, b.qa + nkk_ * kTile, 2 * nkk_ * kTile};
    for (int64_t st = 0; st < substeps(b, t); ++st) {
      const uint16_t* kb = a_.kp + (t * kKeyBlock / 16 + 2 * st) * kv_parts_ * nkk_ * kTile;
      gemm_parts(q, Operand{kb, kb + kv_parts_ * nkk_ * kTile, nkk_ * kTile}, s_prod_, nkk_,
                 b.s + 32 * st, kKeyBlock, false, w);
    }
  }

  // O += P V for step t, 32 output dims at a time (no-op past the last step).
  void pv(Block& b, int64_t t, Ticker& w) const {
    const int64_t steps = substeps(b, t);
    if (steps == 0) return;
    const Operand p{b.pa, b.pa + kSteps * kTile, 2 * kSteps * kTile};
    for (int64_t dt = 0; dt < hdp_ / 16; dt += 2) {
      const uint16_t* vb = a_.vp + (dt * kv_parts_ * nks_ + t * kSteps) * kTile;
      gemm_parts(p, Operand{vb, vb + kv_parts_ * nks_ * kTile, nks_ * kTile}, o_prod_, steps,
                 b.o + 16 * dt, hdp_, true, w);
    }
  }

  // Online softmax of row r over step t's scores: running max and sum, rescaled output row,
  // P row (split into its bf16 tiles).
  void softmax_row(Block& b, int64_t t, int64_t r) const {
    const int64_t steps = substeps(b, t), j0 = t * kKeyBlock;
    uint16_t* p = b.pa + (r / 16) * kSteps * kTile + (r % 16) * 32;
    const int64_t part = 2 * kSteps * kTile;
    const int64_t n = std::min(b.vis[r] - j0, 32 * steps);  // this row's keys in the step
    if (n <= 0) {  // sees none: p = 0, running max and sum unchanged
      for (int64_t st = 0; st < steps; ++st)
        for (int k = 0; k < kv_parts_; ++k)
          _mm512_store_si512(p + k * part + st * kTile, _mm512_setzero_si512());
      return;
    }
    const float* srow = b.s + r * kKeyBlock;
    __m512 m16 = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j += 16)
      m16 = _mm512_mask_max_ps(m16, tail_mask(n - j), m16, _mm512_load_ps(srow + j));
    const float m_new = std::max(b.mx[r], _mm512_reduce_max_ps(m16));
    if (m_new > b.mx[r] && b.mx[r] != -INFINITY) {  // rescale what earlier steps accumulated
      const float alpha = std::exp2((b.mx[r] - m_new) * scale2_);
      b.sum[r] *= alpha;
      const __m512 al = _mm512_set1_ps(alpha);
      float* o = b.o + r * hdp_;
      for (int64_t d = 0; d < hdp_; d += 16)
        _mm512_store_ps(o + d, _mm512_mul_ps(_mm512_load_ps(o + d), al));
    }
    b.mx[r] = m_new;
    const __m512 scale = _mm512_set1_ps(scale2_), shift = _mm512_set1_ps(-m_new * scale2_);
    __m512 acc = _mm512_setzero_ps();
    __m512i x[kMaxParts];
    for (int64_t st = 0; st < steps; ++st) {
      const int64_t j = 32 * st;
      // Keys past the row's last visible one (and the padding past n_kv) get p = 0.
      const __m512 e0 = _mm512_maskz_mov_ps(
          tail_mask(n - j),
          exp2_nonpositive(_mm512_fmadd_ps(_mm512_load_ps(srow + j), scale, shift)));
      const __m512 e1 = _mm512_maskz_mov_ps(
          tail_mask(n - j - 16),
          exp2_nonpositive(_mm512_fmadd_ps(_mm512_load_ps(srow + j + 16), scale, shift)));
      acc = _mm512_add_ps(acc, _mm512_add_ps(e0, e1));
      split_bf16x32(e0, e1, kv_parts_, x);
      for (int k = 0; k < kv_parts_; ++k) _mm512_store_si512(p + k * part + st * kTile, x[k]);
    }
    b.sum[r] += _mm512_reduce_add_ps(acc);
  }

  // Normalized output rows of the block (a row that sees no key, position < 0, gets zeros).
  void finish(const Block& b) const {
    for (int64_t r = 0; r < b.nr; ++r) {
      const __m512 inv = _mm512_set1_ps(b.sum[r] > 0.f ? 1.f / b.sum[r] : 0.f);
      float* dst = row(a_.out, a_.ldo, b.r0 + r);
      for (int64_t d = 0; d < hd_; d += 16)
        _mm512_mask_storeu_ps(dst + d, tail_mask(hd_ - d),
                              _mm512_mul_ps(_mm512_load_ps(b.o + r * hdp_ + d), inv));
    }
  }

  // Two blocks in lockstep (y may be empty: nr = 0). Each phase runs one block's tile work
  // (P V of its step t, then S of step t + 1) with the other block's softmax of the step whose
  // scores the previous phase computed.
  void run_pair(Block& x, Block& y) const {
    Ticker none;
    scores(x, 0, none);
    phase(y, -1, x, 0);  // S of y's step 0, softmax of x's step 0
    const int64_t steps = std::max(x.n_steps, y.n_steps);
    for (int64_t t = 0; t < steps; ++t) {
      phase(x, t, y, t);
      phase(y, t, x, t + 1);
    }
    finish(x);
    if (y.nr > 0) finish(y);
  }

  // Tile work of block a (P V of step t unless t < 0, then S of step t + 1) with the softmax of
  // block b's step tb between its products.
  void phase(Block& a, int64_t t, Block& b, int64_t tb) const {
    Ticker w;
    if (substeps(b, tb) > 0) w = Ticker{this, &b, tb};
    const int64_t ticks = (t >= 0 ? pv_ticks(a, t) : 0) + score_ticks(a, t + 1);
    w.every = int(std::max<int64_t>(1, ticks / 32));
    if (t >= 0) pv(a, t, w);
    scores(a, t + 1, w);
    w.drain();
  }

 private:
  float* row(float* base, int64_t ld, int64_t r) const {
    return base + r / a_.group * ld + r % a_.group * hd_;
  }
  const float* row(const float* base, int64_t ld, int64_t r) const {
    return base + r / a_.group * ld + r % a_.group * hd_;
  }

  const CausalAttnArgs& a_;
  const int64_t hd_, hdp_, nkk_, nks_;
  const int kv_parts_;
  const Products s_prod_, o_prod_;
  const float scale2_;
};

void Ticker::tick() {
  if (!b || ++count < every || next == 32) return;
  count = 0;
  k->softmax_row(*b, t, next++);
}

void Ticker::drain() {
  if (!b) return;
  while (next < 32) k->softmax_row(*b, t, next++);
}

}  // namespace

int amx_causal_parts(DType t) {
  return t == DType::F16 ? 2 : 3;
}

void amx_causal_pack(const void* rows, DType t, int64_t n_kv, int head_dim, bool is_v,
                     uint16_t* dst) {
  const int64_t hd = head_dim, hdp = round32(hd), np = round32(n_kv);
  const int parts = amx_causal_parts(t);
  __m512i x[3];
  if (!is_v) {
    // For each 16 keys x 32 dims: the keys' bf16 pairs as dword rows, transposed so that tile
    // row r holds pair r of every key.
    const int64_t nkk = hdp / 32;
    for (int64_t jb = 0; jb < np / 16; ++jb)
      for (int64_t kk = 0; kk < nkk; ++kk) {
        __m512i r[3][16];
        for (int c = 0; c < 16; ++c) {
          split_bf16x32(load16(rows, t, n_kv, hd, 16 * jb + c, 32 * kk),
                        load16(rows, t, n_kv, hd, 16 * jb + c, 32 * kk + 16), parts, x);
          for (int k = 0; k < parts; ++k) r[k][c] = x[k];
        }
        for (int k = 0; k < parts; ++k) {
          transpose16(r[k]);
          uint16_t* h = dst + ((jb * parts + k) * nkk + kk) * kTile;
          for (int i = 0; i < 16; ++i) _mm512_store_si512(h + 32 * i, r[k][i]);
        }
      }
    return;
  }
  // V: tile row r of (dt, ks) interleaves keys 32 ks + 2r (low half) and + 2r + 1 (high).
  const int64_t nks = np / 32, ndt = hdp / 16;
  const __m512i interleave =
      _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t key = 0; key < np; key += 2)
    for (int64_t dt = 0; dt < ndt; ++dt) {
      split_bf16x32(load16(rows, t, n_kv, hd, key, 16 * dt),
                    load16(rows, t, n_kv, hd, key + 1, 16 * dt), parts, x);
      for (int k = 0; k < parts; ++k)
        _mm512_store_si512(dst + ((dt * parts + k) * nks + key / 32) * kTile + (key % 32) / 2 * 32,
                           _mm512_permutexvar_epi16(interleave, x[k]));
    }
}

void amx_causal_attention_bf16(const CausalAttnArgs& a) {
  const Kernel k(a);
  thread_local Block x, y;
  k.attach(x);
  k.attach(y);
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  load_tile_config(cfg);
  for (int64_t r0 = a.row0; r0 < a.row1; r0 += 64) {
    k.setup(x, r0, a.row1);
    if (r0 + 32 < a.row1)
      k.setup(y, r0 + 32, a.row1);
    else
      y.nr = 0, y.n_steps = 0;
    k.run_pair(x, y);
  }
  _tile_release();
}

}  // namespace edgevl::cpu

#endif  // __x86_64__
