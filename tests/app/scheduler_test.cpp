// The server's scheduler driven directly (no HTTP): a long prompt is evaluated a prefill chunk
// per step between the running streams' decode steps, and a prompt evaluated in pieces gives
// the tokens of the same request run alone.
#include <gtest/gtest.h>

#include <chrono>

#include "app/server/metrics.h"
#include "app/server/scheduler.h"
#include "compiler/compile.h"
#include "core/temp_dir.h"
#include "runtime/chat/conversation.h"
#include "runtime/decoding/generate.h"
#include "runtime/decoding/token_loop.h"
#include "runtime/execution/engine.h"
#include "runtime/execution/session.h"
#include "support/test_paths.h"

namespace edgevl::server {
namespace {

using namespace std::chrono_literals;

// The qwen2 golden fixture with 8-token prefill chunks, so a short prompt takes many chunks.
const Model& small_chunk_model() {
  static TempDir dir;
  static std::unique_ptr<Model> m;
  if (!m) {
    compiler::CompileOptions o;
    o.input = test::fixtures_dir() / "golden" / "qwen2";
    o.output = dir.path() / "m.evb";
    o.quant = "w8a8";
    o.prefill_chunk = 8;
    o.context = 512;
    compiler::compile_model(o);
    m = std::make_unique<Model>(o.output);
  }
  return *m;
}

std::shared_ptr<Job> job(const Model& m, const std::string& text, int32_t n) {
  auto j = std::make_shared<Job>();
  j->prompt = build_raw_prompt(m, text, true);
  j->options.n_predict = n;
  j->options.sampling.temperature = 0;
  j->options.ignore_eos = true;
  j->stream = true;
  return j;
}

std::string long_text() {
  std::string t;
  for (int i = 0; i < 12; ++i) t += "The quick brown fox jumps over the lazy dog. ";
  return t;
}

TEST(SchedulerPrefill, LongPromptInterleavesWithRunningStream) {
  const Model& m = small_chunk_model();
  Engine engine(m, EngineOptions{2});
  Metrics metrics;
  Scheduler sched(engine, nullptr, SchedulerOptions{2, 4, 0}, metrics);
  // A must still be decoding when B's prompt ends, or the count says nothing. The tiny model
  // decodes a token in tens of microseconds: waiting for A to get under way (1 ms polls) let A
  // finish its 400 tokens before B arrived on a fast machine. So B follows A at once, A has the
  // context's worth of tokens, and an attempt where A still ran out (the test thread
  // descheduled between the two submits) is repeated rather than judged.
  const int32_t a_budget = 480;
  bool measured = false;
  for (int attempt = 0; attempt < 5 && !measured; ++attempt) {
    auto a = job(m, "Once upon a time", a_budget);
    auto b = job(m, long_text(), 1);
    const int64_t chunks = (int64_t(b->prompt.ids.size()) + 7) / 8;
    ASSERT_GE(chunks, 10);
    ASSERT_TRUE(sched.submit(a));
    const int64_t a_before = a->generated;
    ASSERT_TRUE(sched.submit(b));
    ASSERT_TRUE(b->wait_done(60s));
    const int64_t a_during = a->generated - a_before;
    measured = a->generated < a_budget;
    if (measured) {
      // One decode step of A per chunk of B's prompt (evaluating B's prompt at once would let
      // A take at most a step or two meanwhile).
      EXPECT_GE(a_during, chunks - 2)
          << "A advanced " << a_during << " tokens during B's " << chunks << "-chunk prompt";
      EXPECT_FALSE(b->error().has_value());
      EXPECT_EQ(b->result().tokens.size(), 1u);
    }
    a->cancelled = true;
    ASSERT_TRUE(a->wait_done(60s));
  }
  EXPECT_TRUE(measured) << "A ran out of tokens before B's prompt was evaluated, 5 times";
}

// The same request through the scheduler (prompt in 8-token pieces, batched with another
// stream) and alone (prompt at once): the same greedy tokens.
TEST(SchedulerPrefill, PiecewisePromptGivesTheTokensOfOneRunAlone) {
  const Model& m = small_chunk_model();
  Engine engine(m, EngineOptions{2});
  Session alone(engine);
  GenerateOptions o;
  o.n_predict = 24;
  o.sampling.temperature = 0;
  o.ignore_eos = true;
  const Prompt p = build_raw_prompt(m, long_text(), true);
  const GenerateResult ref = generate(alone, p.ids, o);

  Metrics metrics;
  Scheduler sched(engine, nullptr, SchedulerOptions{2, 4, 0}, metrics);
  auto other = job(m, "Once upon a time", 200);
  ASSERT_TRUE(sched.submit(other));
  auto b = job(m, long_text(), 24);
  ASSERT_TRUE(sched.submit(b));
  ASSERT_TRUE(b->wait_done(60s));
  EXPECT_EQ(b->result().tokens, ref.tokens);
  other->cancelled = true;
  ASSERT_TRUE(other->wait_done(60s));
}

// A generator cancelled during its prompt leaves the conversation holding the evaluated part.
TEST(SchedulerPrefill, CancelDuringPromptKeepsTheEvaluatedPrefix) {
  const Model& m = small_chunk_model();
  Engine engine(m, EngineOptions{2});
  Session s(engine);
  Conversation conv(s, nullptr);
  const Prompt p = build_raw_prompt(m, long_text(), true);
  GenerateOptions o;
  o.n_predict = 4;
  auto g = conv.start(p, o, nullptr, /*defer_prefill=*/true);
  EXPECT_TRUE(g->prefilling());
  EXPECT_FALSE(g->prefill_continue(8));
  EXPECT_FALSE(g->prefill_continue(8));
  g->cancel(StopReason::Cancelled);
  conv.finish(*g);
  EXPECT_EQ(s.n_past(), 16);
  EXPECT_EQ(conv.shared_prefix(p), 16);
}

}  // namespace
}  // namespace edgevl::server
