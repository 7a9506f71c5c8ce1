#pragma once
// Next-token selection, one definition shared by the CLI, the server and the C API (and the
// speculative verifier, which needs the distribution itself, not just a draw).
//
// Order, per step (logits of the whole vocabulary in):
//   1. logit bias: bias[t] added to token t's logit (OpenAI's `logit_bias`; -inf bans it);
//   2. penalties over the last `repeat_last_n` tokens of the context (prompt included, as
//      llama.cpp does; -1 = the whole context): the repetition penalty (CTRL, as transformers
//      and llama.cpp: positive logits divided, negative ones multiplied, once per distinct
//      token), then OpenAI's presence and frequency penalties,
//      logit[t] -= count[t] * frequency_penalty + (count[t] > 0) * presence_penalty;
//   3. temperature <= 0: the argmax of the adjusted logits (greedy; steps 4-6 are skipped);
//   4. top-k on the logits, then softmax at the temperature (as transformers' warpers);
//   5. min-p: drop tokens below min_p * the top probability; top-p: the smallest head of the
//      sorted list whose mass reaches top_p;
//   6. renormalise and draw with the seeded generator.
// Scratch buffers are kept between calls so sampling allocates nothing per token after the
// first.
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace edgevl {

struct SamplerParams {
  float temperature = 0.8f;        // <= 0: greedy
  int32_t top_k = 40;              // <= 0: off
  float top_p = 0.95f;             // >= 1: off
  float min_p = 0.05f;             // <= 0: off
  float repeat_penalty = 1.0f;     // 1: off
  float presence_penalty = 0.0f;   // 0: off (OpenAI: -2..2)
  float frequency_penalty = 0.0f;  // 0: off (OpenAI: -2..2)
  int32_t repeat_last_n = 64;      // the penalties' window; -1: whole context, 0: penalties off
  // (token, bias) added to the logits; a token may appear once. -inf bans it.
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint64_t seed = 0;  // 0: random seed
};

// One token of a distribution: probability and id.
struct TokenProb {
  float p;
  int32_t id;
};

// The log-probability of a generated token, and of the most likely tokens at its step.
struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // (id, logprob), most likely first
};

// log softmax(logits)[chosen] and the `top_n` largest entries (ties: lower id first). The
// logits at temperature 1: those the sampler's filters start from.
TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, int32_t top_n);

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p);
  // `history` is the context so far (for the penalties). Equals draw(distribution(...)).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  // The distribution sample() draws from: the tokens with probability > 0, most likely first,
  // summing to 1. Greedy: the argmax alone with probability 1. Valid until the next call.
  std::span<const TokenProb> distribution(std::span<const float> logits,
                                          std::span<const int32_t> history);
  // A draw from a distribution (need not be normalised) with this sampler's generator.
  int32_t draw(std::span<const TokenProb> d);
  // A uniform number in [0, 1) from the same generator (speculative acceptance tests).
  double uniform();
  bool greedy() const { return p_.temperature <= 0.f; }
  const SamplerParams& params() const { return p_; }

  // Steps 1-2 alone: the logits the filters start from (tests; the server's logprobs later).
  void adjust(std::span<const float> logits, std::span<const int32_t> history,
              std::vector<float>* out);

 private:
  // Applies steps 1-2 to cand_ (indexed by token id before any sorting).
  void apply_bias_and_penalties(std::span<const float> logits, std::span<const int32_t> history);
  bool adjusts() const;

  SamplerParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
  std::vector<TokenProb> dist_;
  std::vector<int32_t> counts_;   // per token id, zero between calls
  std::vector<int32_t> touched_;  // ids whose count is non-zero during a call
};

// Greedy's pick: the first largest logit (as torch.argmax), NaNs skipped (cpu::argmax).
int32_t argmax(std::span<const float> logits);

// Checks the parameters (ranges, logit_bias ids against the vocabulary); throws a clear
// message naming the parameter. vocab_size 0: ids are not checked.
void validate_sampler_params(const SamplerParams& p, int32_t vocab_size = 0);

}  // namespace edgevl
