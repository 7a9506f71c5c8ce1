// Scalar reference kernels: the behaviour every SIMD path is tested against, and the fallback
// on CPUs without a SIMD path. Written for clarity, in float arithmetic (double for the norms' row
// sums).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "core/error.h"

namespace edgevl::cpu {

namespace {

inline float to_f32(float v) {
  return v;
}
inline float to_f32(f16_t v) {
  return f16_to_f32(v.bits);
}
inline float to_f32(bf16_t v) {
  return bf16_to_f32(v.bits);
}
inline float to_f32(int8_t v) {
  return float(v);
}

template <class WT>
void matmul_cols_t(const MatmulArgs& a, int64_t n0, int64_t n1) {
  const WT* w = static_cast<const WT*>(a.w);
  for (int64_t m = 0; m < a.M; ++m) {
    const float* x = a.x + m * a.K;
    for (int64_t n = n0; n < n1; ++n) {
      const WT* wr = w + n * a.K;
      float s = 0.f;
      for (int64_t k = 0; k < a.K; ++k) s += x[k] * to_f32(wr[k]);
      a.y[m * a.N + n] = s + (a.bias ? a.bias[n] : 0.f);
    }
  }
}

void matmul_cols(const MatmulArgs& a, int64_t n0, int64_t n1, float*) {
  switch (a.wtype) {
    case DType::F32: return matmul_cols_t<float>(a, n0, n1);
    case DType::F16: return matmul_cols_t<f16_t>(a, n0, n1);
    case DType::BF16: return matmul_cols_t<bf16_t>(a, n0, n1);
    default: fail("matmul: unsupported weight type {}", dtype_name(a.wtype));
  }
}

// Online softmax (one pass over keys): keeps the running max m, the running sum l of
// exp(s - m) and the running weighted sum of values, rescaling both when m grows.
// q8 caches: key j's dot product is scaled by its row scale, value j is weighted by p * scale.
//
// One head over keys [j0, j1), left unnormalized: out = sum of exp(s - m) v, with the final
// running max m and sum l (a split attention merges such parts).
template <class KT>
void attention_part_one(const AttnArgs& a, int64_t i, int h, int64_t j0, int64_t j1, float* out,
                        float* m_out, float* l_out) {
  const int hd = a.head_dim;
  const int group = a.n_heads / a.n_kv_heads;
  const int64_t row0 = int64_t(h / group) * a.capacity;
  const KT* kc = static_cast<const KT*>(a.k_cache) + row0 * hd;
  const KT* vc = static_cast<const KT*>(a.v_cache) + row0 * hd;
  const float* ks = a.k_scale ? a.k_scale + row0 : nullptr;
  const float* vs = a.v_scale ? a.v_scale + row0 : nullptr;
  const float* q = a.q + (i * a.n_heads + h) * hd;
  for (int d = 0; d < hd; ++d) out[d] = 0.f;
  float m = -INFINITY, l = 0.f;
  for (int64_t j = j0; j < j1; ++j) {
    const KT* kr = kc + j * hd;
    float s = 0.f;
    for (int d = 0; d < hd; ++d) s += q[d] * to_f32(kr[d]);
    if (ks) s *= ks[j];
    s *= a.scale;
    if (s > m) {
      const float c = std::exp(m - s);
      for (int d = 0; d < hd; ++d) out[d] *= c;
      l *= c;
      m = s;
    }
    const float p = std::exp(s - m);
    l += p;
    const float pv = vs ? p * vs[j] : p;
    const KT* vr = vc + j * hd;
    for (int d = 0; d < hd; ++d) out[d] += pv * to_f32(vr[d]);
  }
  *m_out = m;
  *l_out = l;
}

template <class KT>
void attention_one_t(const AttnArgs& a, int64_t i, int h, int64_t n_keys) {
  float* out = a.out + (i * a.n_heads + h) * a.head_dim;
  float m = 0.f, l = 0.f;
  attention_part_one<KT>(a, i, h, 0, n_keys, out, &m, &l);
  if (n_keys <= 0) return;  // no key: a zero output
  const float inv = 1.f / l;
  for (int d = 0; d < a.head_dim; ++d) out[d] *= inv;
}

void attention_heads(const AttnArgs& a, int64_t i, int h0, int h1, int64_t n_keys) {
  for (int h = h0; h < h1; ++h) {
    if (a.kv_type == DType::F16)
      attention_one_t<f16_t>(a, i, h, n_keys);
    else if (a.kv_type == DType::Q8)
      attention_one_t<int8_t>(a, i, h, n_keys);
    else
      attention_one_t<float>(a, i, h, n_keys);
  }
}

void attention_part(const AttnArgs& a, int64_t i, int h0, int h1, int64_t j0, int64_t j1, float* o,
                    float* m, float* l) {
  for (int h = h0; h < h1; ++h) {
    float* oh = o + int64_t(h - h0) * a.head_dim;
    if (a.kv_type == DType::F16)
      attention_part_one<f16_t>(a, i, h, j0, j1, oh, m + (h - h0), l + (h - h0));
    else if (a.kv_type == DType::Q8)
      attention_part_one<int8_t>(a, i, h, j0, j1, oh, m + (h - h0), l + (h - h0));
    else
      attention_part_one<float>(a, i, h, j0, j1, oh, m + (h - h0), l + (h - h0));
  }
}

void rmsnorm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double ss = 0.0;  // double for the same reason as in layernorm
    for (int64_t i = 0; i < dim; ++i) ss += double(xr[i]) * xr[i];
    const float inv = float(1.0 / std::sqrt(ss / double(dim) + double(eps)));
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = xr[i] * inv * w[i];
  }
}

