// Qwen3-VL images through the conversation path that chat, serve and the C API share
// (Assistant / Chat / Conversation over VisionEncoder's Qwen-VL processor), on the tiny golden
// (tests/fixtures/golden/qwen3vl): the prompt ids and greedy ids of transformers, the same as
// `run -i`'s single-turn path (qwen_vl_prefill); follow-up turns that keep an image's prefix
// (and its rope delta) equal to recomputing from scratch, also when the prompt is evaluated in
// pieces as the server does; speculation equal to plain greedy; beam search equal to
// transformers'; hostile images.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>

#include "compiler/compile.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/npy.h"
#include "runtime/assistant.h"
#include "runtime/chat/qwen_vl_prompt.h"
#include "runtime/decoding/token_loop.h"
#include "support/model_fixture.h"
#include "support/qwen3vl_fixture.h"
#include "vision/qwen_vl_preprocess.h"

namespace edgevl {
namespace {

GenerateOptions greedy(int32_t n) {
  GenerateOptions o;
  o.n_predict = n;
  o.sampling.temperature = 0;
  o.ignore_eos = true;
  return o;
}

AssistantOptions options() {
  AssistantOptions o;
  o.threads = 2;
  o.images.cache_bytes = 16u << 20;
  return o;
}

std::filesystem::path evb() {
  test::compiled_model(test::qwen3vl_dir(), "f32");  // compiles it once per test binary
  return test::compiled_path(test::qwen3vl_dir(), "f32");
}

int32_t image_token() {
  return nlohmann::json::parse(
      read_text_file(test::qwen3vl_dir() / "config.json"))["image_token_id"];
}

// f() throws an edgevl Error whose message contains `needle`.
void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// max|a - b| / max|b|.
double rel_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < b.size() && i < a.size(); ++i) {
    max_ref = std::max(max_ref, double(std::fabs(b[i])));
    max_diff = std::max(max_diff, double(std::fabs(a[i] - b[i])));
  }
  return max_diff / max_ref;
}

// The reply a fresh session gives to `messages` (the whole prompt evaluated from scratch).
std::vector<int32_t> fresh(Assistant& a, const std::vector<Message>& messages, int32_t n) {
  Session s(a.engine());
  Conversation c(s, a.vision());
  return c.reply(messages, greedy(n)).tokens;
}

TEST(Qwen3VlChat, ImagePromptEqualsTheReferenceAndTheRunPath) {
  Assistant a(evb(), options());
  ASSERT_TRUE(a.has_vision());
  const auto prompts = test::qwen3vl_image_prompts();
  ASSERT_FALSE(prompts.empty());
  TempDir tmp;
  for (const auto& q : prompts) {
    SCOPED_TRACE(q.name);
    Chat chat(a);
    chat.add_image(a.image_rgb(q.image.width, q.image.height, q.image.rgb));
    const Turn t = chat.turn("What is this?");
    EXPECT_EQ(t.prompt.ids, q.prompt_ids);
    const GenerateResult r = chat.reply(t, greedy(int32_t(q.tokens.size())));
    EXPECT_EQ(r.tokens, q.tokens);
    // The rope delta the decode steps ran at: transformers' get_rope_index.
    EXPECT_EQ(chat.session().rope_delta(), q.rope_delta);
    const ReplyStats& st = chat.last_stats();
    EXPECT_EQ(st.images, 1);
    EXPECT_EQ(st.image_tokens, std::count(q.prompt_ids.begin(), q.prompt_ids.end(), image_token()));

    // `run -i`'s path (qwen_vl_prefill, then the token loop after it): the same ids.
    const auto file = tmp.path() / (q.name + ".bmp");
    const auto bmp = test::bmp_bytes(q.image);
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(bmp.data()), std::streamsize(bmp.size()));
    Session s(a.engine());
    const QwenVlTurn turn = qwen_vl_prefill(s, {file}, "What is this?");
    EXPECT_EQ(turn.ids, t.prompt.ids);
    EXPECT_EQ(generate(s, turn.ids, greedy(int32_t(q.tokens.size())), {}, nullptr,
                       int32_t(turn.ids.size()) - 1)
                  .tokens,
              r.tokens);
    EXPECT_EQ(s.rope_delta(), q.rope_delta);

    // The logits of every prompt position through the conversation path, whole and in pieces
    // that cut through the image (the server's chunked prefill): the reference's. The greedy
    // ids of this tiny model do not depend on DeepStack; these logits do (docs/qwen3_vl.md).
    const NpyArray ref = read_npy(test::qwen3vl_dir() / q.logits);
    for (const int64_t piece : {int64_t(1) << 20, int64_t(5)}) {
      Session cs(a.engine());
      Conversation conv(cs, a.vision());
      cs.set_all_logits(true);
      auto g = conv.start(t.prompt, greedy(1), nullptr, /*defer_prefill=*/true);
      std::vector<float> all;
      for (bool done = false; !done;) {
        done = g->prefill_continue(piece);
        all.insert(all.end(), cs.all_logits().begin(), cs.all_logits().end());
      }
      EXPECT_LE(rel_diff(all, ref.data), 1e-4) << "pieces of " << piece;
    }
  }
}

