#pragma once
// Next-token selection: greedy at temperature 0, otherwise repetition penalty, temperature,
// top-k, top-p and min-p filtering, then a draw from a seeded generator. Scratch buffers are
// kept between calls so sampling allocates nothing per token after the first.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace edgevl {

struct SamplerParams {
  float temperature = 0.8f;     // <= 0: greedy
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off; applied to the last repeat_last_n tokens
  int32_t repeat_last_n = 64;
  uint64_t seed = 0;  // 0: random seed
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p);
  // `history` is the context so far (for the repetition penalty).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  SamplerParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace edgevl
