// Speculative decoding: the multi-row verification pass against plain decode steps, greedy
// output identical to plain greedy on every golden model (and stories260K's 200 tokens), and
// the acceptance rule keeping the sampler's distribution (chi-square over seeded trials, with
// a control showing the test rejects the draft's own distribution).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>

#include "core/error.h"
#include "core/mapped_file.h"
#include "runtime/decoding/generate.h"
#include "runtime/decoding/speculative.h"
#include "runtime/decoding/token_loop.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

using test::fixtures_dir;

double chi2_critical(int df) {  // significance 1e-4 (Wilson-Hilferty)
  const double z = 3.719, a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

// Pearson's statistic over the cells with an expected count >= 5 (the rest pooled).
double chi2(const std::map<int64_t, int>& counts, const std::map<int64_t, double>& expected, int n,
            int* df) {
  double x = 0, pooled_e = 0;
  int pooled_c = 0, cells = 0;
  for (const auto& [key, p] : expected) {
    const auto it = counts.find(key);
    const int c = it == counts.end() ? 0 : it->second;
    if (p * n < 5) {
      pooled_e += p * n;
      pooled_c += c;
      continue;
    }
    x += (c - p * n) * (c - p * n) / (p * n);
    ++cells;
  }
  for (const auto& [key, c] : counts)
    if (!expected.count(key)) pooled_c += c;  // a cell of probability 0 counts against it
  if (pooled_e > 0) {
    x += (pooled_c - pooled_e) * (pooled_c - pooled_e) / pooled_e;
    ++cells;
  } else if (pooled_c > 0) {
    x += 1e9;
  }
  *df = cells - 1;
  return x;
}

TEST(Speculative, LookupFindsTheLatestLongestMatch) {
  std::vector<int32_t> out;
  // Suffix "7 8" occurs at 1 and at 5; the latest (5) proposes what followed, up to k.
  EXPECT_EQ(lookup_draft(std::vector<int32_t>{1, 7, 8, 3, 5, 7, 8, 9, 4, 7, 8}, 3, 4, &out), 4);
  EXPECT_EQ(out, (std::vector<int32_t>{9, 4, 7, 8}));
  EXPECT_EQ(lookup_draft(std::vector<int32_t>{1, 7, 8, 3, 5, 7, 8, 9, 4, 7, 8}, 3, 2, &out), 2);
  EXPECT_EQ(out, (std::vector<int32_t>{9, 4}));
  // A longer match beats a later shorter one: "2 3" matches at 0, "3" alone later at 4.
  EXPECT_EQ(lookup_draft(std::vector<int32_t>{2, 3, 6, 6, 3, 1, 2, 3}, 2, 2, &out), 2);
  EXPECT_EQ(out, (std::vector<int32_t>{6, 6}));
  EXPECT_EQ(lookup_draft(std::vector<int32_t>{1, 2, 3}, 3, 4, &out), 0);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(lookup_draft(std::vector<int32_t>{5, 1, 5}, 2, 8, &out), 2);  // up to the end
  EXPECT_EQ(out, (std::vector<int32_t>{1, 5}));
}

// The rule alone: draws of d ~ q, then accept / resample, must follow p exactly.
TEST(Speculative, AcceptanceRuleKeepsTheTargetDistribution) {
  const std::vector<TokenProb> p = {{0.4f, 0}, {0.25f, 1}, {0.2f, 2}, {0.1f, 3}, {0.05f, 4}};
  const std::vector<TokenProb> q = {{0.05f, 0}, {0.15f, 1}, {0.5f, 2}, {0.1f, 3}, {0.2f, 5}};
  SamplerParams sp;
  sp.seed = 3;
  Sampler s(sp);
  std::vector<float> scratch(8, 0.f);
  const int n = 60000;
  std::map<int64_t, int> got, raw;
  int accepted = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t d = s.draw(q);
    ++raw[d];
    const SpecVerdict v = speculative_accept(p, q, d, s, &scratch);
    accepted += v.accepted;
    ++got[v.token];
  }
  for (float x : scratch) ASSERT_EQ(x, 0.f);
  std::map<int64_t, double> want;
  for (const auto& t : p) want[t.id] = t.p;
  int df = 0;
  const double x = chi2(got, want, n, &df);
  EXPECT_LT(x, chi2_critical(df)) << "chi2 " << x << " df " << df;
  EXPECT_GT(chi2(raw, want, n, &df), chi2_critical(df)) << "control: q itself must fail";
  // Expected acceptance: sum min(p, q) = 0.05 + 0.15 + 0.2 + 0.1 = 0.5.
  EXPECT_NEAR(double(accepted) / n, 0.5, 0.01);
  // A certain draft (lookup): accepted with probability p(d), else a draw from p without d.
  std::map<int64_t, int> fixed;
  for (int i = 0; i < n; ++i) ++fixed[speculative_accept(p, {}, 2, s, &scratch).token];
  EXPECT_LT(chi2(fixed, want, n, &df), chi2_critical(df));
}

