// Beam search (runtime/decoding/beam_search.h) against transformers' generate(num_beams=N, ...):
// the goldens of tools/golden/make_beam_goldens.py (tests/fixtures/golden/beam/), on the random
// qwen2 fixture and on the real stories260k (skipped without ../shared/data). Every one of the
// N hypotheses the reference keeps must come out with identical tokens and a score within 1e-4,
// at f32. Also: Session::copy_prefix_from (the reordering primitive) continues bit-identically,
// and N = 1 reproduces stories260k's published greedy story.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/chat/conversation.h"
#include "runtime/decoding/beam_search.h"
#include "runtime/execution/engine.h"
#include "runtime/execution/session.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  EXPECT_TRUE(f.good()) << p;
  return nlohmann::json::parse(f);
}

EarlyStopping early_stopping_of(const nlohmann::json& v) {
  if (v.is_string()) return parse_early_stopping(v.get<std::string>());
  return v.get<bool>() ? EarlyStopping::True : EarlyStopping::False;
}

void check_goldens(const std::filesystem::path& model_dir, const std::string& name) {
  const auto g = read_json(test::fixtures_dir() / "golden" / "beam" / (name + ".json"));
  const Model& m = test::compiled_model(model_dir, "f32");
  Engine engine(m, EngineOptions{2});
  const auto prompt = g["prompt_ids"].get<std::vector<int32_t>>();
  int checked = 0;
  int64_t copied = 0, whole = 0;
  for (const auto& c : g["cases"]) {
    BeamOptions o;
    o.num_beams = c["num_beams"].get<int32_t>();
    o.max_new_tokens = c["max_new_tokens"].get<int32_t>();
    o.length_penalty = c["length_penalty"].get<float>();
    o.early_stopping = early_stopping_of(c["early_stopping"]);
    o.eos_ids = c["eos_ids"].get<std::vector<int32_t>>();
    const std::string what =
        fmt::format("{} {} N={}", name, c["name"].get<std::string>(), o.num_beams);
    const BeamResult r = beam_search(engine, prompt, o);
    const auto& want = c["hypotheses"];
    ASSERT_EQ(r.hypotheses.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(r.hypotheses[i].finished) << what << " hypothesis " << i;
      EXPECT_EQ(r.hypotheses[i].tokens, want[i]["tokens"].get<std::vector<int32_t>>())
          << what << " hypothesis " << i;
      EXPECT_NEAR(r.hypotheses[i].score, want[i]["score"].get<double>(), 1e-4)
          << what << " hypothesis " << i;
    }
    copied += r.rows_copied;
    // What reordering by copying whole caches would move: every beam but one, every step.
    for (int32_t s = 1; s < r.steps; ++s)
      whole += int64_t(o.num_beams - 1) * (int64_t(prompt.size()) + s);
    ++checked;
  }
  EXPECT_EQ(checked, 22);
  // Prompt once per extra beam plus rows since divergence must stay well under whole caches.
  EXPECT_LT(copied, whole / 2) << name;
  std::printf(
      "[ beam     ] %s: %d cases matched; %lld KV rows copied (whole-cache reorder: %lld)\n",
      name.c_str(), checked, (long long)copied, (long long)whole);
}

TEST(BeamSearch, GoldenQwen2) {
  check_goldens(test::fixtures_dir() / "golden" / "qwen2", "qwen2");
}

TEST(BeamSearch, GoldenStories260k) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  check_goldens(dir, "stories260k");
}

// One beam keeps the argmax each step: llama2.c's published 200-token greedy story.
TEST(BeamSearch, OneBeamIsGreedyOnStories260k) {
  const auto dir = test::shared_data("stories260k");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("stories260k");
  const auto g = read_json(dir / "golden_greedy.json");
  const auto want = g["greedy_ids"].get<std::vector<int32_t>>();
  Engine engine(test::compiled_model(dir, "f32"), EngineOptions{2});
  BeamOptions o;
  o.num_beams = 1;
  o.max_new_tokens = int32_t(want.size());
  const BeamResult r = beam_search(engine, g["prompt_ids"].get<std::vector<int32_t>>(), o);
  ASSERT_EQ(r.hypotheses.size(), 1u);
  EXPECT_EQ(r.hypotheses[0].tokens, want);
  EXPECT_EQ(r.rows_copied, 0);
}