TEST(Qwen3VlChat, FollowUpTurnsKeepTheImagePrefixAndEqualRecomputing) {
  Assistant a(evb(), options());
  const auto prompts = test::qwen3vl_image_prompts();
  ASSERT_FALSE(prompts.empty());
  const vision::Image& im1 = prompts.front().image;
  const vision::Image im2 = vision::test::procedural(96, 64);
  const ImageRef img1 = a.image_rgb(im1.width, im1.height, im1.rgb);
  const ImageRef img2 = a.image_rgb(im2.width, im2.height, im2.rgb);
  ASSERT_NE(img1->grid.rows * 1000 + img1->grid.cols, img2->grid.rows * 1000 + img2->grid.cols);

  Session s(a.engine());
  Conversation conv(s, a.vision());
  std::vector<Message> msgs = {{"user", "What is this?", {img1}}};
  TurnStats t1, t2, t3, t4;
  const GenerateResult r1 = conv.reply(msgs, greedy(8), {}, &t1);
  EXPECT_EQ(r1.tokens, fresh(a, msgs, 8));
  EXPECT_EQ(t1.images, 1);
  EXPECT_EQ(t1.reused_tokens, 0);

  // A text follow-up: the image's rows stay in the cache (no tower run), the new text sits at
  // its position + the image's rope delta.
  msgs.push_back({"assistant", r1.text, {}});
  msgs.push_back({"user", "And the colour?", {}});
  const GenerateResult r2 = conv.reply(msgs, greedy(8), {}, &t2);
  EXPECT_GE(t2.reused_tokens, t1.prompt_tokens);
  EXPECT_EQ(t2.tiles_encoded, 0);
  EXPECT_EQ(r2.tokens, fresh(a, msgs, 8));

  // A second image in a later turn: its 3D positions start after the first's shift.
  msgs.push_back({"assistant", r2.text, {}});
  msgs.push_back({"user", "And this one?", {img2}});
  const GenerateResult r3 = conv.reply(msgs, greedy(8), {}, &t3);
  EXPECT_GE(t3.reused_tokens, t2.prompt_tokens);
  EXPECT_EQ(t3.images, 2);
  EXPECT_EQ(r3.tokens, fresh(a, msgs, 8));

  // The same prompt evaluated in pieces that cut through the image runs (the server's
  // scheduler prefills a chunk per step): positions and DeepStack rows follow each piece.
  const Prompt p = a.chat_prompt(msgs);
  for (const int64_t piece : {int64_t(5), int64_t(13)}) {
    Session ps(a.engine());
    Conversation pc(ps, a.vision());
    auto g = pc.start(p, greedy(8), nullptr, /*defer_prefill=*/true);
    while (!g->prefill_continue(piece)) {
    }
    run_to_end(*g, {});
    pc.finish(*g);
    EXPECT_EQ(g->result().tokens, r3.tokens) << "pieces of " << piece;
  }

  // The same text with another image first: reuse stops where the image starts.
  const std::vector<Message> other = {{"user", "What is this?", {img2}}};
  const Prompt po = a.chat_prompt(other);
  ASSERT_EQ(po.images.size(), 1u);
  const GenerateResult r4 = conv.reply(other, greedy(8), {}, &t4);
  EXPECT_EQ(t4.reused_tokens, po.images[0].first);
  EXPECT_EQ(r4.tokens, fresh(a, other, 8));
}

TEST(Qwen3VlChat, SpeculationEqualsGreedy) {
  Assistant a(evb(), options());
  const auto prompts = test::qwen3vl_image_prompts();
  ASSERT_FALSE(prompts.empty());
  const auto& q = prompts.front();
  for (const int32_t lookup : {2, 4}) {
    Chat chat(a);
    chat.add_image(a.image_rgb(q.image.width, q.image.height, q.image.rgb));
    GenerateOptions o = greedy(int32_t(q.tokens.size()));
    o.speculative.lookup = lookup;
    o.speculative.draft_k = 4;
    const GenerateResult r = chat.send("What is this?", o);
    EXPECT_EQ(r.tokens, q.tokens) << "lookup " << lookup;
    EXPECT_GT(r.spec_passes, 0);
  }
}