// Golden checkpoints and the quantizations whose batched path is bit-exact.
struct Case {
  std::string model, quant;
};

class SpeculativeGreedy : public ::testing::TestWithParam<Case> {};

GenerateResult greedy(const Model& m, const std::vector<int32_t>& prompt, int n,
                      SpeculativeOptions spec = {}) {
  Session s(m, SessionOptions{2, 0});
  GenerateOptions o;
  o.n_predict = n;
  o.sampling.temperature = 0;
  o.ignore_eos = true;
  o.speculative = spec;
  GenerateResult r = generate(s, prompt, o);
  // The KV cache holds the prompt and a prefix of the output, never rolled-back rows.
  EXPECT_LE(s.n_past(), int32_t(prompt.size() + r.tokens.size()));
  return r;
}

TEST_P(SpeculativeGreedy, SameTokensAsPlainGreedy) {
  const Case& c = GetParam();
  const auto dir = fixtures_dir() / "golden" / c.model;
  const Model& m = test::compiled_model(dir, c.quant);
  const auto g = nlohmann::json::parse(read_text_file(dir / "golden.json"))["greedy"];
  std::vector<int32_t> prompt = g["prompt_ids"];
  // Repeat the prompt so that lookup has something to find from the start.
  prompt.insert(prompt.end(), prompt.begin() + 1, prompt.end());
  const int n = 48;
  const GenerateResult plain = greedy(m, prompt, n);
  if (c.quant == "f32") {  // the fixture's tokens from transformers, for the unrepeated prompt
    const std::vector<int32_t> once = g["prompt_ids"], want = g["tokens"];
    EXPECT_EQ(greedy(m, once, int(want.size()), {2, nullptr, 4}).tokens, want);
  }
  int32_t replays = 0;
  for (const int k : {1, 4, 7, 12}) {  // 12 drafts: 13 rows, the prefill-graph path
    const GenerateResult r = greedy(m, prompt, n, {3, nullptr, k});
    EXPECT_EQ(r.tokens, plain.tokens) << c.model << "/" << c.quant << " lookup k=" << k;
    EXPECT_GT(r.spec_drafted, 0) << "lookup never proposed anything";
    replays += r.spec_replays;
  }
  // A model with recurrent state rewinds and replays after a rejection (and only such a model).
  if (Session(m, SessionOptions{1, 0}).has_recurrent_state())
    EXPECT_GT(replays, 0) << "no rejection exercised the rewind";
  else
    EXPECT_EQ(replays, 0);
  // A draft model with the same tokenizer: the same checkpoint at another quantization.
  const Model& dm = test::compiled_model(dir, "w4a8");
  DraftModel draft(dm, m, SessionOptions{2, 0});
  for (const int k : {3, 9}) {
    const GenerateResult r = greedy(m, prompt, n, {0, &draft, k});
    EXPECT_EQ(r.tokens, plain.tokens) << c.model << "/" << c.quant << " draft k=" << k;
    EXPECT_GT(r.spec_accepted, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, SpeculativeGreedy,
                         ::testing::Values(Case{"qwen2", "f32"}, Case{"llama", "f32"},
                                           Case{"internlm2", "f32"}, Case{"qwen2", "w8a8"},
                                           Case{"llama", "w4a8"}, Case{"internlm2", "w8a8"},
                                           // recurrent state: rewound and replayed on rejection
                                           Case{"qwen35", "f32"}, Case{"qwen35", "w8a8"}),
                         [](const auto& info) {
                           return info.param.model + "_" + info.param.quant;
                         });

// The real trained model: llama2.c's 200 greedy tokens, with lookup and with a draft.
TEST(SpeculativeStories, GreedyMatchesLlama2c) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  const auto g = nlohmann::json::parse(read_text_file(dir / "golden_greedy.json"));
  const std::vector<int32_t> want = g["greedy_ids"];
  for (const std::string quant : {"f32", "w8a8"}) {
    const Model& m = test::compiled_model(dir, quant);
    const std::vector<int32_t> bos = {m.tokenizer().bos_id()};
    const GenerateResult plain = greedy(m, bos, int(want.size()));
    if (quant == "f32") {
      EXPECT_EQ(plain.tokens, want);
    }
    for (const int k : {4, 8, 16}) {
      const GenerateResult r = greedy(m, bos, int(want.size()), {2, nullptr, k});
      EXPECT_EQ(r.tokens, plain.tokens) << quant << " lookup k=" << k;
    }
    const Model& dm = test::compiled_model(dir, "w4a8");
    DraftModel draft(dm, m, SessionOptions{2, 0});
    const GenerateResult r = greedy(m, bos, int(want.size()), {0, &draft, 6});
    EXPECT_EQ(r.tokens, plain.tokens) << quant << " draft";
    std::printf("[ spec     ] stories260k %s greedy, w4a8 draft k=6: %d of %d accepted\n",
                quant.c_str(), r.spec_accepted, r.spec_drafted);
  }
}

// Verification rows equal plain decode steps: bit for bit on the batched path with Q8
// matrices, to rounding on the prefill path.
TEST(SpeculativeVerify, RowsMatchDecodeSteps) {
  const Model& m = test::compiled_model(fixtures_dir() / "golden" / "qwen2", "w8a8");
  const std::vector<int32_t> prompt = {1, 17, 99, 250, 3, 77}, rows = {5, 400, 12, 88, 301};
  const size_t vocab = size_t(m.config().vocab_size);
  Session ref(m, SessionOptions{2, 0});
  ref.eval_tokens(prompt);
  std::vector<float> want;
  for (int32_t t : rows) {
    const auto l = ref.eval_tokens(std::span<const int32_t>(&t, 1));
    want.insert(want.end(), l.begin(), l.end());
  }
  for (const VerifyPath path : {VerifyPath::Batch, VerifyPath::Prefill}) {
    Session s(m, SessionOptions{2, 0});
    s.eval_tokens(prompt);
    std::vector<float> got(rows.size() * vocab);
    s.engine().verify(s, rows, got.data(), path);
    EXPECT_EQ(s.n_past(), int32_t(prompt.size() + rows.size()));
    double worst = 0, top = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, double(std::fabs(got[i] - want[i])));
      top = std::max(top, double(std::fabs(want[i])));
    }
    if (path == VerifyPath::Batch)
      EXPECT_EQ(worst, 0.0) << "batched verification must be bit-identical at w8a8";
    else
      EXPECT_LT(worst, 2e-2 * top) << "prefill-path verification";
    // Rolled back and verified again: same logits (the KV rows are rewritten).
    s.truncate(int32_t(prompt.size()) + 1);
    std::vector<float> again((rows.size() - 1) * vocab);
    s.engine().verify(s, std::span<const int32_t>(rows).subspan(1), again.data(), path);
    for (size_t i = 0; i < again.size(); ++i) {
      if (path == VerifyPath::Batch)
        ASSERT_EQ(again[i], got[vocab + i]) << i;
      else  // another row count: the prefill kernels' rounding may differ
        ASSERT_NEAR(again[i], got[vocab + i], 1e-3 * top) << i;
    }
  }
  Session full(m, SessionOptions{2, 8});
  full.eval_tokens(prompt);
  std::vector<float> out(rows.size() * vocab);
  EXPECT_THROW(full.engine().verify(full, rows, out.data()), ContextFullError);
  EXPECT_EQ(full.n_past(), int32_t(prompt.size()));
}

