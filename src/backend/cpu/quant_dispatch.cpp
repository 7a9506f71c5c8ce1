// Public quantized-matmul entry points: argument checks, ISA selection, activation
// quantization and the split of weight panels over the thread pool. Compiled without ISA
// flags; it calls into an ISA file only after cpu_features() confirmed the CPU supports it.
#include <algorithm>
#include <atomic>
#include <vector>

#include "backend/cpu/hadamard.h"
#include "backend/cpu/isa_levels.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/quant.h"
#include "backend/cpu/quant_table.h"
#include "core/error.h"

namespace edgevl::cpu {

namespace {

const QuantTable& qt() {
  return active_quant();
}

// The table that runs one call: an AMX table hands A16 and small-M calls to its fallback.
const QuantTable& table_for(int64_t M, bool a8) {
  const QuantTable& t = qt();
  if (t.fallback && (!a8 || M < t.min_rows_a8)) return *t.fallback;
  return t;
}

// Quantized activations of the current call, owned by the calling thread (workers write
// disjoint rows of it during the call).
struct ActBuffers {
  std::vector<int8_t> xq;
  std::vector<float> xs;
  std::vector<int32_t> xgs;
};
ActBuffers& act_buffers() {
  thread_local ActBuffers b;
  return b;
}

// x copied into rows of Kp floats, zero-padded, for the small-M A16 kernels (which read x in
// steps of 4 or G along k and must not read past a row).
const float* padded_x(const float* x, int64_t M, int64_t K, int64_t Kp) {
  thread_local std::vector<float> buf;
  buf.assign(size_t(M * Kp), 0.f);
  for (int64_t m = 0; m < M; ++m) std::copy(x + m * K, x + (m + 1) * K, buf.begin() + m * Kp);
  return buf.data();
}

float* a16_scratch() {
  thread_local std::vector<float> buf(static_cast<size_t>(kQuantScratchFloats));
  return buf.data();
}

void check_call(const float* x, int64_t M, int64_t K, const uint8_t* packed, int64_t N,
                const float* y, const char* what) {
  check(M >= 0 && K >= 1 && K <= kQuantMaxK && N >= 1,
        "{}: bad shape M={} K={} N={} (need M >= 0, 1 <= K <= {}, N >= 1)", what, M, K, N,
        kQuantMaxK);
  check(M == 0 || (x && packed && y), "{}: null pointer argument", what);
}

// Quantizes x into the calling thread's buffers (rows split over the pool when M is large);
// with group > 0 also the per-group sums of the quantized rows. Rows have the stride and the
// zero padding rows the table asks for.
// With bias, stores xq + 128 as uint8 (XOR 0x80) instead (QuantTable::q8_x_biased). With a
// rotation, rows are rotated (hadamard_rows) into the calling thread's buffer 8 at a time
// first (28-155 KB for K = 896-4864: in L1 or L2, where a rotated copy of all of x was not).
void quantize_activations_into(ThreadPool& pool, const QuantTable& t, const float* x, int64_t M,
                               int64_t K, int64_t Kp, int64_t group, bool bias, int rotation,
                               QuantArgs* a) {
  ActBuffers& b = act_buffers();
  const int64_t ldq = (Kp + t.ldq_align - 1) / t.ldq_align * t.ldq_align;
  const int64_t rows_alloc = (M + t.row_align - 1) / t.row_align * t.row_align;
  b.xq.resize(size_t(rows_alloc * ldq));
  std::fill(b.xq.begin() + M * ldq, b.xq.end(), int8_t(0));
  b.xs.resize(size_t(M));
  const int64_t ng = group > 0 ? Kp / group : 0;
  b.xgs.resize(size_t(M * ng));
  int8_t* xq = b.xq.data();
  float* xs = b.xs.data();
  int32_t* xgs = b.xgs.data();
  constexpr int64_t kRowsPerTask = 8;
  const auto rows = [&](int64_t m0, int64_t m1) {
    if (rotation) {
      thread_local std::vector<float> rotated;
      if (rotated.size() < size_t(kRowsPerTask * K)) rotated.resize(size_t(kRowsPerTask * K));
      for (int64_t m = m0; m < m1; m += kRowsPerTask) {
        const int64_t n = std::min(kRowsPerTask, m1 - m);
        hadamard_rows(x + m * K, rotated.data(), n, K, rotation);
        t.quantize_rows(rotated.data(), n, K, ldq, xq + m * ldq, xs + m, bias);
      }
    } else {
      t.quantize_rows(x + m0 * K, m1 - m0, K, ldq, xq + m0 * ldq, xs + m0, bias);
    }
    // Local pointers: through the lambda's captures the compiler reloaded them every byte.
    for (int64_t m = m0; m < m1; ++m) {
      const int8_t* r = xq + m * ldq;
      int32_t* gs = xgs + m * ng;
      for (int64_t g = 0; g < ng; ++g) {
        int32_t s = 0;
        for (int64_t k = 0; k < group; ++k) s += r[g * group + k];
        gs[g] = s;
      }
    }
  };
  if (M <= kRowsPerTask || pool.size() == 1) {
    rows(0, M);
  } else {
    pool.parallel_for((M + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t c) {
      rows(c * kRowsPerTask, std::min(M, (c + 1) * kRowsPerTask));
    });
  }
  a->xq = xq;
  a->ldq = ldq;
  a->xs = xs;
  a->xgs = xgs;
}

// Splits the weight panels: each thread streams its own panels once.
// - GEMV / VNNI tables: work goes in groups of 4 panels (the decode kernels' widest block), in
//   tasks of equal size: the pool hands them out dynamically, and with 7 chunks of 8 panels
//   (N = 896: q, o and down projections) one thread ran 4 chunks while the other waited after
//   3. So a matrix with few groups gets one group per task; a larger one about 4 tasks per
//   thread (sizes differ by at most a group), which lets the others cover for a descheduled
//   thread.
// - even_chunks (AMX, compute-bound: a thread left without a chunk idles): of 4, 3, 2 or 1
//   chunks per thread (multiples of panel_align panels), the most chunks whose panels are
//   dealt out evenly. N = 896 (56 panels) in 4 chunks per thread rounds to 7 chunks of 8, so
//   one thread ran 32 panels and the other 24; 2 chunks per thread of 14 panels split 28 / 28.
template <class F>
void for_panel_chunks(ThreadPool& pool, const QuantTable& t, int64_t N, F&& f) {
  const int64_t P = (N + 15) / 16;
  const int64_t threads = pool.size();
  if (!t.even_chunks) {
    const int64_t U = (P + 3) / 4;
    const int64_t tasks = U <= 8 * threads ? U : 4 * threads;
    pool.parallel_for(tasks, [&](int64_t k) {
      const int64_t g0 = k * U / tasks, g1 = (k + 1) * U / tasks;
      f(4 * g0, std::min(P, 4 * g1));
    });
    return;
  }
  const auto chunk_for = [&](int64_t per_thread, int64_t align) {
    const int64_t c = (P + threads * per_thread - 1) / (threads * per_thread);
    return (c + align - 1) / align * align;
  };
  // Panels of the busiest thread when chunk i goes to thread i % threads.
  const auto busiest = [&](int64_t c) {
    const int64_t n = (P + c - 1) / c;
    int64_t worst = 0;
    for (int64_t th = 0; th < threads; ++th) {
      int64_t load = 0;
      for (int64_t i = th; i < n; i += threads) load += std::min(P, (i + 1) * c) - i * c;
      worst = std::max(worst, load);
    }
    return worst;
  };
  int64_t chunk = chunk_for(4, t.panel_align);
  for (int64_t per_thread = 3; per_thread >= 1; --per_thread) {
    const int64_t c = chunk_for(per_thread, t.panel_align);
    if (busiest(c) < busiest(chunk)) chunk = c;
  }
  const int64_t n_chunks = (P + chunk - 1) / chunk;
  pool.parallel_for(n_chunks, [&](int64_t c) { f(c * chunk, std::min(P, (c + 1) * chunk)); });
}

}  // namespace

const char* quant_kernel_isa() {
  return qt().name;
}

int64_t quant_q4_prefill_min_rows() {
  return qt().q4_prefill ? qt().q4_prefill_min_rows : 0;
}

std::string quant_q4_path() {
  const QuantTable& t = qt();
  if (!t.q4_prefill) return t.name;
  return std::string(t.name) + " (W4A8 >= " + std::to_string(t.q4_prefill_min_rows) +
         " rows: requantized to int8)";
}

void quantize_rows_i8(const float* x, int64_t M, int64_t K, int64_t ldq, int8_t* xq, float* scale) {
  check(M >= 0 && K >= 0 && ldq >= K, "quantize_rows_i8: bad shape M={} K={} ldq={}", M, K, ldq);
  if (M == 0) return;
  if (K == 0) {
    std::fill(xq, xq + M * ldq, int8_t(0));
    std::fill(scale, scale + M, 0.f);
    return;
  }
  qt().quantize_rows(x, M, K, ldq, xq, scale, false);
}

void matmul_q8(ThreadPool& pool, const float* x, int64_t M, int64_t K, const uint8_t* packed,
               int64_t N, const float* bias, float* y, bool quantize_activations,
               bool row_invariant, int rotation) {
  check_call(x, M, K, packed, N, y, "matmul_q8");
  check(rotation == 0 || quantize_activations, "matmul_q8: a rotation needs int8 activations");
  if (M == 0) return;
  const QuantTable& t = table_for(row_invariant ? 1 : M, quantize_activations);
  QuantArgs a{};
  a.x = x;
  a.M = M;
  a.K = K;
  a.Kp = q8_padded_k(K);
  a.w = packed;
  a.N = N;
  a.bias = bias;
  a.y = y;
  if (quantize_activations) {
    quantize_activations_into(pool, t, x, M, K, a.Kp, 0, t.q8_x_biased, rotation, &a);
    for_panel_chunks(pool, t, N, [&](int64_t p0, int64_t p1) { t.q8_a8(a, p0, p1); });
  } else {
    a.a16_direct_any_m = row_invariant;
    if (M <= kA16DirectRows || row_invariant) a.xpad = padded_x(x, M, K, a.Kp);
    for_panel_chunks(pool, t, N,
                     [&](int64_t p0, int64_t p1) { t.q8_a16(a, p0, p1, a16_scratch()); });
  }
}

void matmul_q4(ThreadPool& pool, const float* x, int64_t M, int64_t K, const uint8_t* packed,
               int64_t N, int group, bool zero_point, const float* bias, float* y,
               bool quantize_activations, bool fast_prefill, bool row_invariant, int rotation) {
  check_call(x, M, K, packed, N, y, "matmul_q4");
  check(rotation == 0 || quantize_activations, "matmul_q4: a rotation needs int8 activations");
  check(group == 32 || group == 64 || group == 128,
        "matmul_q4: group size {} (expected 32, 64 or 128)", group);
  if (M == 0) return;
  const bool prefill = quantize_activations && fast_prefill && !row_invariant && qt().q4_prefill &&
                       M >= qt().q4_prefill_min_rows;
  const QuantTable& t = prefill ? qt() : table_for(row_invariant ? 1 : M, quantize_activations);
  QuantArgs a{};
  a.x = x;
  a.M = M;
  a.K = K;
  a.Kp = q4_padded_k(K, group);
  a.w = packed;
  a.N = N;
  a.group = group;
  a.zero_point = zero_point;
  a.bias = bias;
  a.y = y;
  if (quantize_activations) {
    const bool sums = t.q4_group_sums && !prefill;
    // The prefill route runs the table's Q8 kernel, which may want biased activations.
    quantize_activations_into(pool, t, x, M, K, a.Kp, sums ? group : 0, prefill && t.q8_x_biased,
                              rotation, &a);
    for_panel_chunks(pool, t, N, [&](int64_t p0, int64_t p1) {
      if (prefill)
        t.q4_prefill(a, p0, p1);
      else
        t.q4_a8(a, p0, p1);
    });
  } else {
    a.a16_direct_any_m = row_invariant;
    if (M <= kA16DirectRows || row_invariant) a.xpad = padded_x(x, M, K, a.Kp);
    for_panel_chunks(pool, t, N,
                     [&](int64_t p0, int64_t p1) { t.q4_a16(a, p0, p1, a16_scratch()); });
  }
}

}  // namespace edgevl::cpu
