// The sampler, feature by feature: exact checks of what each step does to the logits or the
// kept set, and seeded statistical checks (chi-square) of the draws.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "core/error.h"
#include "runtime/decoding/generate.h"
#include "runtime/decoding/sampler.h"
#include "runtime/decoding/token_loop.h"
#include "runtime/execution/session.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

SamplerParams plain(float temp) {
  SamplerParams p;
  p.temperature = temp;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  p.seed = 42;
  return p;
}

std::vector<double> softmax(const std::vector<float>& l, double t) {
  double m = -1e30, s = 0;
  for (float x : l) m = std::max(m, double(x));
  std::vector<double> p(l.size());
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp((l[i] - m) / t);
  for (auto& x : p) x /= s;
  return p;
}

// Chi-square critical value at significance 1e-4 (Wilson-Hilferty).
double chi2_critical(int df) {
  const double z = 3.719, a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

// Pearson's statistic of `n` draws against `expected` probabilities (all > 0).
double chi2(const std::vector<int>& counts, const std::vector<double>& expected, int n) {
  double x = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * n;
    if (e == 0) {
      if (counts[i] > 0) return 1e30;
      continue;
    }
    x += (counts[i] - e) * (counts[i] - e) / e;
  }
  return x;
}

const std::vector<float> kLogits = {2.0f, 1.5f, 1.0f, 0.3f, -0.5f, -1.0f, -2.0f, 0.9f};

std::vector<int> draw_counts(Sampler& s, int n, std::span<const int32_t> hist = {}) {
  std::vector<int> c(kLogits.size(), 0);
  for (int i = 0; i < n; ++i) ++c[size_t(s.sample(kLogits, hist))];
  return c;
}

TEST(Sampler, GreedyIsArgmax) {
  Sampler s(plain(0));
  EXPECT_EQ(s.sample(kLogits, {}), 0);
  const auto d = s.distribution(kLogits, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, 0);
  EXPECT_EQ(d[0].p, 1.f);
}

TEST(Sampler, TemperatureDrawsFollowSoftmax) {
  for (const float t : {0.5f, 1.0f, 2.0f}) {
    Sampler s(plain(t));
    const int n = 40000;
    const auto c = draw_counts(s, n);
    const double x = chi2(c, softmax(kLogits, t), n);
    EXPECT_LT(x, chi2_critical(int(kLogits.size()) - 1)) << "temperature " << t;
    // A wrong temperature is detected: these draws do not fit T = 1 when T != 1.
    if (t != 1.0f) {
      EXPECT_GT(chi2(c, softmax(kLogits, 1.0), n), chi2_critical(7)) << t;
    }
  }
}

TEST(Sampler, TopKKeepsTheKLargest) {
  SamplerParams p = plain(1);
  p.top_k = 3;
  Sampler s(p);
  const auto d = s.distribution(kLogits, {});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].id, 0);
  EXPECT_EQ(d[1].id, 1);
  EXPECT_EQ(d[2].id, 2);
  // Renormalised softmax of the three.
  const auto ref = softmax({2.0f, 1.5f, 1.0f}, 1);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(d[size_t(i)].p, ref[size_t(i)], 1e-6);
  const int n = 20000;
  const auto c = draw_counts(s, n);
  for (size_t i = 3; i < c.size(); ++i) EXPECT_EQ(c[i], 0) << "token " << i;
  EXPECT_LT(chi2({c[0], c[1], c[2]}, ref, n), chi2_critical(2));
}

TEST(Sampler, TopPKeepsTheSmallestHeadReachingP) {
  const auto full = softmax(kLogits, 1);  // sorted ids: 0 1 2 7 3 4 5 6
  SamplerParams p = plain(1);
  p.top_p = float(full[0] + full[1] + 0.01);  // needs a third token
  Sampler s(p);
  auto d = s.distribution(kLogits, {});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[2].id, 2);
  p.top_p = float(full[0] + full[1] - 0.01);  // two are enough
  Sampler s2(p);
  d = s2.distribution(kLogits, {});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d[0].p, full[0] / (full[0] + full[1]), 1e-6);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheTop) {
  const auto full = softmax(kLogits, 1);
  SamplerParams p = plain(1);
  p.min_p = float(full[7] / full[0]) - 1e-4f;  // token 7 (logit 0.9) just kept, 3 (0.3) not
  Sampler s(p);
  const auto d = s.distribution(kLogits, {});
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[3].id, 7);
}