// More rows than the batch width: the default path still gives every row a decode step's bits
// (several batch passes), which keeps greedy speculation exact at any k.
TEST(SpeculativeVerify, RowsPastTheBatchWidthStayBitIdentical) {
  const Model& m = test::compiled_model(fixtures_dir() / "golden" / "qwen2", "w8a8");
  const std::vector<int32_t> prompt = {1, 17, 99};
  Session ref(m, SessionOptions{2, 0});
  ASSERT_GT(ref.engine().max_batch(), 1);
  std::vector<int32_t> rows;
  for (int i = 0; i < ref.engine().max_batch() + 3; ++i) rows.push_back(int32_t(7 + 13 * i));
  const size_t vocab = size_t(m.config().vocab_size);
  ref.eval_tokens(prompt);
  std::vector<float> want;
  for (int32_t t : rows) {
    const auto l = ref.eval_tokens(std::span<const int32_t>(&t, 1));
    want.insert(want.end(), l.begin(), l.end());
  }
  Session s(m, SessionOptions{2, 0});
  s.eval_tokens(prompt);
  std::vector<float> got(rows.size() * vocab);
  s.engine().verify(s, rows, got.data());
  EXPECT_EQ(s.n_past(), int32_t(prompt.size() + rows.size()));
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "row " << i / vocab;
}

