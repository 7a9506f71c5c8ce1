#include "runtime/executor.h"

#include <algorithm>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/error.h"
#include "runtime/causal_attention.h"
#include "runtime/linear.h"

namespace edgevl {

namespace {

// Row-wise ops over the pool when there is enough work to pay for the dispatch (prefill and
// vision); decode-sized rows run on the calling thread. fn(r0, r1) handles rows [r0, r1).
template <class F>
void split_rows(cpu::ThreadPool& pool, int64_t rows, int64_t cols, F&& fn) {
  constexpr int64_t kMinElems = 1 << 16;
  const int64_t tasks = std::min<int64_t>(rows, std::max<int64_t>(1, rows * cols / kMinElems)) > 1
                            ? pool.size() * 4
                            : 1;
  if (tasks == 1) return fn(0, rows);
  const int64_t step = (rows + tasks - 1) / tasks;
  pool.parallel_for(tasks, [&](int64_t t) {
    const int64_t r0 = t * step, r1 = std::min(rows, r0 + step);
    if (r0 < r1) fn(r0, r1);
  });
}

float* align64(float* p) {
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63));
}

}  // namespace

size_t GraphRunner::scratch_floats(int64_t kv_capacity) const {
  size_t need = scratch_floats_;
  for (const Op& op : g_->ops)
    if (op.type == OpType::Attention && g_->width > 1) {
      const int64_t rows = int64_t(g_->width) * (op.i0 / op.i1), hd = op.i2;
      // qs, os: [rows][hd]; vt, kf: [hd][capacity]; scores: [rows][capacity].
      need = std::max(need, size_t(2 * rows * hd + 2 * hd * kv_capacity + rows * kv_capacity));
    }
  return need;
}

GraphRunner::GraphRunner(const Model& m, const Graph& g, uint8_t* arena) : g_(&g) {
  for (const Value& v : g.values) {
    if (v.kind == ValueKind::Weight) {
      ptr_.push_back(const_cast<void*>(m.weight_data(v.weight)));
      type_.push_back(m.weight(v.weight).dtype);
      entry_.push_back(&m.weight(v.weight));
    } else {
      ptr_.push_back(arena + v.offset);
      type_.push_back(v.dtype);
      entry_.push_back(nullptr);
    }
  }
  // A graph whose projections are all stored in bf16 (the vision tower under the integer
  // presets) has opted into bf16 precision: its attention matmuls round K and V to bf16 too,
  // which lets them run on the same bf16 kernels (AMX where present).
  bool any_matmul = false, all_bf16 = true;
  for (const Op& op : g.ops)
    if (op.type == OpType::MatMul) {
      any_matmul = true;
      all_bf16 &= type_[op.inputs[1]] == DType::BF16;
    }
  bf16_attention_ = any_matmul && all_bf16;
  for (const Op& op : g.ops) {
    // Everything but a matmul's weight is read as float by the kernels.
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const bool float_only = !(op.type == OpType::MatMul && i == 1);
      check(!float_only || type_[op.inputs[i]] == DType::F32,
            "{}: graph '{}': op {} reads '{}' as float but it is stored as {}", m.file().path(),
            g.name, op_name(op.type), g.values[op.inputs[i]].name, dtype_name(type_[op.inputs[i]]));
    }
    if (op.type == OpType::MatMul) {
      // Checked once here, not per execution: the weight is [out, in] of the op's values.
      const TensorEntry* w = entry_[size_t(op.inputs[1])];
      check(w && w->shape.size() == 2 && w->shape[1] == g.values[op.inputs[0]].shape.back() &&
                w->shape[0] == g.values[op.output].shape.back(),
            "{}: graph '{}': matmul '{}' does not match its weight's shape", m.file().path(),
            g.name, g.values[op.output].name);
    }
    if (op.type == OpType::SelfAttention) {
      // Per head: q, k, v^T, out ([rows][head_dim] each) and the [rows][rows] scores.
      const int64_t rows = g.values[op.output].shape[0];
      // (bf16 attention uses per-thread buffers instead.)
      scratch_floats_ = std::max(scratch_floats_, size_t(4 * rows * op.i2 + rows * rows));
    }
  }
}

