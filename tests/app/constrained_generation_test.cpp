// Schema-constrained generation end to end: sampled generations of a random-weight model under
// three schemas all parse and validate, within their token budgets (tight ones included); the
// automaton over the real Qwen2 and InternLM2 vocabularies (when ../shared/data has them).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "compiler/tokenizer_import.h"
#include "core/error.h"
#include "runtime/constraints/json_schema_reader.h"
#include "runtime/decoding/generate.h"
#include "runtime/decoding/token_loop.h"
#include "support/constraint_walk.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// 1: nested array of objects with enums; 2: strings with length bounds and a type array;
// 3: numbers, integers and booleans, mostly optional.
const char* kSchemas[] = {
    R"({"type":"object","properties":{
        "id":{"type":"integer"},
        "items":{"type":"array","maxItems":3,"items":{"type":"object","properties":{
          "kind":{"enum":["a","b","c"]},
          "count":{"type":"integer"},
          "color":{"type":"string","enum":["red","green"]}},"required":["kind"]}}},
      "required":["id","items"]})",
    R"({"type":"object","properties":{
        "title":{"type":"string","maxLength":10},
        "words":{"type":"array","items":{"type":"string","minLength":1,"maxLength":5},
                 "minItems":1,"maxItems":4},
        "note":{"type":["string","null"],"maxLength":8}},
      "required":["title","words"]})",
    R"({"type":"object","properties":{
        "x":{"type":"number"},"n":{"type":"integer"},"flag":{"type":"boolean"},
        "maybe":{"type":"number"},"more":{"type":"boolean"}},
      "required":["x","flag"]})",
};

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (const char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

// A validator for the subset, written against the JSON Schema text (not the compiled struct).
bool type_ok(const json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  return false;
}

std::string validate(const json& v, const json& s, const std::string& at) {
  if (s.contains("enum")) {
    for (const auto& e : s["enum"])
      if (e == v) return {};
    return at + ": not in enum";
  }
  if (s.contains("type")) {
    bool ok = false;
    if (s["type"].is_string()) ok = type_ok(v, s["type"]);
    for (const auto& t : s["type"].is_array() ? s["type"] : json::array()) ok |= type_ok(v, t);
    if (!ok) return at + ": wrong type";
  }
  if (v.is_object()) {
    const json props = s.value("properties", json::object());
    for (const auto& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return at + ": missing " + r.get<std::string>();
    for (const auto& [k, sub] : v.items()) {
      if (!s.contains("properties")) continue;  // any object: any keys and values
      if (!props.contains(k)) return at + ": extra key " + k;
      if (auto e = validate(sub, props[k], at + "/" + k); !e.empty()) return e;
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return at + ": minItems";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return at + ": maxItems";
    for (size_t i = 0; i < v.size(); ++i)
      if (auto e = validate(v[i], s["items"], at + "/" + std::to_string(i)); !e.empty()) return e;
  }
  if (v.is_string()) {
    const size_t n = code_points(v.get<std::string>());
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return at + ": minLength";
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return at + ": maxLength";
  }
  return {};
}

// The issue's test: 1,000 sampled generations (temperature 1, no filters, a seed each) from
// a random-weight Qwen2 under three schemas; a fifth of the budgets are the tightest possible.
TEST(ConstrainedGeneration, ThousandSampledGenerationsValidate) {
  const Model& m = test::compiled_model(test::fixtures_dir() / "golden" / "qwen2", "f32");
  auto vocab = std::make_shared<const TokenVocabulary>(m.tokenizer());
  Session s(m, SessionOptions{1, 0});
  const std::vector<int32_t> prompt = m.tokenizer().encode("JSON:");
  ASSERT_FALSE(prompt.empty());
  int total = 0, tight = 0, by_stop = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < 3; ++k) {
    const json schema = json::parse(kSchemas[k]);
    const auto c = make_json_constraint(parse_json_schema(ojson::parse(kSchemas[k])), vocab);
    const int32_t need = c->min_tokens(c->start());
    ASSERT_GT(need, 0);
    for (int i = 0; i < (k == 0 ? 334 : 333); ++i) {
      GenerateOptions o;
      o.sampling.temperature = 1.0f;
      o.sampling.top_k = 0;
      o.sampling.top_p = 1.0f;
      o.sampling.min_p = 0.0f;
      o.sampling.seed = uint64_t(1000 * k + i + 1);
      o.n_predict = i % 5 == 0 ? need + i % 3 : need + 10 + i % 60;
      tight += i % 5 == 0;
      o.constraint = c;
      s.reset();
      const GenerateResult r = generate(s, prompt, o);
      ++total;
      ASSERT_LE(int32_t(r.tokens.size()), o.n_predict);
      by_stop += r.stop == StopReason::StopToken;
      json doc;
      try {
        doc = json::parse(r.text);
      } catch (const std::exception& e) {
        FAIL() << "schema " << k << " seed " << o.sampling.seed << " n " << o.n_predict
               << ": does not parse: " << r.text << " (" << e.what() << ")";
      }
      if (i < 2) std::printf("schema %d, n %d: %s\n", k + 1, o.n_predict, r.text.c_str());
      const std::string err = validate(doc, schema, "#");
      ASSERT_TRUE(err.empty()) << "schema " << k << " seed " << o.sampling.seed << ": " << err
                               << " in " << r.text;
    }
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "%d generations (%d with the tightest budgets, %d ended by a stop token or a "
      "complete document) valid in %.1f s\n",
      total, tight, by_stop, sec);
  EXPECT_EQ(total, 1000);
}

TEST(ConstrainedGeneration, RefusesWhatCannotWork) {
  const Model& m = test::compiled_model(test::fixtures_dir() / "golden" / "qwen2", "f32");
  auto vocab = std::make_shared<const TokenVocabulary>(m.tokenizer());
  const auto c = make_json_constraint(parse_json_schema(ojson::parse(kSchemas[0])), vocab);
  Session s(m, SessionOptions{1, 0});
  GenerateOptions o;
  o.constraint = c;
  o.n_predict = c->min_tokens(c->start()) - 1;
  try {
    Generator g(s, o);
    FAIL() << "a budget below the shortest document was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too small"), std::string::npos) << e.what();
  }
  o.n_predict = 64;
  o.speculative.lookup = 3;
  EXPECT_THROW(Generator(s, o), Error);
}