void layernorm(const float* x, const float* w, const float* b, float eps, int64_t rows, int64_t dim,
               float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    // Double sums: a plain float running sum over a row with a large mean (residual streams
    // reach 1e2..1e3) loses ~1e-4 of the mean, more than the tolerance we hold SIMD paths to.
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i];
    const float mean = float(sum / double(dim));
    double var = 0.0;  // two passes: no cancellation when |mean| >> std
    for (int64_t i = 0; i < dim; ++i) var += double(xr[i] - mean) * double(xr[i] - mean);
    const float inv = float(1.0 / std::sqrt(var / double(dim) + double(eps)));
    for (int64_t i = 0; i < dim; ++i)
      y[r * dim + i] = (xr[i] - mean) * inv * (w ? w[i] : 1.f) + (b ? b[i] : 0.f);
  }
}

void rope(float* x, int64_t n_tok, int n_heads, int head_dim, const int32_t* positions,
          const float* cos_table, const float* sin_table) {
  const int half = head_dim / 2;
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* c = cos_table + int64_t(positions[t]) * half;
    const float* s = sin_table + int64_t(positions[t]) * half;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

// Symmetric int8 with one scale per row: scale = max|x| / 127, q = round-to-nearest(x / scale).
// An all-zero row gets scale 0 (and q = 0), so it dequantizes to exact zeros.
void quantize_row_q8(const float* x, int n, int8_t* q, float* scale) {
  float amax = 0.f;
  for (int d = 0; d < n; ++d) amax = std::max(amax, std::fabs(x[d]));
  const float inv = amax > 0.f ? 127.f / amax : 0.f;
  for (int d = 0; d < n; ++d) {
    const float r = std::nearbyint(x[d] * inv);
    // The comparisons also send a NaN (from an inf/NaN row) to 0 instead of an undefined cast.
    q[d] = int8_t(r >= 127.f ? 127.f : r <= -127.f ? -127.f : r == r ? r : 0.f);
  }
  *scale = amax / 127.f;
}

void kv_store(const float* k, const float* v, int64_t n, int n_kv_heads, int head_dim, int64_t pos0,
              void* k_cache, void* v_cache, float* k_scale, float* v_scale, DType kv_type,
              int64_t capacity) {
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < n_kv_heads; ++h) {
      const int64_t src = (t * n_kv_heads + h) * head_dim;
      const int64_t row = int64_t(h) * capacity + pos0 + t;
      const int64_t dst = row * head_dim;
      if (kv_type == DType::Q8) {
        quantize_row_q8(k + src, head_dim, static_cast<int8_t*>(k_cache) + dst, k_scale + row);
        quantize_row_q8(v + src, head_dim, static_cast<int8_t*>(v_cache) + dst, v_scale + row);
      } else if (kv_type == DType::F16) {
        auto* kc = static_cast<uint16_t*>(k_cache) + dst;
        auto* vc = static_cast<uint16_t*>(v_cache) + dst;
        for (int d = 0; d < head_dim; ++d) {
          kc[d] = f32_to_f16(k[src + d]);
          vc[d] = f32_to_f16(v[src + d]);
        }
      } else {
        auto* kc = static_cast<float*>(k_cache) + dst;
        auto* vc = static_cast<float*>(v_cache) + dst;
        for (int d = 0; d < head_dim; ++d) {
          kc[d] = k[src + d];
          vc[d] = v[src + d];
        }
      }
    }
  }
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
}