// Beam search over an image prompt (tests/fixtures/golden/beam/qwen3vl_image.json, made by
// tools/golden/make_qwen3vl_beam_goldens.py): every hypothesis transformers keeps, ids equal
// and scores within 1e-4. The beams' sessions copy the first one's KV rows and rope delta.
TEST(Qwen3VlChat, BeamSearchEqualsTransformers) {
  const auto g = nlohmann::json::parse(
      read_text_file(test::fixtures_dir() / "golden" / "beam" / "qwen3vl_image.json"));
  const auto prompts = test::qwen3vl_image_prompts();
  const auto it = std::find_if(prompts.begin(), prompts.end(),
                               [&](const auto& q) { return q.name == g["image"]; });
  ASSERT_NE(it, prompts.end());
  Assistant a(evb(), options());
  Chat chat(a);
  chat.add_image(a.image_rgb(it->image.width, it->image.height, it->image.rgb));
  const Turn t = chat.turn(g["text"]);
  ASSERT_EQ(t.prompt.ids, g["prompt_ids"].get<std::vector<int32_t>>());
  for (const auto& c : g["cases"]) {
    BeamOptions b;
    b.num_beams = c["num_beams"];
    b.max_new_tokens = c["max_new_tokens"];
    b.length_penalty = c["length_penalty"];
    b.early_stopping = EarlyStopping::False;
    b.eos_ids = c["eos_ids"].get<std::vector<int32_t>>();
    BeamResult r;
    chat.beam_reply(t, b, &r);
    const auto& want = c["hypotheses"];
    ASSERT_EQ(r.hypotheses.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(r.hypotheses[i].tokens, want[i]["tokens"].get<std::vector<int32_t>>())
          << b.num_beams << " beams, hypothesis " << i;
      EXPECT_NEAR(r.hypotheses[i].score, want[i]["score"].get<double>(), 1e-4);
    }
    EXPECT_EQ(chat.last_stats().images, 1);
  }
  EXPECT_TRUE(chat.history().empty());  // a beam reply leaves the conversation as it was
}

TEST(Qwen3VlChat, HostileImages) {
  AssistantOptions ao = options();
  ao.images.max_pixels = 4'000'000;
  Assistant a(evb(), ao);
  const auto pre = vision::parse_qwen_vl_preprocessor(
      nlohmann::json::parse(read_text_file(test::qwen3vl_dir() / "preprocessor_config.json")),
      "fixture");
  // Larger than max_pixels: smart_resize's own rule brings it within (the golden's
  // QwenVlPreprocess tests hold it to the reference); the reply runs.
  const vision::Image big = vision::test::procedural(1600, 1200);
  const ImageRef img = a.image_rgb(big.width, big.height, big.rgb);
  const vision::ResizedSize want =
      vision::smart_resize(1200, 1600, pre.factor(), pre.min_pixels, pre.max_pixels);
  EXPECT_EQ(img->grid.rows, want.height / pre.factor());
  EXPECT_EQ(img->grid.cols, want.width / pre.factor());
  EXPECT_LE(int64_t(want.height) * want.width, pre.max_pixels);
  Chat chat(a);
  chat.add_image(img);
  EXPECT_EQ(chat.send("What is this?", greedy(2)).tokens.size(), 2u);

  // Corrupt bytes, an empty buffer: one clear error naming the image.
  const std::vector<uint8_t> junk = {'G', 'I', 'F', '8', '9', 'a', 0, 1, 2, 3};
  expect_error([&] { a.image_bytes(junk, "upload.gif"); }, "upload.gif");
  auto bmp = test::bmp_bytes(vision::test::procedural(40, 30));
  bmp.resize(bmp.size() / 2);  // truncated pixel data
  expect_error([&] { a.image_bytes(bmp, "half.bmp"); }, "half.bmp");
  // An aspect ratio above 200 (transformers refuses it too); one too thin for the compiled
  // tower after smart_resize.
  const std::vector<uint8_t> thin(size_t(402) * 2 * 3, 100);
  expect_error([&] { a.image_rgb(402, 2, thin); }, "aspect ratio");
  const std::vector<uint8_t> strip(size_t(6400) * 40 * 3, 100);
  expect_error([&] { a.image_rgb(6400, 40, strip); }, "compiled");
  // Over the decoder's pixel limit.
  const std::vector<uint8_t> huge(size_t(2100) * 2000 * 3, 7);
  expect_error([&] { a.image_rgb(2100, 2000, huge); }, "exceeds the limit");
}

