#include "runtime/executor.h"

#include <algorithm>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/layout_ops.h"
#include "core/align.h"
#include "core/error.h"
#include "core/kv_layout.h"
#include "graph/bf16_blocks.h"
#include "runtime/causal_attention.h"
#include "runtime/linear.h"
#include "runtime/profiler.h"
#include "runtime/self_attention.h"

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

}  // namespace

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
  // The bf16 block hand-offs the compiler flagged (graph_passes.cpp) make kernels read and
  // write slots in another layout: trust them only where the rule holds for this binary.
  producer_.assign(g.values.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i) producer_[size_t(g.ops[i].output)] = int32_t(i);
  for (size_t id = 0; id < g.values.size(); ++id)
    if (g.values[id].bf16_blocks) {
      const std::string why = bf16_blocks_refusal(g, int32_t(id), type_);
      check(why.empty(), "{}: graph '{}': value '{}' is flagged as bf16 blocks but {}",
            m.file().path(), g.name, g.values[id].name, why);
    }
  blocks_panels_.assign(g.values.size(), 1);
  for (const Op& op : g.ops)
    if (op.type == OpType::MatMul && type_[size_t(op.inputs[1])] != DType::BF16P)
      blocks_panels_[size_t(op.inputs[0])] = blocks_panels_[size_t(op.output)] = 0;
  for (const Op& op : g.ops) {
    kinds_.push_back(profile_kind(op, op.type == OpType::MatMul ? entry_[op.inputs[1]] : nullptr));
    // Everything but a matmul's weight is read as float by the kernels.
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const bool float_only = !(op.type == OpType::MatMul && i == 1);
      check(!float_only || type_[op.inputs[i]] == DType::F32,
            "{}: graph '{}': op {} reads '{}' as float but it is stored as {}", m.file().path(),
            g.name, op_name(op.type), g.values[op.inputs[i]].name, dtype_name(type_[op.inputs[i]]));
    }
    if (op.type == OpType::MatMul && op.matmul().epilogue != Epilogue::kNone)
      check(type_[size_t(op.matmul().pre)] == DType::F32,
            "{}: graph '{}': matmul '{}' keeps its product in a non-float value", m.file().path(),
            g.name, g.values[op.output].name);
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
      const int64_t hd = op.attention().head_dim;
      scratch_floats_ = std::max(scratch_floats_, size_t(4 * rows * hd + rows * rows));
    }
  }
}

// FLOPs and bytes of one op for the profile: multiply-adds of matmuls and attention; bytes
// the op reads and writes (weights as stored, activations as f32, the KV cache as stored).
std::pair<double, double> GraphRunner::op_cost(const Op& op, int64_t m, double n_kv,
                                               const KvCaches* kv, bool per_row) const {
  const Graph& g = *g_;
  auto cols = [&](int32_t id) { return double(g.values[id].shape.back()); };
  double flops = 0, bytes = 4.0 * double(m) * cols(op.output);
  for (int32_t id : op.inputs) {
    if (const TensorEntry* w = entry_[size_t(id)])
      bytes += double(w->bytes);
    else if (!(op.type == OpType::Rope && id == op.inputs[0]))
      bytes += 4.0 * double(m) * cols(id);
  }
  if (op.type == OpType::MatMul) {
    flops = 2.0 * double(m) * cols(op.inputs[0]) * cols(op.output);
  } else if (op.type == OpType::SelfAttention) {
    const AttentionAttrs at = op.attention();
    flops = 4.0 * double(m) * double(m) * double(at.n_heads) * at.head_dim;
  } else if (op.type == OpType::Attention && kv) {
    const AttentionAttrs at = op.attention();
    flops = 4.0 * double(m) * n_kv * double(at.n_heads) * at.head_dim;
    const KvLayout lay{kv->type, at.n_kv_heads, at.head_dim, kv->capacity};
    // Per-row caches (a decode batch): each row reads its own keys and values.
    bytes += 2.0 * n_kv * (per_row ? double(m) : 1.0) * lay.token_bytes();
  }
  return {flops, bytes};
}

void GraphRunner::run(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions,
                      const KvCaches* kv, float* scratch, const DumpFn& dump, Profiler* profiler,
                      float* out) const {
  run_impl(pool, rows, positions, kv, nullptr, scratch, dump, profiler, out);
}

