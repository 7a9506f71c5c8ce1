// Q8 / Q4 packing (scalar, run at compile time) and the scalar reference kernels: the
// behaviour every SIMD path is tested against, and the fallback on CPUs without one.
// The A8 kernels do exactly the integer arithmetic and float scaling order documented in
// quant.h, so the SIMD paths must match them bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/quant.h"
#include "backend/cpu/quant_table.h"
#include "core/dtype.h"
#include "core/error.h"

namespace edgevl::cpu {

namespace {

void check_shape(int64_t N, int64_t K, const char* what) {
  check(N >= 1 && K >= 1 && K <= kQuantMaxK,
        "{}: bad weight shape N={} K={} (need N, K >= 1, K <= {})", what, N, K, kQuantMaxK);
}
void check_group(int group) {
  check(group == 32 || group == 64 || group == 128, "q4: group size {} (expected 32, 64 or 128)",
        group);
}
void check_finite(const float* w, int64_t n, const char* what) {
  for (int64_t i = 0; i < n; ++i)
    check(std::isfinite(w[i]), "{}: weight element {} is not finite ({})", what, i, w[i]);
}

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// Accessors for the packed layouts of quant.h (panel p = n / 16, r = n % 16).
struct Q8View {
  const uint8_t* w;
  int64_t Kp;
  const uint8_t* panel(int64_t n) const { return w + (n / 16) * qt_q8_panel_bytes(Kp); }
  int q(int64_t n, int64_t k) const {
    return int8_t(panel(n)[(k / 4) * 64 + (n % 16) * 4 + k % 4]);
  }
  float scale(int64_t n) const { return load_f32(panel(n) + 16 * Kp + (n % 16) * 4); }
};

struct Q4View {
  const uint8_t* w;
  int64_t Kp, G;
  bool zp;
  layout::Q4Layout lay() const { return layout::q4_layout(Kp, G, zp); }
  const uint8_t* panel(int64_t n) const { return w + (n / 16) * qt_q4_panel_bytes(Kp, G, zp); }
  // Byte offset of code (n, k) within its panel, and whether it is the high nibble.
  static int64_t code_offset(const layout::Q4Layout& L, int64_t n, int64_t k, bool* high) {
    const int64_t g = k / L.G, kg = k % L.G, e = kg % 8;
    *high = e >= 4;
    return L.codes(g) + (kg / 8) * 64 + (n % 16) * 4 + e % 4;
  }
  int code(int64_t n, int64_t k) const {
    bool high;
    const uint8_t b = panel(n)[code_offset(lay(), n, k, &high)];
    return high ? b >> 4 : b & 15;
  }
  float scale(int64_t n, int64_t g) const {
    uint16_t h;
    std::memcpy(&h, panel(n) + lay().scales(g) + (n % 16) * 2, 2);
    return f16_to_f32(h);
  }
  int zero(int64_t n, int64_t g) const { return zp ? panel(n)[lay().zeros(g) + n % 16] : 8; }
};

// ---------------------------------------------------------------- scalar kernels

void quantize_rows_ref(const float* x, int64_t M, int64_t K, int64_t ldq, int8_t* xq, float* xs,
                       bool biased) {
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * K;
    int8_t* q = xq + m * ldq;
    float amax = 0.f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(xr[k]));
    xs[m] = amax / 127.f;
    const float inv = amax > 0.f ? 127.f / amax : 0.f;
    for (int64_t k = 0; k < K; ++k) {
      const float v = std::nearbyint(xr[k] * inv);  // ties to even, like the SIMD convert
      q[k] = int8_t(std::clamp(v, -127.f, 127.f));
    }
    for (int64_t k = K; k < ldq; ++k) q[k] = 0;
    if (biased)
      for (int64_t k = 0; k < ldq; ++k) q[k] = int8_t(uint8_t(q[k]) ^ 0x80);
  }
}

void q8_a8_ref(const QuantArgs& a, int64_t p0, int64_t p1) {
  const Q8View v{a.w, a.Kp};
  const int64_t n1 = std::min(a.N, p1 * 16);
  for (int64_t m = 0; m < a.M; ++m) {
    const int8_t* xq = a.xq + m * a.ldq;
    for (int64_t n = p0 * 16; n < n1; ++n) {
      int32_t acc = 0;
      for (int64_t k = 0; k < a.Kp; ++k) acc += int32_t(xq[k]) * v.q(n, k);
      float r = float(acc) * (a.xs[m] * v.scale(n));
      if (a.bias) r += a.bias[n];
      a.y[m * a.N + n] = r;
    }
  }
}