TEST(Sampler, SeedMakesDrawsReproducible) {
  SamplerParams p = plain(1.5f);
  p.seed = 7;
  Sampler a(p), b(p);
  p.seed = 8;
  Sampler c(p);
  std::vector<int32_t> da, db, dc;
  for (int i = 0; i < 200; ++i) {
    da.push_back(a.sample(kLogits, {}));
    db.push_back(b.sample(kLogits, {}));
    dc.push_back(c.sample(kLogits, {}));
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOnce) {
  SamplerParams p = plain(1);
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 3;
  Sampler s(p);
  // Token 0 twice (penalised once), 4 (negative), 1 outside the window of 3.
  const std::vector<int32_t> hist = {1, 0, 4, 0};
  std::vector<float> out;
  s.adjust(kLogits, hist, &out);
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[4], -1.0f);
  EXPECT_FLOAT_EQ(out[1], 1.5f);
  EXPECT_FLOAT_EQ(out[2], 1.0f);
  // Greedy sees it too: token 0 falls behind token 1.
  p.temperature = 0;
  Sampler g(p);
  EXPECT_EQ(g.sample(kLogits, hist), 1);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesAsOpenAIDefinesThem) {
  SamplerParams p = plain(1);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.repeat_last_n = -1;  // whole context
  Sampler s(p);
  const std::vector<int32_t> hist = {2, 2, 2, 5, 1};
  std::vector<float> out;
  s.adjust(kLogits, hist, &out);
  EXPECT_FLOAT_EQ(out[2], 1.0f - 3 * 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(out[5], -1.0f - 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(out[1], 1.5f - 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(out[0], 2.0f);
  // A window of 2 sees only {5, 1}.
  p.repeat_last_n = 2;
  Sampler w(p);
  w.adjust(kLogits, hist, &out);
  EXPECT_FLOAT_EQ(out[2], 1.0f);
  EXPECT_FLOAT_EQ(out[5], -1.75f);
  // Negative values reward repetition (OpenAI allows -2..2).
  p.presence_penalty = -1.0f;
  p.frequency_penalty = 0;
  Sampler neg(p);
  neg.adjust(kLogits, hist, &out);
  EXPECT_FLOAT_EQ(out[1], 2.5f);
}

TEST(Sampler, LogitBiasShiftsAndBans) {
  SamplerParams p = plain(0);
  p.logit_bias = {{3, 5.0f}};
  Sampler s(p);
  EXPECT_EQ(s.sample(kLogits, {}), 3);  // 0.3 + 5 beats 2.0
  p.logit_bias = {{0, -INFINITY}, {1, -INFINITY}};
  Sampler ban(p);
  EXPECT_EQ(ban.sample(kLogits, {}), 2);
  // Banned tokens never appear in draws either.
  p.temperature = 3;
  Sampler hot(p);
  const auto c = draw_counts(hot, 5000);
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[1], 0);
  EXPECT_GT(c[6], 0);
  // Statistically: the shifted logits' softmax.
  p.temperature = 1;
  p.logit_bias = {{6, 3.0f}};
  Sampler shifted(p);
  std::vector<float> l = kLogits;
  l[6] += 3.0f;
  EXPECT_LT(chi2(draw_counts(shifted, 30000), softmax(l, 1), 30000), chi2_critical(7));
}

TEST(Sampler, BadParametersAreRefused) {
  SamplerParams p = plain(1);
  p.logit_bias = {{600, 1.0f}};
  try {
    validate_sampler_params(p, 512);
    FAIL() << "accepted a token outside the vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("600"), std::string::npos) << e.what();
  }
  p.logit_bias = {{1, 1.0f}, {1, 2.0f}};
  EXPECT_THROW(validate_sampler_params(p, 512), Error);
  p = plain(1);
  p.top_p = 0;
  EXPECT_THROW(validate_sampler_params(p), Error);
  p = plain(1);
  p.repeat_penalty = 0;
  EXPECT_THROW(validate_sampler_params(p), Error);
  p = plain(1);
  p.logit_bias = {{0, -INFINITY}, {1, -INFINITY}};
  p.top_k = 2;
  Sampler s(p);
  EXPECT_THROW(s.sample(std::vector<float>{1, 2}, {}), Error);  // every token banned
}

// Stop strings end the generation and never reach the output, also when spanning tokens.
TEST(Sampler, StopStringsCutTheOutput) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  const Model& m = test::compiled_model(dir, "f32");
  Session s(m, SessionOptions{2, 0});
  GenerateOptions o;
  o.n_predict = 64;
  o.sampling = plain(0);
  const std::vector<int32_t> bos = {m.tokenizer().bos_id()};
  const GenerateResult full = generate(s, bos, o);
  ASSERT_GT(full.text.size(), 20u);
  // A stop string from the middle of the greedy text: the output ends right before it.
  const std::string stop = full.text.substr(12, 5);
  o.stop_strings = {stop};
  s.reset();
  std::string streamed;
  const GenerateResult cut =
      generate(s, bos, o, [&](std::string_view t) { streamed += std::string(t); });
  EXPECT_EQ(cut.stop, StopReason::StopString);
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_EQ(streamed, cut.text);
}

// log softmax of the chosen token, the top entries most likely first (ties: lower id first),
// a top count past the vocabulary clamped.
TEST(Sampler, TokenLogprobIsTheLogSoftmax) {
  const std::vector<float> logits = {1.f, 3.f, 2.f, 3.f, -std::numeric_limits<float>::infinity()};
  double sum = 0;
  for (const float x : logits) sum += std::exp(double(x));
  const double lse = std::log(sum);
  const TokenLogprob t = token_logprob(logits, 2, 3);
  EXPECT_EQ(t.id, 2);
  EXPECT_NEAR(t.logprob, 2 - lse, 1e-6);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].first, 1);
  EXPECT_EQ(t.top[1].first, 3);
  EXPECT_EQ(t.top[2].first, 2);
  EXPECT_NEAR(t.top[0].second, 3 - lse, 1e-6);
  EXPECT_EQ(token_logprob(logits, 4, 99).top.size(), logits.size());
  EXPECT_TRUE(std::isinf(token_logprob(logits, 4, 0).logprob));
  EXPECT_TRUE(token_logprob(logits, 0, 0).top.empty());
}