// copy_prefix_from: a session given another's first n positions (some already shared, `keep`)
// continues with bit-identical logits; claiming a shared prefix that is not shared must show.
void check_copy_prefix(const std::string& quant, const std::string& kv) {
  const Model& m = test::compiled_model(test::fixtures_dir() / "golden" / "qwen2", quant, kv);
  Engine engine(m, EngineOptions{2});
  Session a(engine), b(engine, SessionOptions{0, 64});  // different capacities
  const std::vector<int32_t> common = {500, 72, 101, 32, 409};
  std::vector<int32_t> ta = common, tb = common;
  for (int32_t t : {88, 17, 256, 3, 44}) ta.push_back(t);
  for (int32_t t : {9, 19, 29}) tb.push_back(t);
  a.eval_tokens(ta);
  b.eval_tokens(tb);
  const int32_t next = 123;
  // Reference: a itself continued after its first 8 positions.
  a.truncate(8);
  const auto ref_span = a.eval_tokens(std::span(&next, 1));
  const std::vector<float> ref(ref_span.begin(), ref_span.end());
  b.copy_prefix_from(a, 8, int32_t(common.size()));
  EXPECT_EQ(b.n_past(), 8);
  const auto got = b.eval_tokens(std::span(&next, 1));
  ASSERT_EQ(got.size(), ref.size());
  EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)))
      << quant << " " << kv;
  // Control: b's rows 5..7 are its own tokens (9, 19, 29); claiming them shared copies nothing
  // of a's there, and the continuation must differ.
  Session c(engine);
  c.eval_tokens(tb);
  c.copy_prefix_from(a, 8, 8);
  const auto wrong = c.eval_tokens(std::span(&next, 1));
  EXPECT_NE(0, std::memcmp(wrong.data(), ref.data(), ref.size() * sizeof(float)));
}

TEST(BeamSearch, CopyPrefixF32) {
  check_copy_prefix("f32", "auto");
}
TEST(BeamSearch, CopyPrefixW8a8Q8Kv) {
  check_copy_prefix("w8a8", "q8");
}

TEST(BeamSearch, CopyPrefixChecks) {
  const Model& m = test::compiled_model(test::fixtures_dir() / "golden" / "qwen2", "f32");
  Engine engine(m, EngineOptions{2});
  Session a(engine), b(engine);
  const std::vector<int32_t> t = {500, 72, 101};
  a.eval_tokens(t);
  EXPECT_THROW(b.copy_prefix_from(a, 4), Error);     // more than a holds
  EXPECT_THROW(b.copy_prefix_from(a, 3, 1), Error);  // b holds nothing to keep
  EXPECT_THROW(b.copy_prefix_from(a, 2, 3), Error);  // keep > n
  b.copy_prefix_from(a, 3);
  EXPECT_EQ(b.n_past(), 3);
}

}  // namespace
}  // namespace edgevl

namespace edgevl {
namespace {

// `edgevl run --beams N --length-penalty F --early-stopping MODE --json` runs the same search as
// the library on the same prompt (the raw prompt's ids, the model's stop tokens).
TEST(BeamSearch, CliMatchesLibrary) {
  const auto dir = test::fixtures_dir() / "golden" / "qwen2";
  const Model& m = test::compiled_model(dir, "f32");
  const std::string text = "the quick brown fox";
  const Prompt p = build_raw_prompt(m, text, true);
  for (const std::string es : {"true", "never"}) {
    BeamOptions o;
    o.num_beams = 3;
    o.max_new_tokens = 12;
    o.length_penalty = 0.7f;
    o.early_stopping = parse_early_stopping(es);
    Engine engine(m, EngineOptions{2});
    const BeamResult want = beam_search(engine, p.ids, o);
    const auto r = test::run_cli(fmt::format(
        "run -m '{}' --raw -p '{}' -n 12 --beams 3 --length-penalty 0.7 --early-stopping {} "
        "-t 2 --json",
        test::compiled_path(dir, "f32").string(), text, es));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["hypotheses"].size(), want.hypotheses.size());
    for (size_t i = 0; i < want.hypotheses.size(); ++i) {
      EXPECT_EQ(j["hypotheses"][i]["tokens"].get<std::vector<int32_t>>(),
                want.hypotheses[i].tokens);
      EXPECT_EQ(j["hypotheses"][i]["score"].get<float>(), want.hypotheses[i].score);
    }
    EXPECT_EQ(j["early_stopping"], es);
  }
  // The bare flag means true; a bad mode is refused.
  const auto bare =
      test::run_cli(fmt::format("run -m '{}' --raw -p 'x' -n 2 --beams 2 --early-stopping --json",
                                test::compiled_path(dir, "f32").string()));
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  EXPECT_EQ(nlohmann::json::parse(bare.out)["early_stopping"], "true");
  EXPECT_NE(test::run_cli(fmt::format("run -m '{}' --raw -p 'x' --beams 2 --early-stopping maybe",
                                      test::compiled_path(dir, "f32").string()))
                .exit_code,
            0);
}

}  // namespace
}  // namespace edgevl