// Column n of a Q4 panel decoded once (every code, each group's scale and zero point), so the
// reference kernels below spend their time on the arithmetic that defines them.
struct Q4Column {
  std::vector<int> code, zero;
  std::vector<float> scale;
  Q4Column(const Q4View& v, int64_t n)
      : code(size_t(v.Kp)), zero(size_t(v.Kp / v.G)), scale(zero.size()) {
    for (int64_t k = 0; k < v.Kp; ++k) code[size_t(k)] = v.code(n, k);
    for (int64_t g = 0; g < v.Kp / v.G; ++g) {
      zero[size_t(g)] = v.zero(n, g);
      scale[size_t(g)] = v.scale(n, g);
    }
  }
};

void q4_a8_ref(const QuantArgs& a, int64_t p0, int64_t p1) {
  const Q4View v{a.w, a.Kp, a.group, a.zero_point};
  const int64_t G = a.group, ng = a.Kp / G;
  const int64_t n1 = std::min(a.N, p1 * 16);
  for (int64_t n = p0 * 16; n < n1; ++n) {
    const Q4Column c(v, n);
    for (int64_t m = 0; m < a.M; ++m) {
      const int8_t* xq = a.xq + m * a.ldq;
      float r = 0.f;
      for (int64_t g = 0; g < ng; ++g) {
        int32_t acc = 0;
        for (int64_t k = g * G; k < (g + 1) * G; ++k) acc += int32_t(xq[k]) * c.code[size_t(k)];
        acc -= c.zero[size_t(g)] * a.xgs[m * ng + g];
        r += float(acc) * (a.xs[m] * c.scale[size_t(g)]);
      }
      if (a.bias) r += a.bias[n];
      a.y[m * a.N + n] = r;
    }
  }
}

void q8_a16_ref(const QuantArgs& a, int64_t p0, int64_t p1, float*) {
  const Q8View v{a.w, a.Kp};
  const int64_t n1 = std::min(a.N, p1 * 16);
  for (int64_t m = 0; m < a.M; ++m)
    for (int64_t n = p0 * 16; n < n1; ++n) {
      const float s = v.scale(n);
      float r = 0.f;
      for (int64_t k = 0; k < a.K; ++k) r += a.x[m * a.K + k] * (s * float(v.q(n, k)));
      a.y[m * a.N + n] = r + (a.bias ? a.bias[n] : 0.f);
    }
}