// A cache limit far below the working set: tables are evicted and rebuilt, the walks stay
// valid and the generations the same as with an unbounded cache.
TEST(ConstrainedGeneration, CacheEvictionKeepsResults) {
  const Model& m = test::compiled_model(test::fixtures_dir() / "golden" / "qwen2", "f32");
  auto vocab = std::make_shared<const TokenVocabulary>(m.tokenizer());
  const JsonSchema schema = parse_json_schema(ojson::parse(kSchemas[1]));
  const auto big = std::make_shared<const TokenConstraint>(compile_json_schema(schema), vocab);
  const auto small =
      std::make_shared<const TokenConstraint>(compile_json_schema(schema), vocab, 4096);
  Session s(m, SessionOptions{1, 0});
  const std::vector<int32_t> prompt = m.tokenizer().encode("JSON:");
  for (int i = 0; i < 20; ++i) {
    GenerateOptions o;
    o.sampling.temperature = 1.0f;
    o.sampling.top_k = 0;
    o.sampling.seed = uint64_t(i + 1);
    o.n_predict = 40;
    o.constraint = big;
    s.reset();
    const GenerateResult a = generate(s, prompt, o);
    o.constraint = small;
    s.reset();
    const GenerateResult b = generate(s, prompt, o);
    EXPECT_EQ(a.tokens, b.tokens);
  }
  EXPECT_GT(small->stats().evictions, 0);
  EXPECT_LE(small->stats().cache_bytes, 4096u + 2048u);
  EXPECT_EQ(big->stats().evictions, 0);
}

// Greedy decoding under a schema equals greedy decoding of the masked logits: the constraint
// changes which tokens are possible, never the order of the allowed ones.
TEST(ConstrainedGeneration, GreedyPicksTheBestAllowedToken) {
  const Model& m = test::compiled_model(test::fixtures_dir() / "golden" / "qwen2", "f32");
  auto vocab = std::make_shared<const TokenVocabulary>(m.tokenizer());
  const auto c = make_json_constraint(parse_json_schema(ojson::parse(kSchemas[2])), vocab);
  Session s(m, SessionOptions{1, 0});
  const std::vector<int32_t> prompt = m.tokenizer().encode("JSON:");
  GenerateOptions o;
  o.sampling.temperature = 0;
  o.n_predict = 40;
  o.constraint = c;
  const GenerateResult r = generate(s, prompt, o);
  // Replay: at each step the chosen token is the argmax over the allowed ones.
  Session t(m, SessionOptions{1, 0});
  auto cur = t.eval_tokens(prompt);
  int32_t state = c->start();
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const auto allowed = c->allowed(state, o.n_predict - int32_t(i));
    ASSERT_FALSE(allowed.empty());
    int32_t best = allowed[0];
    for (const int32_t a : allowed)
      if (cur[size_t(a)] > cur[size_t(best)]) best = a;
    ASSERT_EQ(r.tokens[i], best) << "step " << i;
    state = c->advance(state, best);
    cur = t.eval_tokens(std::span<const int32_t>(&best, 1));
  }
  EXPECT_TRUE(c->accepting(state));
}