// Sampling at temperature > 0: the first two tokens of many seeded speculative generations
// follow the target's joint distribution p(t1) p(t2 | t1), computed exactly from plain steps.
// Drafts come from a draft model at a higher temperature (q far from p: many rejections and
// residual draws) and from lookup; the draft's own proposals must fail the same test.
TEST(SpeculativeSampling, KeepsTheTargetDistribution) {
  const auto dir = fixtures_dir() / "golden" / "llama";
  const Model& m = test::compiled_model(dir, "f32");
  const Model& dm = test::compiled_model(dir, "w4a8");
  SamplerParams sp;
  sp.temperature = 0.7f;
  sp.top_k = 6;
  sp.top_p = 1;
  sp.min_p = 0;
  sp.repeat_penalty = 1.3f;  // the penalties see the drafted tokens as history
  sp.repeat_last_n = 4;      // (a short window: the repeated text stays likely)
  // A prompt "BOS T U <text>" where T is (nearly) the model's likeliest next token after it:
  // lookup then proposes what followed T. Searched by iterating towards a fixed point.
  std::vector<int32_t> prompt;
  {
    Session g0(m, SessionOptions{1, 0});
    int32_t t = 10, u = 11;
    for (int it = 0; it < 16; ++it) {
      prompt = {1, t, u};
      for (int32_t i = 0; i < 40; ++i) prompt.push_back(2 + (i * 263) % 509);
      g0.reset();
      const int32_t t2 = argmax(g0.eval_tokens(prompt));
      const int32_t u2 = argmax(g0.eval_tokens(std::span<const int32_t>(&t2, 1)));
      if (t2 == t && u2 == u) break;
      t = t2;
      u = u2;
    }
  }
  // Exact joint distribution from plain decode steps.
  std::map<int64_t, double> want;
  {
    Session s(m, SessionOptions{2, 0});
    Sampler sampler(sp);
    std::vector<int32_t> hist = prompt;
    const auto l0 = s.eval_tokens(prompt);
    const auto d0 = sampler.distribution(l0, hist);
    const std::vector<TokenProb> p1(d0.begin(), d0.end());
    for (const auto& a : p1) {
      s.truncate(int32_t(prompt.size()));
      hist = prompt;
      hist.push_back(a.id);
      const auto l1 = s.eval_tokens(std::span<const int32_t>(&a.id, 1));
      for (const auto& b : sampler.distribution(l1, hist))
        want[int64_t(a.id) * 1000 + b.id] = double(a.p) * b.p;
    }
  }
  const int n = 3000;
  DraftModel draft(dm, m, SessionOptions{2, 0});
  draft.set_temperature(2.5f);
  // One session: each trial keeps the prompt but its last token (evaluated again).
  const int32_t keep = int32_t(prompt.size()) - 1;
  Session s(m, SessionOptions{1, 0});
  s.eval_tokens(std::span<const int32_t>(prompt).first(size_t(keep)));
  for (const bool use_draft : {true, false}) {
    std::map<int64_t, int> got;
    int drafted = 0, accepted = 0;
    for (int i = 0; i < n; ++i) {
      s.truncate(keep);
      GenerateOptions o;
      o.n_predict = 3;
      o.ignore_eos = true;
      o.sampling = sp;
      o.sampling.seed = uint64_t(1000 + i);
      o.speculative = {use_draft ? 0 : 2, use_draft ? &draft : nullptr, 4};
      const GenerateResult r = generate(s, prompt, o, {}, nullptr, keep);
      ASSERT_EQ(r.tokens.size(), 3u);
      ++got[int64_t(r.tokens[0]) * 1000 + r.tokens[1]];
      drafted += r.spec_drafted;
      accepted += r.spec_accepted;
    }
    int df = 0;
    const double x = chi2(got, want, n, &df);
    std::printf("[ spec     ] %s drafts: chi2 %.1f (df %d, critical %.1f), %d of %d accepted\n",
                use_draft ? "draft-model" : "lookup", x, df, chi2_critical(df), accepted, drafted);
    EXPECT_LT(x, chi2_critical(df)) << (use_draft ? "draft model" : "lookup");
    // Lookup drafts here are mostly unlikely tokens (rejections: draws from p without d); the
    // accepting side of a certain draft is checked by AcceptanceRuleKeepsTheTargetDistribution.
    EXPECT_GT(drafted, use_draft ? n / 2 : 50);
    if (use_draft) {
      EXPECT_GT(accepted, n / 10);
    }
    EXPECT_LT(accepted, drafted);  // rejections happened: the residual draws were exercised
  }
  // Control: the draft's own first two tokens (q) do not pass as p.
  std::map<int64_t, int> q_draws;
  SamplerParams dp = sp;
  DraftModel d2(dm, m, SessionOptions{1, 0});
  d2.set_temperature(2.5f);
  for (int i = 0; i < n; ++i) {
    dp.seed = uint64_t(5000 + i);
    Sampler sampler(dp);
    std::vector<int32_t> toks;
    std::vector<std::vector<TokenProb>> q;
    d2.propose(prompt, 2, sampler, &toks, &q);
    ASSERT_EQ(toks.size(), 2u);
    ++q_draws[int64_t(toks[0]) * 1000 + toks[1]];
  }
  int df = 0;
  const double xq = chi2(q_draws, want, n, &df);
  EXPECT_GT(xq, chi2_critical(std::max(df, 1))) << "the test cannot tell q from p";
}

TEST(SpeculativeDraft, RefusesAnotherTokenizer) {
  const Model& a = test::compiled_model(fixtures_dir() / "golden" / "llama", "f32");
  const Model& b = test::compiled_model(fixtures_dir() / "golden" / "qwen2", "f32");
  try {
    DraftModel d(b, a, SessionOptions{1, 0});
    FAIL() << "a draft with another tokenizer was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(a.file().path()), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.file().path()), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace edgevl
