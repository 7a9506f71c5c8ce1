// The runtime layer every caller shares (runtime/chat/conversation.h,
// runtime/execution/vision_encoder.h): a follow-up turn keeps the KV prefix it shares with the
// previous one and answers exactly as a fresh conversation does; image positions are kept only for
// the same image; an image seen before is not decoded or encoded again; bad images are refused with
// clear errors.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "runtime/chat/conversation.h"
#include "support/model_fixture.h"
#include "support/test_paths.h"
#include "support/vision_fixture.h"
#include "vision/image.h"

namespace edgevl {
namespace {

using test::fixtures_dir;

GenerateOptions greedy(int32_t n) {
  GenerateOptions o;
  o.n_predict = n;
  o.sampling.temperature = 0;
  o.ignore_eos = true;
  return o;
}

vision::Tiles wave_tile(int size, double phase) {
  return test::formula_tiles(1, size, phase);
}

// The same messages on a fresh session: what a reply must equal whatever was reused.
std::vector<int32_t> fresh_reply(const Model& m, const std::vector<Message>& msgs, int32_t n) {
  Session s(m, SessionOptions{2, 0});
  std::unique_ptr<VisionEncoder> enc;
  if (m.vision()) enc = std::make_unique<VisionEncoder>(s.engine());
  Conversation c(s, enc.get());
  return c.reply(msgs, greedy(n)).tokens;
}

TEST(Conversation, FollowUpTurnReusesThePrefixAndAnswersAsAFreshOne) {
  const Model& m = test::compiled_model(fixtures_dir() / "golden" / "qwen2", "f32");
  Session s(m, SessionOptions{2, 0});
  Conversation conv(s);
  std::vector<Message> msgs = {{"user", "Tell me about the sea.", {}}};
  TurnStats t1, t2;
  const GenerateResult r1 = conv.reply(msgs, greedy(8), {}, &t1);
  EXPECT_EQ(t1.reused_tokens, 0);
  EXPECT_EQ(r1.tokens, fresh_reply(m, msgs, 8));

  msgs.push_back({"assistant", r1.text, {}});
  msgs.push_back({"user", "And the sky?", {}});
  const GenerateResult r2 = conv.reply(msgs, greedy(8), {}, &t2);
  // At least the whole first prompt stays in the cache.
  EXPECT_GE(t2.reused_tokens, t1.prompt_tokens);
  EXPECT_LT(t2.reused_tokens, t2.prompt_tokens);
  EXPECT_EQ(r2.reused_tokens, t2.reused_tokens);
  EXPECT_EQ(r2.tokens, fresh_reply(m, msgs, 8));

  // The same conversation again: everything but the last prompt token is kept.
  TurnStats t3;
  const GenerateResult r3 = conv.reply(msgs, greedy(8), {}, &t3);
  EXPECT_EQ(t3.reused_tokens, t3.prompt_tokens - 1);
  EXPECT_EQ(r3.tokens, r2.tokens);

  // A different first message shares (almost) nothing and still answers as a fresh one.
  std::vector<Message> other = {{"user", "Why is grass green?", {}}};
  TurnStats t4;
  EXPECT_EQ(conv.reply(other, greedy(8), {}, &t4).tokens, fresh_reply(m, other, 8));
  EXPECT_LT(t4.reused_tokens, t1.prompt_tokens / 2);
}

TEST(Conversation, RawCompletionExtendsThePreviousText) {
  const Model& m = test::compiled_model(fixtures_dir() / "golden" / "llama", "f32");
  Session s(m, SessionOptions{2, 0});
  Conversation conv(s);
  TurnStats a, b;
  conv.complete("Once upon a time there", true, greedy(4), {}, &a);
  const GenerateResult r = conv.complete("Once upon a time there was a", true, greedy(6), {}, &b);
  EXPECT_GE(b.reused_tokens, a.prompt_tokens - 1);
  Session fresh(m, SessionOptions{2, 0});
  Conversation c2(fresh);
  EXPECT_EQ(r.tokens, c2.complete("Once upon a time there was a", true, greedy(6)).tokens);
}

TEST(Conversation, ImagePositionsAreKeptOnlyForTheSameImage) {
  const Model& m = test::compiled_model(fixtures_dir() / "golden" / "internvl_qwen2", "f32");
  Engine engine(m, EngineOptions{2});
  Session s(engine, SessionOptions{});
  VisionEncoder enc(engine);
  Conversation conv(s, &enc);
  const ImageRef a = enc.prepare_tiles(wave_tile(448, 0.0));
  std::vector<Message> msgs = {{"user", "What is this?", {a}}};
  TurnStats t1, t2, t3;
  const GenerateResult r1 = conv.reply(msgs, greedy(4), {}, &t1);
  EXPECT_EQ(t1.images, 1);
  EXPECT_EQ(t1.tiles_encoded, 1);
  EXPECT_EQ(t1.image_tokens, 256);
  EXPECT_EQ(r1.tokens, fresh_reply(m, msgs, 4));

  // A follow-up: the image's positions stay in the cache, the tower does not run again.
  msgs.push_back({"assistant", r1.text, {}});
  msgs.push_back({"user", "What colour is it?", {}});
  const GenerateResult r2 = conv.reply(msgs, greedy(4), {}, &t2);
  EXPECT_EQ(t2.tiles_encoded, 0);
  EXPECT_GE(t2.reused_tokens, t1.prompt_tokens);
  EXPECT_EQ(r2.tokens, fresh_reply(m, msgs, 4));

  // The same text with another image: the prefix ends where the image starts.
  const ImageRef b = enc.prepare_tiles(wave_tile(448, 1.0));
  std::vector<Message> other = {{"user", "What is this?", {b}}};
  const Prompt p = build_chat_prompt(m, other);
  ASSERT_EQ(p.images.size(), 1u);
  const GenerateResult r3 = conv.reply(other, greedy(4), {}, &t3);
  EXPECT_EQ(t3.reused_tokens, p.images[0].first);
  EXPECT_EQ(t3.tiles_encoded, 1);
  EXPECT_EQ(r3.tokens, fresh_reply(m, other, 4));
}

TEST(Conversation, PlaceholderAndRoleErrorsAreClear) {
  const Model& m = test::compiled_model(fixtures_dir() / "golden" / "internvl_qwen2", "f32");
  Session s(m, SessionOptions{2, 0});
  VisionEncoder enc(s.engine());
  const ImageRef img = enc.prepare_tiles(wave_tile(448, 0.0));
  try {
    build_chat_prompt(m, {{"user", "<image> and <image>", {img}}});
    FAIL() << "two placeholders, one image";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 <image> placeholder(s) but 1 image(s)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(build_chat_prompt(m, {{"robot", "hi", {}}}), Error);
  EXPECT_THROW(build_chat_prompt(m, {{"assistant", "hi", {img}}}), Error);
  EXPECT_THROW(build_chat_prompt(m, {}), Error);
  Conversation conv(s, &enc);
  EXPECT_THROW(conv.reply({{"user", "hi", {}}, {"assistant", "hello", {}}}, greedy(2)), Error);

  // A text-only model refuses images.
  const Model& text = test::compiled_model(fixtures_dir() / "golden" / "qwen2", "f32");
  EXPECT_THROW(build_chat_prompt(text, {{"user", "hi", {img}}}), Error);
  Session ts(text, SessionOptions{1, 0});
  EXPECT_THROW(VisionEncoder{ts.engine()}, Error);
}

TEST(VisionEncoder, SameBytesComeFromTheCache) {
  const Model& m = test::compiled_model(fixtures_dir() / "golden" / "internvl_qwen2", "f32");
  Session s(m, SessionOptions{2, 0});
  ImageOptions io;
  io.max_tiles = 2;
  io.cache_bytes = 64u << 20;
  VisionEncoder enc(s.engine(), io);
  const auto bytes = vision::read_image_file(fixtures_dir() / "images" / "src" / "wide_3to1.png");
  ImageRef first = enc.prepare_bytes(bytes, "wide");
  EXPECT_GT(first->tiles, 1);
  const auto f1 = enc.features(*first);
  EXPECT_EQ(enc.stats().tiles_encoded, first->tiles);
  EXPECT_TRUE(first->pixels.pixels.empty());  // released once encoded

  ImageRef again = enc.prepare_bytes(bytes, "wide again");
  EXPECT_EQ(again->key, first->key);
  EXPECT_EQ(again->tiles, first->tiles);
  EXPECT_EQ(enc.features(*again), f1);  // the same features, not recomputed
  EXPECT_EQ(enc.stats().cache_hits, 1);
  EXPECT_EQ(enc.stats().tiles_encoded, first->tiles);

  // Other bytes, other key; the same pixels as a raw RGB buffer encode to the same features.
  const auto other = vision::read_image_file(fixtures_dir() / "images" / "src" / "tall_1to4.png");
  EXPECT_NE(enc.prepare_bytes(other, "tall")->key, first->key);
  const vision::Image decoded = vision::decode_image_memory(bytes, "wide");
  ImageRef rgb = enc.prepare_rgb(decoded.width, decoded.height, decoded.rgb);
  EXPECT_EQ(*enc.features(*rgb), *f1);
}

TEST(VisionEncoder, BadImagesAreRefusedClearly) {
  const Model& m = test::compiled_model(fixtures_dir() / "golden" / "internvl_qwen2", "f32");
  Session s(m, SessionOptions{1, 0});
  ImageOptions io;
  io.max_pixels = 1000;
  VisionEncoder enc(s.engine(), io);
  const std::vector<uint8_t> rgb(3 * 20 * 20, 128);
  EXPECT_NO_THROW(enc.prepare_rgb(20, 20, rgb));
  EXPECT_THROW(enc.prepare_rgb(20, 21, rgb), Error);  // size mismatch
  EXPECT_THROW(enc.prepare_rgb(0, 20, rgb), Error);
  const std::vector<uint8_t> big(3 * 40 * 40, 1);
  EXPECT_THROW(enc.prepare_rgb(40, 40, big), Error);  // over the pixel limit
  const auto png = vision::read_image_file(fixtures_dir() / "images" / "src" / "square_64.png");
  try {
    enc.prepare_bytes(png, "square");
    FAIL() << "64x64 exceeds 1000 pixels";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("square"), std::string::npos) << e.what();
  }
  const std::vector<uint8_t> junk = {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'g'};
  EXPECT_THROW(enc.prepare_bytes(junk, "junk"), Error);
  EXPECT_THROW(enc.prepare_file(fixtures_dir() / "images" / "no_such.png"), Error);
}

}  // namespace
}  // namespace edgevl