// The automaton over a vocabulary: built, walked with uniformly random logits (every allowed
// token has a chance, unlike a random-weight model's peaked distributions) to a complete
// document under each schema and many budgets, its sizes and times printed.
void vocabulary_walks(const text::Tokenizer& tok, const char* name, int walks) {
  auto vocab = std::make_shared<const TokenVocabulary>(tok);
  const int32_t eos = tok.eos_id();
  ASSERT_GE(eos, 0);
  std::printf("%s: %d tokens, trie of %zu nodes (%.1f MB) built in %.0f ms\n", name,
              tok.vocab_size(), size_t(vocab->num_nodes()), vocab->memory_bytes() / 1048576.0,
              vocab->build_ms());
  std::mt19937 rng(7);
  std::vector<float> logits(size_t(tok.vocab_size())), masked;
  for (int k = 0; k < 4; ++k) {
    // 4: any object (--json-object): unbounded strings, where most of the vocabulary is allowed.
    const json schema = k < 3 ? json::parse(kSchemas[k]) : json{{"type", "object"}};
    const auto t0 = std::chrono::steady_clock::now();
    const auto c = make_json_constraint(
        k < 3 ? parse_json_schema(ojson::parse(kSchemas[k])) : any_json_object(), vocab);
    const double build_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    double mask_ms = 0;
    int steps = 0;
    const int32_t need = c->min_tokens(c->start());
    for (int w = 0; w < walks; ++w) {
      const int32_t budget = w % 4 == 0 ? need + w % 3 : need + w % 200;
      const test::ConstraintWalk walk = test::walk_constraint(*c, eos, budget, rng, logits, masked);
      mask_ms += walk.mask_ms;
      steps += walk.steps;
      ASSERT_EQ(walk.error, "") << name << " schema " << k;
      const std::string& text = walk.text;
      ASSERT_TRUE(c->accepting(walk.state))
          << name << " schema " << k << " budget " << budget << ": " << text;
      json doc;
      ASSERT_NO_THROW(doc = json::parse(text)) << text;
      EXPECT_EQ(validate(doc, schema, "#"), "") << text;
    }
    const auto st = c->stats();
    std::printf(
        "%s schema %d: NFA %lld states, DFA %d states (%d tables) x %d byte classes (%.1f KB); "
        "shortest document %d tokens; compile + budgets %.1f ms; %d token tables "
        "cached (%.0f KB) built in %.1f ms; mask %.3f ms/step over %d steps\n",
        name, k + 1, (long long)st.nfa_states, st.dfa_states, st.table_classes, st.byte_classes,
        st.dfa_bytes / 1024.0, c->min_tokens(c->start()), build_ms, st.cached_states,
        st.cache_bytes / 1024.0, st.tables_ms, (mask_ms - st.tables_ms) / steps, steps);
    if (k < 3 && std::getenv("EDGEVL_CONSTRAINT_PRECOMPUTE")) {  // figures: all tables
      const auto p0 = std::chrono::steady_clock::now();
      c->precompute_all();
      const auto sp = c->stats();
      std::printf(
          "%s schema %d: all %d reachable token tables: %.0f KB in %.0f ms\n", name, k + 1,
          sp.cached_states, sp.cache_bytes / 1024.0,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p0).count());
    }
  }
}

void real_vocabulary_walks(const char* name) {
  const auto dir = test::shared_data(name);
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing(name);
  vocabulary_walks(text::Tokenizer(compiler::load_tokenizer_dir(dir)), name, 8);
}

TEST(ConstrainedGeneration, RandomLogitWalksSmallVocabulary) {
  const Model& m = test::compiled_model(test::fixtures_dir() / "golden" / "qwen2", "f32");
  vocabulary_walks(m.tokenizer(), "golden qwen2", 300);
}