void GraphRunner::run(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions,
                      const KvCaches* kv, float* scratch, const DumpFn& dump) const {
  const Graph& g = *g_;
  auto f = [&](int32_t id) { return static_cast<float*>(ptr_[size_t(id)]); };
  auto cols = [&](int32_t id) { return g.values[id].shape.back(); };
  // Values as tall as the graph width follow the valid row count (the masked last chunk);
  // others (e.g. the 256 rows after the vision pixel shuffle) always run whole.
  auto rows_of = [&](int32_t id) {
    const int64_t r = g.values[id].shape[0];
    return r == g.width ? int64_t(rows) : r;
  };
  for (const Op& op : g.ops) {
    const auto& in = op.inputs;
    float* y = f(op.output);
    const int64_t m = rows_of(op.output);
    const int64_t n = m * cols(op.output);
    switch (op.type) {
      case OpType::RmsNorm: {
        const int64_t c = cols(in[0]);
        split_rows(pool, m, c, [&](int64_t r0, int64_t r1) {
          cpu::rmsnorm(f(in[0]) + r0 * c, f(in[1]), op.f0, r1 - r0, c, y + r0 * c);
        });
        break;
      }
      case OpType::LayerNorm: {
        const int64_t c = cols(in[0]);
        split_rows(pool, m, c, [&](int64_t r0, int64_t r1) {
          cpu::layernorm(f(in[0]) + r0 * c, f(in[1]), f(in[2]), op.f0, r1 - r0, c, y + r0 * c);
        });
        break;
      }
      case OpType::MatMul: {
        run_linear(pool, f(in[0]), m, *entry_[size_t(in[1])], ptr_[in[1]],
                   in.size() == 3 ? f(in[2]) : nullptr, y);
        break;
      }
      case OpType::Rope:
        cpu::rope_rotate_half(y, m, op.i0, op.i1, positions, f(in[1]), f(in[2]));
        break;
      case OpType::Attention: {
        check(kv != nullptr, "internal: graph '{}' needs a KV cache", g.name);
        const int64_t pos0 = positions[0];
        uint8_t* kc = (*kv->k)[size_t(op.layer)];
        uint8_t* vc = (*kv->v)[size_t(op.layer)];
        cpu::kv_store(f(in[1]), f(in[2]), m, op.i1, op.i2, pos0, kc, vc, kv->type, kv->capacity);
        if (m == 1 || scratch == nullptr) {
          cpu::attention(pool, f(in[0]), m, op.i0, op.i2, kc, vc, kv->type, op.i1, kv->capacity,
                         pos0 + m, positions, op.f0, y);
        } else {
          causal_attention(pool, op, f(in[0]), m, kc, vc, *kv, pos0 + m, positions, y);
        }
        break;
      }
      case OpType::SelfAttention: {
        // Full (non-causal) attention over all rows, as matmuls per head: S = Q K^T, softmax,
        // O = P V. Reuses the tuned matmul kernel instead of a query-at-a-time loop.
        const int64_t hd = op.i2, nh = op.i0, group = op.i0 / op.i1;
        const int64_t qc = cols(in[0]), kc = cols(in[1]);
        float* qh = scratch;
        float* kh = qh + m * hd;
        float* vt = kh + m * hd;  // V^T of the head: [hd][m]
        float* oh = vt + m * hd;
        float* sc = oh + m * hd;  // [m][m]
        if (bf16_attention_) {
          // One head per task, each thread on its own buffers: the kernels called inside run
          // serially on that thread, so a head needs no pool synchronization (thousands per
          // tile otherwise, each costing a time slice when the other thread is descheduled).
          // K and V^T are gathered straight into bf16, keys padded to a multiple of 16 (zero
          // K rows and V^T columns: their scores are 0 and skipped by the softmax, their
          // products with V are 0) so that score rows start on cache lines, which the AMX tile
          // stores need. Queries go in blocks of rows so that a block's scores stay in L2 from
          // S = Q K^T through the softmax to the rounding for O = P V.
          const int64_t ldp = (m + 15) / 16 * 16;
          const int64_t n_blk = (m + 255) / 256, blk = (m + n_blk - 1) / n_blk;
          pool.parallel_for(nh, [&](int64_t h) {
            thread_local std::vector<float> buf;
            buf.resize(size_t(ldp * hd + 2 * blk * hd + blk * ldp + 16));
            auto* kb = reinterpret_cast<uint16_t*>(align64(buf.data()));
            uint16_t* vb = kb + ldp * hd;
            float* qb = reinterpret_cast<float*>(vb + ldp * hd);
            float* ob = qb + blk * hd;
            float* sb = ob + blk * hd;  // [blk][ldp]
            const float* k0 = f(in[1]) + (h / group) * hd;
            const float* v0 = f(in[2]) + (h / group) * hd;
            // The rows are kc floats apart (a page or more): no hardware prefetch follows
            // them, so fetch 8 rows ahead (the loads were 2/3 of this loop's time).
            for (int64_t r = 0; r < m; ++r) {
              if (r + 8 < m)
                for (int64_t d = 0; d < hd; d += 16) {
                  __builtin_prefetch(k0 + (r + 8) * kc + d);
                  __builtin_prefetch(v0 + (r + 8) * kc + d);
                }
              for (int64_t d = 0; d < hd; ++d) kb[r * hd + d] = f32_to_bf16(k0[r * kc + d]);
              for (int64_t d = 0; d < hd; ++d) vb[d * ldp + r] = f32_to_bf16(v0[r * kc + d]);
            }
            std::fill(kb + m * hd, kb + ldp * hd, uint16_t(0));
            for (int64_t d = 0; d < hd; ++d) std::fill(vb + d * ldp + m, vb + d * ldp + ldp, 0);
            for (int64_t r0 = 0; r0 < m; r0 += blk) {
              const int64_t rows = std::min(blk, m - r0);
              for (int64_t r = 0; r < rows; ++r)
                std::copy_n(f(in[0]) + (r0 + r) * qc + h * hd, hd, qb + r * hd);
              cpu::matmul(pool, qb, rows, hd, kb, DType::BF16, ldp, nullptr, sb);
              for (int64_t r = 0; r < rows; ++r) cpu::softmax_rows(sb + r * ldp, 1, m, op.f0);
              cpu::matmul(pool, sb, rows, ldp, vb, DType::BF16, hd, nullptr, ob);
              for (int64_t r = 0; r < rows; ++r)
                std::copy_n(ob + r * hd, hd, y + (r0 + r) * qc + h * hd);
            }
          });
          break;
        }
        for (int64_t h = 0; h < nh; ++h) {
          const int64_t kvh = h / group;
          for (int64_t r = 0; r < m; ++r) {
            std::copy_n(f(in[0]) + r * qc + h * hd, hd, qh + r * hd);
            std::copy_n(f(in[1]) + r * kc + kvh * hd, hd, kh + r * hd);
            const float* vr = f(in[2]) + r * kc + kvh * hd;
            for (int64_t d = 0; d < hd; ++d) vt[d * m + r] = vr[d];
          }
          cpu::matmul(pool, qh, m, hd, kh, DType::F32, m, nullptr, sc);
          cpu::softmax_rows(sc, m, m, op.f0);
          cpu::matmul(pool, sc, m, m, vt, DType::F32, hd, nullptr, oh);
          for (int64_t r = 0; r < m; ++r) std::copy_n(oh + r * hd, hd, y + r * qc + h * hd);
        }
        break;
      }
      case OpType::SiluMul:
        split_rows(pool, n, 1, [&](int64_t a, int64_t b) {
          cpu::silu_mul(f(in[0]) + a, f(in[1]) + a, y + a, b - a);
        });
        break;
      case OpType::Add:
        split_rows(pool, n, 1, [&](int64_t a, int64_t b) {
          cpu::add(f(in[0]) + a, f(in[1]) + a, y + a, b - a);
        });
        break;
      case OpType::GeluErf:
        split_rows(pool, n, 1,
                   [&](int64_t a, int64_t b) { cpu::gelu_erf(f(in[0]) + a, y + a, b - a); });
        break;
      case OpType::PixelShuffle: {
        // in: [1 + grid*grid, c] (class token first, dropped). out row (a, b) of the
        // (grid/s)^2 grid, channel k: InternVL's pixel_shuffle v2 (view/permute/view/permute)
        // reads patch (s*a + k / (s*c), s*b + (k % (s*c)) / c), channel k % c.
        const int64_t c = cols(in[0]), grid = op.i0, s = op.i1, og = grid / s;
        const float* x = f(in[0]) + c;  // skip the class token
        for (int64_t a = 0; a < og; ++a)
          for (int64_t b = 0; b < og; ++b) {
            float* o = y + (a * og + b) * c * s * s;
            for (int64_t i = 0; i < s; ++i)
              for (int64_t j = 0; j < s; ++j) {
                const float* src = x + ((s * a + i) * grid + (s * b + j)) * c;
                std::copy(src, src + c, o + (i * s + j) * c);
              }
          }
        break;
      }
    }
    if (dump) dump(g.name, g.values[op.output].name, y, m, cols(op.output));
  }
}

}  // namespace edgevl
