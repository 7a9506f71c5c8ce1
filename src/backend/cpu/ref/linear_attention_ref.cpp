// Scalar reference of the Gated DeltaNet kernels (Qwen3.5's linear-attention layers): the
// behaviour every SIMD level is tested against, and the scalar level's kernels.
#include <cmath>
#include <vector>

#include "backend/cpu/delta_rule_impl.h"
#include "backend/cpu/kernel_table.h"

namespace edgevl::cpu {

namespace {

// The row ops delta_rule_impl.h is written over, as plain loops.
struct ScalarRowOps {
  static float dot(const float* a, const float* b, int64_t n) {
    float s = 0.f;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
  }
  static float sum_sq(const float* x, int64_t n) { return dot(x, x, n); }
  static void axpy(float* y, float alpha, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
  }
  static void scale(float* y, float alpha, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
  }
  // y[0, n) += sum_j c[j] x[j * ldx + 0, n)
  static void combine(float* y, const float* c, const float* x, int64_t ldx, int64_t k, int64_t n) {
    for (int64_t j = 0; j < k; ++j) axpy(y, c[j], x + j * ldx, n);
  }
};

float silu(float x) {
  return x / (1.f + std::exp(-x));
}

}  // namespace

void conv1d_silu_ref(const float* x, int64_t rows, int64_t channels, const float* w, int taps,
                     float* state, float* y) {
  const int64_t C = channels, past = taps - 1;
  // Input row s of the window: the state's rows for s < 0 (oldest first), x's after.
  auto in = [&](int64_t s) { return s < 0 ? state + (past + s) * C : x + s * C; };
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t c = 0; c < C; ++c) {
      float acc = 0.f;
      for (int j = 0; j < taps; ++j) acc += w[c * taps + j] * in(t - past + j)[c];
      y[t * C + c] = silu(acc);
    }
  // Keep the last `past` raw rows of [state ; x] (the conv's input, not its output).
  std::vector<float> keep(size_t(past * C));
  for (int64_t s = 0; s < past; ++s) {
    const float* src = in(rows - past + s);
    std::copy(src, src + C, keep.data() + s * C);
  }
  std::copy(keep.begin(), keep.end(), state);
}

void delta_rule_heads_ref(const DeltaRuleArgs& a, int h0, int h1, bool chunked) {
  delta_rule::heads<ScalarRowOps>(a, h0, h1, chunked);
}

void gated_rmsnorm_ref(const float* x, const float* z, const float* w, float eps, int64_t rows,
                       int64_t dim, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double sum = 0.0;  // like rmsnorm's reference: double row sums
    for (int64_t i = 0; i < dim; ++i) sum += double(xr[i]) * xr[i];
    const float inv = float(1.0 / std::sqrt(sum / double(dim) + double(eps)));
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = xr[i] * inv * w[i] * silu(z[r * dim + i]);
  }
}

void sigmoid_mul_ref(const float* x, const float* gate, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] / (1.f + std::exp(-gate[i]));
}

}  // namespace edgevl::cpu