// A string with a large maxLength is a state per character position, and a generation moves
// to a new one with every token. Shared tables: positions far from the bounds use one table,
// so a long walk builds a handful instead of one per token; and every table still allows
// exactly the tokens a brute-force check over the vocabulary allows (the state is live after
// the token, with a budget that fits).
void long_string_walk(const text::Tokenizer& tok, const char* name, int32_t steps, bool check_all) {
  auto vocab = std::make_shared<const TokenVocabulary>(tok);
  const auto t0 = std::chrono::steady_clock::now();
  const auto c = make_json_constraint(
      parse_json_schema(ojson::parse(
          R"({"type":"object","properties":{"text":{"type":"string","maxLength":4096}},
              "required":["text"]})")),
      vocab);
  const double build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<float> logits(size_t(tok.vocab_size())), masked;
  int32_t state = c->start();
  std::string text;
  double mask_ms = 0;
  int32_t taken = 0;
  // Quotes and backslashes rarely: the walk stays inside the string for most of its steps.
  std::vector<float> penalty(logits.size(), 0.f);
  for (int32_t t = 0; t < vocab->size(); ++t)
    for (const char ch : vocab->bytes(t))
      if (ch == '"' || ch == '\\') penalty[size_t(t)] += 12.f;  // per quote: not `":""`
  // One random draw per token, rotated each step (a fresh draw per token and step would cost
  // more than the walk over the 151k vocabulary).
  std::vector<float> base(logits.size());
  for (auto& b : base) b = u(rng);
  for (int32_t left = steps; left > 0 && !c->complete(state); --left) {
    const size_t shift = size_t(taken) * 7919u;
    for (size_t t = 0; t < logits.size(); ++t)
      logits[t] = base[(t + shift) % base.size()] - penalty[t];
    const auto m0 = std::chrono::steady_clock::now();
    c->mask(state, left, logits, &masked);
    mask_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m0).count();
    if (check_all) {
      std::vector<int32_t> expect;
      for (int32_t t = 0; t < vocab->size(); ++t) {
        const int32_t next = c->advance(state, t);
        if (next != 0 && c->min_tokens(next) <= left - 1) expect.push_back(t);
      }
      ASSERT_EQ(c->allowed(state, left), expect) << name << " step " << taken;
    }
    const auto best = int32_t(std::max_element(masked.begin(), masked.end()) - masked.begin());
    ASSERT_GT(masked[size_t(best)], -INFINITY) << name << ": no token at step " << taken;
    text += vocab->bytes(best);
    state = c->advance(state, best);
    ASSERT_NE(state, 0);
    ++taken;
  }
  ASSERT_TRUE(c->complete(state)) << name << ": " << text.substr(0, 200);
  const json doc = json::parse(text);
  ASSERT_TRUE(doc["text"].is_string());
  EXPECT_LE(code_points(doc["text"].get<std::string>()), 4096u);
  EXPECT_GT(code_points(doc["text"].get<std::string>()), size_t(steps) / 2) << "left early";
  const auto st = c->stats();
  std::printf(
      "%s, string maxLength 4096: DFA %d states share %d tables; compile %.0f ms (of which budgets "
      "+ "
      "sharing %.0f ms); %d tokens (%zu characters), %d tables built (%.0f KB) in %.1f ms; mask "
      "%.3f "
      "ms/token incl. tables\n",
      name, st.dfa_states, st.table_classes, build_ms, st.setup_ms, taken,
      code_points(doc["text"].get<std::string>()), st.cached_states, st.cache_bytes / 1024.0,
      st.tables_ms, mask_ms / taken);
  // Without sharing every token reaches a new position: one table per step.
  EXPECT_LT(st.cached_states, taken / 8) << "tables are not shared between string positions";
}

TEST(ConstrainedGeneration, LongStringSharesTables) {
  const Model& m = test::compiled_model(test::fixtures_dir() / "golden" / "qwen2", "f32");
  long_string_walk(m.tokenizer(), "golden qwen2", 1500, true);
}

TEST(ConstrainedGeneration, LongStringSharesTablesRealQwen2) {
  const auto dir = test::shared_data("qwen2-tokenizer");
  if (dir.empty()) GTEST_SKIP() << test::shared_data_missing("qwen2-tokenizer");
  long_string_walk(text::Tokenizer(compiler::load_tokenizer_dir(dir)), "qwen2-tokenizer", 1500,
                   false);
}

TEST(ConstrainedGeneration, RealQwen2Vocabulary) {
  real_vocabulary_walks("qwen2-tokenizer");
}
TEST(ConstrainedGeneration, RealInternLM2Vocabulary) {
  real_vocabulary_walks("internlm2-tokenizer");
}

}  // namespace
}  // namespace edgevl
