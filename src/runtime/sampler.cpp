#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

namespace edgevl {

int32_t argmax(std::span<const float> logits) {
  // First maximum wins, like torch.argmax.
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(const SamplerParams& p) : p_(p), rng_(p.seed ? p.seed : std::random_device{}()) {}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const bool penalize = p_.repeat_penalty != 1.0f && p_.repeat_last_n != 0;
  if (p_.temperature <= 0.f && !penalize) return argmax(logits);
  cand_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cand_[i] = {logits[i], int32_t(i)};
  if (penalize) {
    // CTRL-style penalty as in transformers: divide positive logits, multiply negative ones.
    const size_t n =
        p_.repeat_last_n < 0 ? history.size() : std::min(history.size(), size_t(p_.repeat_last_n));
    for (size_t i = history.size() - n; i < history.size(); ++i) {
      const int32_t t = history[i];
      if (t < 0 || size_t(t) >= cand_.size()) continue;
      float& l = cand_[size_t(t)].first;
      if (l == logits[size_t(t)]) l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
    }
  }
  if (p_.temperature <= 0.f) {
    return std::max_element(cand_.begin(), cand_.end(),
                            [](auto& a, auto& b) { return a.first < b.first; })
        ->second;
  }
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first; };
  size_t keep = cand_.size();
  if (p_.top_k > 0 && size_t(p_.top_k) < keep) {
    keep = size_t(p_.top_k);
    std::partial_sort(cand_.begin(), cand_.begin() + long(keep), cand_.end(), by_logit);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  cand_.resize(keep);
  // Softmax over the kept candidates at the given temperature.
  const float maxl = cand_[0].first;
  double sum = 0;
  for (auto& c : cand_) {
    c.first = std::exp((c.first - maxl) / p_.temperature);
    sum += c.first;
  }
  for (auto& c : cand_) c.first = float(c.first / sum);
  if (p_.min_p > 0.f) {
    const float floor = cand_[0].first * p_.min_p;
    size_t k = 1;
    while (k < cand_.size() && cand_[k].first >= floor) ++k;
    cand_.resize(k);
  }
  if (p_.top_p < 1.f) {
    double cum = 0;
    size_t k = 0;
    while (k < cand_.size()) {
      cum += cand_[k].first;
      ++k;
      if (cum >= p_.top_p) break;
    }
    cand_.resize(k);
  }
  double total = 0;
  for (auto& c : cand_) total += c.first;
  std::uniform_real_distribution<double> u(0.0, total);
  double r = u(rng_);
  for (auto& c : cand_) {
    r -= c.first;
    if (r <= 0) return c.second;
  }
  return cand_.back().second;
}

}  // namespace edgevl
