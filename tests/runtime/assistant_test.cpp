// The runtime's entry point (runtime/assistant.h) that run, chat, the server and the C API sit
// on: a Chat answers as a fresh conversation over its history does, reuses the KV prefix across
// turns, keeps a failed or stopped turn out of the history, refuses images on a text-only model,
// and its beam reply is the beam search's best hypothesis.
#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/assistant.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"

namespace edgevl {
namespace {

GenerateOptions greedy(int32_t n) {
  GenerateOptions o;
  o.n_predict = n;
  o.sampling.temperature = 0;
  o.ignore_eos = true;
  return o;
}

AssistantOptions two_threads() {
  AssistantOptions o;
  o.threads = 2;
  return o;
}

std::filesystem::path qwen2() {
  return test::compiled_path(test::fixtures_dir() / "golden" / "qwen2", "f32");
}

// The reply a fresh conversation gives to `messages`.
std::vector<int32_t> fresh(const std::vector<Message>& messages, int32_t n) {
  Assistant a(qwen2(), two_threads());
  Session s(a.engine());
  Conversation c(s);
  return c.reply(messages, greedy(n)).tokens;
}

TEST(Assistant, ChatKeepsItsHistoryAndAnswersAsAFreshConversation) {
  Assistant a(qwen2(), two_threads());
  EXPECT_FALSE(a.has_vision());
  Chat chat(a);
  chat.set_system("You are terse.");
  const GenerateResult r1 = chat.send("Tell me about the sea.", greedy(6));
  EXPECT_EQ(chat.last_stats().reused_tokens, 0);
  EXPECT_EQ(chat.last_stats().generated_tokens, int32_t(r1.tokens.size()));
  std::vector<Message> msgs = {{"system", "You are terse.", {}},
                               {"user", "Tell me about the sea.", {}}};
  EXPECT_EQ(r1.tokens, fresh(msgs, 6));
  ASSERT_EQ(chat.history().size(), 3u);
  EXPECT_EQ(chat.history()[2].role, "assistant");
  EXPECT_EQ(chat.history()[2].content, r1.text);

  const GenerateResult r2 = chat.send("And the sky?", greedy(6));
  EXPECT_GT(chat.last_stats().reused_tokens, 0);  // the first turn stays in the cache
  msgs.push_back({"assistant", r1.text, {}});
  msgs.push_back({"user", "And the sky?", {}});
  EXPECT_EQ(r2.tokens, fresh(msgs, 6));
  EXPECT_EQ(chat.history().size(), 5u);

  chat.reset();
  EXPECT_TRUE(chat.history().empty());
  EXPECT_EQ(chat.send("Tell me about the sea.", greedy(6)).tokens, r1.tokens);
}

TEST(Assistant, RefusedAndStoppedTurnsLeaveNoTrace) {
  Assistant a(qwen2(), two_threads());
  Chat chat(a);
  // A text-only model takes no image, from the assistant or into a chat.
  EXPECT_THROW(a.image_rgb(2, 2, std::vector<uint8_t>(12, 0)), Error);
  EXPECT_THROW(chat.add_image(nullptr), Error);
  // More tokens than the context holds: refused, the history untouched.
  EXPECT_THROW(chat.send("Hello there.", greedy(chat.context() + 1)), Error);
  EXPECT_TRUE(chat.history().empty());
  // Stopped by the caller at the first piece of text: Cancelled there; the turn is answered
  // (what was generated joins the history) and the next turn still answers as a fresh
  // conversation over that history does.
  int pieces = 0;
  const GenerateResult r = chat.send("Hello there.", greedy(48), [&](std::string_view) {
    ++pieces;
    return false;
  });
  ASSERT_EQ(pieces, 1) << "the model wrote no text in 48 tokens";
  EXPECT_EQ(r.stop, StopReason::Cancelled);
  EXPECT_EQ(chat.last_stats().stop, StopReason::Cancelled);
  EXPECT_LT(r.tokens.size(), 48u);
  ASSERT_EQ(chat.history().size(), 2u);
  std::vector<Message> msgs = chat.history();
  msgs.push_back({"user", "Go on.", {}});
  EXPECT_EQ(chat.send("Go on.", greedy(4)).tokens, fresh(msgs, 4));
}

TEST(Assistant, BeamReplyIsTheSearchsBestHypothesis) {
  Assistant a(qwen2(), two_threads());
  Chat chat(a);
  const Turn t = chat.turn("Tell me about the sea.");
  BeamOptions o;
  o.num_beams = 3;
  o.max_new_tokens = 5;
  BeamResult search;
  const BeamReply reply = chat.beam_reply(t, o, &search);
  const BeamResult again = beam_search(a.engine(), t.prompt.ids, o);
  ASSERT_FALSE(again.hypotheses.empty());
  std::vector<int32_t> best = again.hypotheses.front().tokens;
  if (reply.stopped) best.pop_back();
  EXPECT_EQ(reply.tokens, best);
  EXPECT_EQ(search.hypotheses.front().tokens, again.hypotheses.front().tokens);
  EXPECT_TRUE(chat.history().empty());  // a beam reply does not join the history
}

}  // namespace
}  // namespace edgevl