void q4_a16_ref(const QuantArgs& a, int64_t p0, int64_t p1, float*) {
  const Q4View v{a.w, a.Kp, a.group, a.zero_point};
  const int64_t n1 = std::min(a.N, p1 * 16);
  for (int64_t n = p0 * 16; n < n1; ++n) {
    const Q4Column c(v, n);
    for (int64_t m = 0; m < a.M; ++m) {
      float r = 0.f;
      for (int64_t k = 0; k < a.K; ++k) {
        const size_t g = size_t(k / a.group);
        r += a.x[m * a.K + k] * (c.scale[g] * float(c.code[size_t(k)] - c.zero[g]));
      }
      a.y[m * a.N + n] = r + (a.bias ? a.bias[n] : 0.f);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------- formats

int64_t q8_padded_k(int64_t K) {
  return qt_round_up(K, 4);
}
size_t q8_panel_bytes(int64_t K) {
  return size_t(qt_q8_panel_bytes(q8_padded_k(K)));
}
size_t q8_packed_bytes(int64_t N, int64_t K) {
  check_shape(N, K, "q8");
  return size_t((N + 15) / 16) * q8_panel_bytes(K);
}

void q8_pack(const float* w, int64_t N, int64_t K, uint8_t* out) {
  check_shape(N, K, "q8_pack");
  check_finite(w, N * K, "q8_pack");
  const int64_t Kp = q8_padded_k(K);
  std::memset(out, 0, q8_packed_bytes(N, K));
  for (int64_t n = 0; n < N; ++n) {
    const float* wr = w + n * K;
    float amax = 0.f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(wr[k]));
    const float s = amax / 127.f;
    uint8_t* panel = out + (n / 16) * qt_q8_panel_bytes(Kp);
    const int64_t r = n % 16;
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int q = s > 0.f ? int(std::clamp(std::round(wr[k] / s), -127.f, 127.f)) : 0;
      panel[(k / 4) * 64 + r * 4 + k % 4] = uint8_t(int8_t(q));
      sum += q;
    }
    std::memcpy(panel + 16 * Kp + r * 4, &s, 4);
    std::memcpy(panel + 16 * Kp + 64 + r * 4, &sum, 4);
  }
}

void q8_unpack(const uint8_t* packed, int64_t N, int64_t K, float* w) {
  check_shape(N, K, "q8_unpack");
  const Q8View v{packed, q8_padded_k(K)};
  for (int64_t n = 0; n < N; ++n) {
    const float s = v.scale(n);
    for (int64_t k = 0; k < K; ++k) w[n * K + k] = s * float(v.q(n, k));
  }
}

int64_t q4_padded_k(int64_t K, int group) {
  check_group(group);
  return qt_round_up(K, group);
}
size_t q4_panel_bytes(int64_t K, int group, bool zero_point) {
  return size_t(qt_q4_panel_bytes(q4_padded_k(K, group), group, zero_point));
}
size_t q4_packed_bytes(int64_t N, int64_t K, int group, bool zero_point) {
  check_shape(N, K, "q4");
  return size_t((N + 15) / 16) * q4_panel_bytes(K, group, zero_point);
}

uint16_t q4_symmetric_scale(const float* w, int64_t len) {
  float m = 0.f;
  for (int64_t i = 0; i < len; ++i)
    if (std::fabs(w[i]) > std::fabs(m)) m = w[i];
  if (m == 0.f) return 0;
  uint16_t best = 0;
  float best_err = -1.f;
  for (int step = 0; step <= 8; ++step) {
    const float d = -10.f + 0.5f * float(step);
    const uint16_t s16 = f32_to_f16(m / d);
    const float s = f16_to_f32(s16);
    if (s == 0.f || !std::isfinite(s)) continue;
    // The candidates' errors on four-float vectors (GCC vector extensions: SSE2 on x86-64, NEON
    // on AArch64; written out because the compiler left the scalar form unvectorised): the code
    // by adding and subtracting 1.5 * 2^23 (round to nearest even, |v| <= 8), eight partial
    // sums as the lanes of two vectors, the same IEEE operations in the same order as the
    // scalar tail. Only the choice of s depends on it; the codes are computed from s as quant.h
    // says.
    using F4 = float __attribute__((vector_size(16)));
    const float inv = 1.f / s;
    const F4 vinv = {inv, inv, inv, inv}, vs = {s, s, s, s}, lo = {-8.f, -8.f, -8.f, -8.f},
             hi = {7.f, 7.f, 7.f, 7.f}, mg = {12582912.f, 12582912.f, 12582912.f, 12582912.f};
    const auto terms = [&](F4 x) {
      F4 v = x * vinv;
      v = v < lo ? lo : v;
      v = hi < v ? hi : v;
      const F4 e = vs * ((v + mg) - mg) - x;
      return e * e;
    };
    F4 a0 = {}, a1 = {};
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
      F4 x0, x1;
      std::memcpy(&x0, w + i, 16);
      std::memcpy(&x1, w + i + 4, 16);
      a0 += terms(x0);
      a1 += terms(x1);
    }
    float acc[8];
    std::memcpy(acc, &a0, 16);
    std::memcpy(acc + 4, &a1, 16);
    for (; i < len; ++i) {
      float v = w[i] * inv;
      v = v < -8.f ? -8.f : v;
      v = 7.f < v ? 7.f : v;
      const float e = s * ((v + 12582912.f) - 12582912.f) - w[i];
      acc[0] += e * e;
    }
    const float err =
        ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    if (best_err < 0 || err < best_err) best_err = err, best = s16;
  }
  return best;
}