void GraphRunner::run_rows(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions,
                           const KvCaches* const* row_kv, float* scratch, const DumpFn& dump,
                           Profiler* profiler, float* out) const {
  // A graph without attention gets a table of nulls: per-row mode is keyed on the table.
  static const KvCaches* const kNoCaches[1] = {nullptr};
  check(rows >= 1 && rows <= g_->width, "internal: {} rows for graph '{}' of width {}", rows,
        g_->name, g_->width);
  run_impl(pool, rows, positions, nullptr, row_kv ? row_kv : kNoCaches, scratch, dump, profiler,
           out);
}

void GraphRunner::run_impl(cpu::ThreadPool& pool, int32_t rows, const int32_t* positions,
                           const KvCaches* kv, const KvCaches* const* row_kv, float* scratch,
                           const DumpFn& dump, Profiler* profiler, float* out) const {
  const Graph& g = *g_;
  // Only a matmul writes its output without reading it first (see run()).
  check(!out || (!g.ops.empty() && g.ops.back().output == g.output &&
                 g.ops.back().type == OpType::MatMul),
        "internal: graph '{}' cannot write its output to the caller's buffer", g.name);
  const bool per_row = row_kv != nullptr;
  // Elementwise ops of a batch run row by row: a flat split could hand an element to a SIMD
  // tail in one batch and to the vector body in another (different rounding for silu / gelu).
  auto elementwise = [&](int64_t m, int64_t c, int64_t n, auto&& fn) {
    if (!per_row) return split_rows(pool, n, 1, fn);
    for (int64_t r = 0; r < m; ++r) fn(r * c, (r + 1) * c);
  };
  auto f = [&](int32_t id) {
    return out && id == g.output ? out : static_cast<float*>(ptr_[size_t(id)]);
  };
  auto cols = [&](int32_t id) { return g.values[id].shape.back(); };
  // Values as tall as the graph width follow the valid row count (the masked last chunk);
  // others (e.g. the 256 rows after the vision pixel shuffle) always run whole.
  auto rows_of = [&](int32_t id) {
    const int64_t r = g.values[id].shape[0];
    return r == g.width ? int64_t(rows) : r;
  };
  // Whether value id is held as bf16 blocks in this run: flagged by the compiler, on a CPU with
  // the block kernels (and the fused attention kernel, for an attention output), and nobody
  // asked to see the values (dump hook). The same answer for its producer and its readers.
  auto in_blocks = [&](int32_t id) {
    if (!g.values[size_t(id)].bf16_blocks || dump ||
        !cpu::bf16_blocks_supported(rows_of(id), blocks_panels_[size_t(id)]))
      return false;
    const Op& p = g.ops[size_t(producer_[size_t(id)])];
    return p.type != OpType::SelfAttention || cpu::has_self_attention_bf16(p.attention().head_dim);
  };
  auto blocks = [&](int32_t id) { return reinterpret_cast<uint16_t*>(align64(f(id))); };
  // A matmul's epilogue as an elementwise step over its product (where it is not fused).
  auto run_epilogue = [&](const Op& op, const float* product) {
    const int64_t c = cols(op.output), mm = rows_of(op.output);
    float* y = f(op.output);
    if (op.matmul().epilogue == Epilogue::kGeluErf)
      return elementwise(mm, c, mm * c,
                         [&](int64_t a, int64_t b) { cpu::gelu_erf(product + a, y + a, b - a); });
    const float* r = f(op.residual());
    elementwise(mm, c, mm * c,
                [&](int64_t a, int64_t b) { cpu::add(product + a, r + a, y + a, b - a); });
  };
  // Per row of a batch, the mean count of keys a row attends to (each row sees its own).
  double n_kv = positions ? double(positions[0] + rows) : double(rows);
  if (per_row) {
    n_kv = 0;
    for (int64_t r = 0; r < rows; ++r) n_kv += double(positions[r] + 1) / double(rows);
  }
  const KvCaches* cost_kv = per_row ? row_kv[0] : kv;
  for (size_t op_index = 0; op_index < g.ops.size(); ++op_index) {
    const Op& op = g.ops[op_index];
    bool fused = false;
    auto t0 = profiler ? Profiler::Clock::now() : Profiler::Clock::time_point{};
    const auto& in = op.inputs;
    float* y = f(op.output);
    const int64_t m = rows_of(op.output);
    const int64_t n = m * cols(op.output);
    switch (op.type) {
      case OpType::RmsNorm: {
        // A grouped norm (per head) is the same kernel over rows of `group` columns.
        const NormAttrs na = op.norm();
        const int64_t c = na.group > 0 ? na.group : cols(in[0]);
        const int64_t rows = m * (cols(in[0]) / c);
        split_rows(pool, rows, c, [&](int64_t r0, int64_t r1) {
          cpu::rmsnorm(f(in[0]) + r0 * c, f(in[1]), na.eps, r1 - r0, c, y + r0 * c);
        });
        break;
      }
      case OpType::LayerNorm: {
        const int64_t c = cols(in[0]);
        if (in_blocks(op.output)) {
          cpu::layernorm_to_bf16_blocks(pool, f(in[0]), f(in[1]), f(in[2]), op.norm().eps, m, c,
                                        blocks(op.output));
          fused = true;
          break;
        }
        split_rows(pool, m, c, [&](int64_t r0, int64_t r1) {
          cpu::layernorm(f(in[0]) + r0 * c, f(in[1]), f(in[2]), op.norm().eps, r1 - r0, c,
                         y + r0 * c);
        });
        break;
      }
      case OpType::MatMul: {
        const TensorEntry& w = *entry_[size_t(in[1])];
        const MatMulAttrs mm = op.matmul();
        const float* bias = op.bias() >= 0 ? f(op.bias()) : nullptr;
        const bool bf16_w = w.dtype == DType::BF16 || w.dtype == DType::BF16P;
        // The epilogue runs inside the bf16 block kernel where there is one for this CPU and
        // shape (a GELU only into blocks, a residual only into f32 rows); else as a step of its
        // own over the product.
        const bool from_blocks = in_blocks(in[0]);
        const bool gelu_to_blocks = mm.epilogue == Epilogue::kGeluErf && in_blocks(op.output);
        const bool residual_in_kernel = mm.epilogue == Epilogue::kAddResidual && bf16_w && !dump &&
                                        cpu::bf16_blocks_supported(m, w.dtype == DType::BF16P);
        fused = gelu_to_blocks || residual_in_kernel;
        float* product = mm.epilogue == Epilogue::kNone || fused ? y : f(mm.pre);
        if (from_blocks || fused) {
          cpu::matmul_bf16_blocks(
              pool, from_blocks ? nullptr : f(in[0]), from_blocks ? blocks(in[0]) : nullptr, m,
              w.shape[1], static_cast<const uint16_t*>(ptr_[in[1]]), w.dtype == DType::BF16P,
              w.shape[0], bias, gelu_to_blocks ? nullptr : product,
              gelu_to_blocks ? blocks(op.output) : nullptr,
              residual_in_kernel ? f(op.residual()) : nullptr);
        } else {
          run_linear(pool, f(in[0]), m, w, ptr_[in[1]], bias, product, /*portable=*/false,
                     /*row_invariant=*/per_row);
        }
        if (mm.epilogue == Epilogue::kNone || fused) break;
        if (profiler) {  // the product and the epilogue as two rows of the profile
          const auto t1 = Profiler::Clock::now();
          const auto [flops, bytes] = op_cost(op, m, n_kv, cost_kv, per_row);
          profiler->record(g.name, kinds_[op_index], g.values[mm.pre].name, op.layer, t0, t1, flops,
                           bytes);
          t0 = t1;
        }
        if (dump) dump(g.name, g.values[mm.pre].name, product, m, cols(op.output));
        run_epilogue(op, product);
        break;
      }
      case OpType::Rope: {
        const int64_t c = cols(op.output);
        split_rows(pool, m, c, [&](int64_t r0, int64_t r1) {
          cpu::rope_rotate_half(y + r0 * c, r1 - r0, op.rope().n_heads, op.rope().head_dim,
                                positions + r0, f(in[1]), f(in[2]));
        });
        break;
      }
      case OpType::Attention: {
        const AttentionAttrs at = op.attention();
        if (per_row) {
          // Each row is one decode step of its own sequence (or the next position of the same
          // one, in a verification): the M = 1 store, then every row's M = 1 attention in one
          // dispatch. A row sees keys up to its own position, so storing all rows first never
          // shows a row a later one's key.
          const int64_t qc = cols(in[0]), kc_cols = cols(in[1]);
          thread_local std::vector<cpu::AttentionRow> att;  // per layer and step: reused
          att.resize(static_cast<size_t>(m));
          for (int64_t r = 0; r < m; ++r) {
            const KvCaches* rk = row_kv[r];
            check(rk != nullptr, "internal: graph '{}' row {} has no KV cache", g.name, r);
            uint8_t* kc = (*rk->k)[size_t(op.layer)];
            uint8_t* vc = (*rk->v)[size_t(op.layer)];
            const int64_t pos = positions[r];
            cpu::kv_store(f(in[1]) + r * kc_cols, f(in[2]) + r * kc_cols, 1, at.n_kv_heads,
                          at.head_dim, pos, kc, vc, rk->type, rk->capacity);
            att[size_t(r)] = {f(in[0]) + r * qc,      kc, vc, rk->type, rk->capacity, pos + 1,
                              y + r * cols(op.output)};
          }
          cpu::attention_rows(pool, att, at.n_heads, at.head_dim, at.n_kv_heads, at.scale);
          break;
        }
        check(kv != nullptr, "internal: graph '{}' needs a KV cache", g.name);
        const int64_t pos0 = positions[0];
        uint8_t* kc = (*kv->k)[size_t(op.layer)];
        uint8_t* vc = (*kv->v)[size_t(op.layer)];
        cpu::kv_store(f(in[1]), f(in[2]), m, at.n_kv_heads, at.head_dim, pos0, kc, vc, kv->type,
                      kv->capacity);
        if (m == 1) {
          cpu::attention(pool, f(in[0]), m, at.n_heads, at.head_dim, kc, vc, kv->type,
                         at.n_kv_heads, kv->capacity, pos0 + m, positions, at.scale, y);
        } else {
          causal_attention(pool, op, f(in[0]), m, kc, vc, *kv, pos0 + m, positions, y);
        }
        break;
      }
      case OpType::SelfAttention: {
        // On AMX the fused kernel may write the output as bf16 blocks for o_proj directly.
        const bool to_blocks = in_blocks(op.output);
        run_self_attention(pool, op,
                           SelfAttentionIo{f(in[0]), f(in[1]), f(in[2]), cols(in[0]), cols(in[1]),
                                           m, y, to_blocks ? blocks(op.output) : nullptr},
                           scratch);
        fused = to_blocks;
        break;
      }
      case OpType::SiluMul:
        elementwise(m, cols(op.output), n, [&](int64_t a, int64_t b) {
          cpu::silu_mul(f(in[0]) + a, f(in[1]) + a, y + a, b - a);
        });
        break;
      case OpType::Add:
        elementwise(m, cols(op.output), n, [&](int64_t a, int64_t b) {
          cpu::add(f(in[0]) + a, f(in[1]) + a, y + a, b - a);
        });
        break;
      case OpType::GeluErf:
        elementwise(m, cols(op.output), n,
                    [&](int64_t a, int64_t b) { cpu::gelu_erf(f(in[0]) + a, y + a, b - a); });
        break;
      case OpType::PixelShuffle:
        cpu::pixel_shuffle(f(in[0]), op.pixel_shuffle().grid, op.pixel_shuffle().factor,
                           cols(in[0]), y);
        break;
      case OpType::PatchIm2col:
        cpu::patch_im2col(f(in[0]), op.patch_im2col().image, op.patch_im2col().patch, y);
        break;
    }
    if (profiler) {
      const bool epilogue_step =
          op.type == OpType::MatMul && op.matmul().epilogue != Epilogue::kNone && !fused;
      const auto [flops, bytes] =
          epilogue_step
              ? std::pair<double, double>{0,
                                          (op.matmul().epilogue == Epilogue::kAddResidual ? 12.0
                                                                                          : 8.0) *
                                              double(n)}
              : op_cost(op, m, n_kv, cost_kv, per_row);
      const std::string& kind = kinds_[op_index];
      const char* epilogue = op.type == OpType::MatMul ? epilogue_name(op.matmul().epilogue) : "";
      profiler->record(g.name,
                       epilogue_step               ? std::string(epilogue)
                       : !fused                    ? kind
                       : op.type == OpType::MatMul ? kind + "+" + epilogue
                                                   : kind + " to bf16",
                       g.values[op.output].name, op.layer, t0, Profiler::Clock::now(), flops,
                       bytes);
    }
    if (dump) dump(g.name, g.values[op.output].name, y, m, cols(op.output));
  }
}

}  // namespace edgevl
