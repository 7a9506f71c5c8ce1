#include "runtime/decoding/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/kernels.h"
#include "core/error.h"

namespace edgevl {

int32_t argmax(std::span<const float> logits) {
  return int32_t(cpu::argmax(logits.data(), int64_t(logits.size())));
}

void validate_sampler_params(const SamplerParams& p, int32_t vocab_size) {
  check(std::isfinite(p.temperature), "temperature must be a finite number");
  check(p.top_p > 0.f && p.top_p <= 1.f, "top-p must be in (0, 1] (got {})", p.top_p);
  check(p.min_p >= 0.f && p.min_p <= 1.f, "min-p must be in [0, 1] (got {})", p.min_p);
  check(p.repeat_penalty > 0.f && std::isfinite(p.repeat_penalty),
        "repeat penalty must be > 0 (got {}; 1 = off)", p.repeat_penalty);
  check(std::isfinite(p.presence_penalty) && std::isfinite(p.frequency_penalty),
        "presence and frequency penalties must be finite numbers");
  check(p.repeat_last_n >= -1, "repeat-last-n must be >= -1 (got {})", p.repeat_last_n);
  for (size_t i = 0; i < p.logit_bias.size(); ++i) {
    const auto [id, bias] = p.logit_bias[i];
    check(id >= 0 && (vocab_size == 0 || id < vocab_size),
          "logit bias: token id {} is outside the vocabulary (0..{})", id, vocab_size - 1);
    check(!std::isnan(bias) && bias != INFINITY, "logit bias of token {}: {} is not allowed", id,
          bias);
    for (size_t j = 0; j < i; ++j)
      check(p.logit_bias[j].first != id, "logit bias: token {} is given twice", id);
  }
}

Sampler::Sampler(const SamplerParams& p) : p_(p), rng_(p.seed ? p.seed : std::random_device{}()) {
  validate_sampler_params(p_);
}

bool Sampler::adjusts() const {
  const bool penalize =
      p_.repeat_last_n != 0 &&
      (p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.f || p_.frequency_penalty != 0.f);
  return penalize || !p_.logit_bias.empty();
}

void Sampler::apply_bias_and_penalties(std::span<const float> logits,
                                       std::span<const int32_t> history) {
  const size_t vocab = logits.size();
  for (const auto& [id, bias] : p_.logit_bias)
    if (size_t(id) < vocab) cand_[size_t(id)].first += bias;
  if (p_.repeat_last_n == 0) return;
  const size_t n =
      p_.repeat_last_n < 0 ? history.size() : std::min(history.size(), size_t(p_.repeat_last_n));
  if (n == 0) return;
  if (counts_.size() < vocab) counts_.assign(vocab, 0);
  for (size_t i = history.size() - n; i < history.size(); ++i) {
    const int32_t t = history[i];
    if (t < 0 || size_t(t) >= vocab) continue;
    if (counts_[size_t(t)]++ == 0) touched_.push_back(t);
  }
  for (const int32_t t : touched_) {
    float& l = cand_[size_t(t)].first;
    if (p_.repeat_penalty != 1.0f) l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
    l -= float(counts_[size_t(t)]) * p_.frequency_penalty + p_.presence_penalty;
    counts_[size_t(t)] = 0;
  }
  touched_.clear();
}

void Sampler::adjust(std::span<const float> logits, std::span<const int32_t> history,
                     std::vector<float>* out) {
  cand_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cand_[i] = {logits[i], int32_t(i)};
  apply_bias_and_penalties(logits, history);
  out->resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) (*out)[i] = cand_[i].first;
}

std::span<const TokenProb> Sampler::distribution(std::span<const float> logits,
                                                 std::span<const int32_t> history) {
  check(!logits.empty(), "internal: sampling from no logits");
  dist_.clear();
  if (greedy() && !adjusts()) {
    dist_.push_back({1.f, argmax(logits)});
    return dist_;
  }
  cand_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cand_[i] = {logits[i], int32_t(i)};
  apply_bias_and_penalties(logits, history);
  if (greedy()) {
    // First maximum wins, as argmax().
    const auto best = std::max_element(cand_.begin(), cand_.end(),
                                       [](auto& a, auto& b) { return a.first < b.first; });
    dist_.push_back({1.f, best->second});
    return dist_;
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
  // Banned tokens (bias -inf) never take part, whatever the filters keep.
  while (keep > 1 && cand_[keep - 1].first == -INFINITY) --keep;
  cand_.resize(keep);
  check(cand_[0].first > -INFINITY, "every token is banned by the logit bias");
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
  for (auto& c : cand_)
    if (c.first > 0.f) dist_.push_back({float(c.first / total), c.second});
  return dist_;
}

int32_t Sampler::draw(std::span<const TokenProb> d) {
  check(!d.empty(), "internal: drawing from an empty distribution");
  if (d.size() == 1) return d[0].id;
  double total = 0;
  for (const auto& c : d) total += c.p;
  std::uniform_real_distribution<double> u(0.0, total);
  double r = u(rng_);
  for (const auto& c : d) {
    r -= c.p;
    if (r <= 0) return c.id;
  }
  return d.back().id;
}

double Sampler::uniform() {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, int32_t top_n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (const float x : logits) mx = std::max(mx, x);
  double sum = 0;
  for (const float x : logits) sum += std::exp(double(x) - mx);
  const float lse = mx + float(std::log(sum));
  TokenLogprob t;
  t.id = chosen;
  t.logprob = chosen >= 0 && size_t(chosen) < logits.size()
                  ? logits[size_t(chosen)] - lse
                  : -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), size_t(std::max(0, top_n)));
  if (n == 0) return t;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  const auto more_likely = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] ||
           (logits[size_t(a)] == logits[size_t(b)] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + long(n), ids.end(), more_likely);
  for (size_t i = 0; i < n; ++i) t.top.emplace_back(ids[i], logits[size_t(ids[i])] - lse);
  return t;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  return draw(distribution(logits, history));
}

}  // namespace edgevl