// The tiny Qwen3-VL checkpoint copied to `to` with a processor max_pixels of kCheckpointMax,
// above the 4096-patch tower edgevl compiles by default.
constexpr int64_t kCheckpointMax = 2'000'000;
void copy_with_large_max_pixels(const std::filesystem::path& to) {
  for (const auto& e : std::filesystem::directory_iterator(test::qwen3vl_dir()))
    if (e.path().extension() != ".npy")
      std::filesystem::copy_file(e.path(), to / e.path().filename());
  auto pp = nlohmann::json::parse(read_text_file(to / "preprocessor_config.json"));
  pp.erase("max_pixels");
  pp["size"] = {{"shortest_edge", 4096}, {"longest_edge", kCheckpointMax}};
  std::ofstream(to / "preprocessor_config.json") << pp.dump();
}

// A checkpoint whose max_pixels is above the largest tower edgevl compiles (4096 patches):
// images are resized to the compiled maximum instead (docs/qwen3_vl.md, "Images of any size").
TEST(Qwen3VlChat, ImagesAboveTheCompiledMaximumAreResizedToIt) {
  TempDir dir;
  copy_with_large_max_pixels(dir.path());
  constexpr int64_t kCompiled = 4096 * 16 * 16;
  const Model& m = test::compiled_model(dir.path(), "f32");
  ASSERT_EQ(m.find_graph("qwen_vision")->width, 4096);
  AssistantOptions ao = options();
  ao.images.max_pixels = 8'000'000;
  Assistant a(test::compiled_path(dir.path(), "f32"), ao);
  const vision::Image big = vision::test::procedural(1800, 1400);
  const ImageRef img = a.image_rgb(big.width, big.height, big.rgb);
  const vision::ResizedSize capped = vision::smart_resize(1400, 1800, 32, 4096, kCompiled);
  const vision::ResizedSize uncapped = vision::smart_resize(1400, 1800, 32, 4096, kCheckpointMax);
  ASSERT_GT(int64_t(uncapped.height) * uncapped.width, kCompiled);  // the rule matters here
  EXPECT_EQ(img->grid.rows, capped.height / 32);
  EXPECT_EQ(img->grid.cols, capped.width / 32);
  Chat chat(a);
  chat.add_image(img);
  EXPECT_EQ(chat.send("What is this?", greedy(1)).tokens.size(), 1u);
}

// compile --vision-max-patches widens the tower past the default 4096 patches: the same
// checkpoint's large image then keeps the reference's own smart_resize grid. Out-of-range
// values and models without a Qwen-VL tower are refused before any work.
TEST(Qwen3VlChat, CompiledWiderTowerTakesTheCheckpointsLargeImages) {
  TempDir dir;
  copy_with_large_max_pixels(dir.path());
  compiler::CompileOptions o;
  o.input = dir.path();
  o.output = dir.path() / "wide.evb";
  o.quant = "f32";
  o.vision_max_patches = 8192;
  compiler::compile_model(o);
  {
    const Model m(o.output);
    // The checkpoint's max_pixels in merge blocks of 32x32 pixels, 4 patches each.
    EXPECT_EQ(m.find_graph("qwen_vision")->width, kCheckpointMax / (32 * 32) * 4);
  }
  AssistantOptions ao = options();
  ao.images.max_pixels = 8'000'000;
  Assistant a(o.output, ao);
  const vision::Image big = vision::test::procedural(1800, 1400);
  const ImageRef img = a.image_rgb(big.width, big.height, big.rgb);
  const vision::ResizedSize ref = vision::smart_resize(1400, 1800, 32, 4096, kCheckpointMax);
  ASSERT_GT(int64_t(ref.height) * ref.width, 4096 * 16 * 16);  // past the default tower
  EXPECT_EQ(img->grid.rows, ref.height / 32);
  EXPECT_EQ(img->grid.cols, ref.width / 32);
  Chat chat(a);
  chat.add_image(img);
  EXPECT_EQ(chat.send("What is this?", greedy(1)).tokens.size(), 1u);

  for (int32_t bad : {6, -4, 16388}) {
    o.vision_max_patches = bad;
    expect_error([&] { compiler::compile_model(o); }, "--vision-max-patches");
  }
  o.input = test::fixtures_dir() / "golden" / "internvl_qwen2";
  o.vision_max_patches = 64;
  expect_error([&] { compiler::compile_model(o); }, "no Qwen-VL vision tower");
}

}  // namespace
}  // namespace edgevl