// A generation's logprobs: one per generated token, in order, of that token; under greedy the
// token heads its own list; a logit bias shows in them (they are of the adjusted logits).
TEST(Sampler, GenerationReportsLogprobsOfItsTokens) {
  const Model& m = test::compiled_model(test::fixtures_dir() / "golden" / "qwen2", "f32");
  Session s(m, SessionOptions{2, 0});
  GenerateOptions o;
  o.n_predict = 12;
  o.ignore_eos = true;
  o.sampling = plain(0);
  o.logprobs = 4;
  const std::vector<int32_t> prompt = m.tokenizer().encode("Hello, world");
  const GenerateResult r = generate(s, prompt, o);
  ASSERT_EQ(r.logprobs.size(), r.tokens.size());
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    EXPECT_EQ(r.logprobs[i].id, r.tokens[i]);
    ASSERT_EQ(r.logprobs[i].top.size(), 4u);
    EXPECT_EQ(r.logprobs[i].top[0].first, r.tokens[i]);
    EXPECT_FLOAT_EQ(r.logprobs[i].top[0].second, r.logprobs[i].logprob);
    EXPECT_LE(r.logprobs[i].logprob, 0.f);
  }
  // Banning the first token: it is absent from the first step's list.
  s.reset();
  o.sampling.logit_bias = {{r.tokens[0], -std::numeric_limits<float>::infinity()}};
  const GenerateResult b = generate(s, prompt, o);
  ASSERT_FALSE(b.logprobs.empty());
  EXPECT_NE(b.tokens[0], r.tokens[0]);
  for (const auto& [id, lp] : b.logprobs[0].top) EXPECT_NE(id, r.tokens[0]);
  // Off by default.
  s.reset();
  o.logprobs = -1;
  EXPECT_TRUE(generate(s, prompt, o).logprobs.empty());
}

}  // namespace
}  // namespace edgevl
