#include "core/rope_tables.h"

#include <cmath>
#include <vector>

namespace edgevl {

void rope_tables(float theta, int head_dim, int64_t positions, float* cos_out, float* sin_out) {
  const int half = head_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    const float expo = float(2 * i) / float(head_dim);
    inv_freq[size_t(i)] = 1.0f / float(std::pow(double(theta), double(expo)));
  }
  for (int64_t p = 0; p < positions; ++p)
    for (int i = 0; i < half; ++i) {
      const float angle = float(p) * inv_freq[size_t(i)];
      cos_out[p * half + i] = float(std::cos(double(angle)));
      sin_out[p * half + i] = float(std::sin(double(angle)));
    }
}

}  // namespace edgevl