void q4_pack(const float* w, int64_t N, int64_t K, int group, bool zero_point, uint8_t* out) {
  check_shape(N, K, "q4_pack");
  check_finite(w, N * K, "q4_pack");
  const int64_t G = group, Kp = q4_padded_k(K, group), ng = Kp / G;
  const layout::Q4Layout L = layout::q4_layout(Kp, G, zero_point);
  std::memset(out, 0, q4_packed_bytes(N, K, group, zero_point));
  for (int64_t n = 0; n < N; ++n) {
    uint8_t* panel = out + (n / 16) * qt_q4_panel_bytes(Kp, G, zero_point);
    const int64_t r = n % 16;
    for (int64_t g = 0; g < ng; ++g) {
      const int64_t k0 = g * G, k1 = std::min(K, k0 + G);
      float lo = 0.f, hi = 0.f;  // the range always contains 0
      for (int64_t k = k0; k < k1; ++k) {
        lo = std::min(lo, w[n * K + k]);
        hi = std::max(hi, w[n * K + k]);
      }
      // The scale is stored as f16 and the codes are computed with the stored value.
      const float need = zero_point ? (hi - lo) / 15.f : std::max(-lo, hi) / 8.f;
      check(need <= 65504.f,
            "q4_pack: row {} group {}: weights up to {} need a group scale of {}, beyond f16 "
            "(65504); keep this tensor at Q8 or F16",
            n, g, std::max(-lo, hi), need);
      const uint16_t s16 =
          zero_point ? f32_to_f16(need) : q4_symmetric_scale(w + n * K + k0, k1 - k0);
      const float s = f16_to_f32(s16);
      const int z = !zero_point ? 8 : s > 0.f ? int(std::clamp(std::round(-lo / s), 0.f, 15.f)) : 0;
      for (int64_t k = k0; k < k0 + G; ++k) {
        int c = z;  // padding columns decode to exactly 0
        if (k < k1 && s != 0.f)
          c = int(std::clamp(std::round(w[n * K + k] / s) + float(z), 0.f, 15.f));
        bool high;
        uint8_t& b = panel[Q4View::code_offset(L, n, k, &high)];
        b = uint8_t(high ? (b & 0x0F) | (c << 4) : (b & 0xF0) | c);
      }
      std::memcpy(panel + L.scales(g) + r * 2, &s16, 2);
      if (zero_point) panel[L.zeros(g) + r] = uint8_t(z);
    }
  }
}

void q4_unpack(const uint8_t* packed, int64_t N, int64_t K, int group, bool zero_point, float* w) {
  check_shape(N, K, "q4_unpack");
  const Q4View v{packed, q4_padded_k(K, group), group, zero_point};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = k / group;
      w[n * K + k] = v.scale(n, g) * float(v.code(n, k) - v.zero(n, g));
    }
}

void q8_unpack_rows(const uint8_t* packed, int64_t N, int64_t K, const int32_t* rows,
                    int64_t n_rows, float* out) {
  check_shape(N, K, "q8_unpack_rows");
  const Q8View v{packed, q8_padded_k(K)};
  for (int64_t i = 0; i < n_rows; ++i) {
    const int64_t n = rows[i];
    check(n >= 0 && n < N, "q8_unpack_rows: row {} out of range [0, {})", n, N);
    const float s = v.scale(n);
    for (int64_t k = 0; k < K; ++k) out[i * K + k] = s * float(v.q(n, k));
  }
}

void q4_unpack_rows(const uint8_t* packed, int64_t N, int64_t K, int group, bool zero_point,
                    const int32_t* rows, int64_t n_rows, float* out) {
  check_shape(N, K, "q4_unpack_rows");
  const Q4View v{packed, q4_padded_k(K, group), group, zero_point};
  for (int64_t i = 0; i < n_rows; ++i) {
    const int64_t n = rows[i];
    check(n >= 0 && n < N, "q4_unpack_rows: row {} out of range [0, {})", n, N);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = k / group;
      out[i * K + k] = v.scale(n, g) * float(v.code(n, k) - v.zero(n, g));
    }
  }
}

const QuantTable& quant_scalar_kernels() {
  static const QuantTable t{"scalar",  quantize_rows_ref, false,     q8_a8_ref,
                            q4_a8_ref, q8_a16_ref,        q4_a16_ref};
  return t;
}

}  // namespace edgevl::cpu