void gelu_erf(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = 0.5f * x[i] * (1.f + std::erf(x[i] * 0.70710678f));
}

void gelu_tanh(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float u = 0.7978845608028654f * (x[i] + 0.044715f * x[i] * x[i] * x[i]);
    out[i] = 0.5f * x[i] * (1.f + std::tanh(u));
  }
}

void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void convert_to_f32(const void* src, DType t, float* dst, int64_t n) {
  switch (t) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<const float*>(src)[i];
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    default: fail("convert_to_f32: unsupported type {}", dtype_name(t));
  }
}

void kv_rows_to_f32(const void* rows, const float* scales, DType kv_type, int64_t n, int head_dim,
                    float* dst) {
  if (kv_type != DType::Q8) return convert_to_f32(rows, kv_type, dst, n * head_dim);
  const auto* q = static_cast<const int8_t*>(rows);
  for (int64_t j = 0; j < n; ++j)
    for (int d = 0; d < head_dim; ++d)
      dst[j * head_dim + d] = float(q[j * head_dim + d]) * scales[j];
}

int64_t argmax(const float* x, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i)  // NaN compares false: never taken
    if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
  return best < 0 ? 0 : best;
}

void softmax_rows(float* x, int64_t rows, int64_t cols, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    float m = -__builtin_inff();
    for (int64_t i = 0; i < cols; ++i) m = std::max(m, row[i] * scale);
    double sum = 0;
    for (int64_t i = 0; i < cols; ++i) {
      row[i] = std::exp(row[i] * scale - m);
      sum += row[i];
    }
    const float inv = float(1.0 / sum);
    for (int64_t i = 0; i < cols; ++i) row[i] *= inv;
  }
}

}  // namespace

void self_attention_head_bf16_ref(const float* q, int64_t ldq, const float* k, const float* v,
                                  int64_t ldkv, int64_t n, int head_dim, float scale, float* out,
                                  int64_t ldo) {
  const auto r = [](float x) { return bf16_to_f32(f32_to_bf16(x)); };
  std::vector<float> s(static_cast<size_t>(n)), e(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float mx = -__builtin_inff();
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int d = 0; d < head_dim; ++d) acc += r(q[i * ldq + d]) * r(k[j * ldkv + d]);
      s[size_t(j)] = acc;
      mx = std::max(mx, acc);
    }
    float sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      const float ej = std::exp(scale * (s[size_t(j)] - mx));
      sum += ej;
      e[size_t(j)] = r(ej);
    }
    for (int d = 0; d < head_dim; ++d) {
      float acc = 0;
      for (int64_t j = 0; j < n; ++j) acc += e[size_t(j)] * r(v[j * ldkv + d]);
      out[i * ldo + d] = acc / sum;
    }
  }
}

const KernelTable& scalar_kernels() {
  static const KernelTable t{"scalar",
                             matmul_cols,
                             attention_heads,
                             attention_part,
                             rmsnorm,
                             layernorm,
                             rope,
                             kv_store,
                             kv_rows_to_f32,
                             silu_mul,
                             gelu_erf,
                             gelu_tanh,
                             add,
                             convert_to_f32,
                             softmax_rows,
                             argmax,
                             conv1d_silu_ref,
                             delta_rule_heads_ref,
                             gated_rmsnorm_ref,
                             sigmoid_mul_ref};
  return t;
}

}  // namespace edgevl::cpu
