// The C API (include/edgevl.h) as an app sees it: statuses and messages for every misuse,
// a conversation whose second turn reuses the first's cache, stopping from the callback,
// images by path, bytes and RGB buffer; and the C99 example run against the shared library.
#include "edgevl.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "runtime/assistant.h"
#include "runtime/chat/prompt.h"
#include "runtime/decoding/sampler.h"
#include "runtime/execution/session.h"
#include "support/model_fixture.h"
#include "support/qwen3vl_fixture.h"
#include "support/test_paths.h"
#include "vision/image.h"
#include "vision/video.h"

namespace {

using edgevl::test::fixtures_dir;

std::string text_model() {
  return edgevl::test::compiled_path(fixtures_dir() / "golden" / "qwen2", "f32").string();
}
std::string vision_model() {
  return edgevl::test::compiled_path(fixtures_dir() / "golden" / "internvl_qwen2", "f32").string();
}

struct Collected {
  std::string text;
  int calls = 0, stop_after = 0;
};

int collect(const char* t, size_t n, void* user) {
  auto* c = static_cast<Collected*>(user);
  c->text.append(t, n);
  ++c->calls;
  return c->stop_after > 0 && c->calls >= c->stop_after;
}

edgevl_generate_options greedy(int n) {
  edgevl_generate_options o;
  edgevl_generate_options_init(&o);
  o.temperature = 0;
  o.max_tokens = n;
  return o;
}

TEST(CApi, VersionAndMisuse) {
  EXPECT_EQ(edgevl_abi_version(), EDGEVL_ABI_VERSION);
  EXPECT_STRNE(edgevl_version(), "");
  edgevl_model* m = nullptr;
  EXPECT_EQ(edgevl_model_load(nullptr, nullptr, &m), EDGEVL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(edgevl_last_error()).find("NULL"), std::string::npos);
  EXPECT_EQ(edgevl_model_load("/nonexistent/model.evb", nullptr, &m), EDGEVL_ERR_LOAD);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(edgevl_last_error()).find("/nonexistent/model.evb"), std::string::npos);
  EXPECT_EQ(edgevl_set_isa("no-such-level"), EDGEVL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(edgevl_last_error()).find("no-such-level"), std::string::npos);
  EXPECT_EQ(edgevl_session_create(nullptr, 0, nullptr), EDGEVL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgevl_session_chat(nullptr, "hi", nullptr, nullptr, nullptr),
            EDGEVL_ERR_INVALID_ARGUMENT);
  edgevl_model_free(nullptr);  // no-ops
  edgevl_session_free(nullptr);
  EXPECT_STREQ(edgevl_status_name(EDGEVL_ERR_CONTEXT_FULL), "context_full");
}

TEST(CApi, ConversationReusesTheCacheAndTheCallbackStops) {
  edgevl_model* m = nullptr;
  edgevl_model_options mo;
  edgevl_model_options_init(&mo);
  mo.threads = 2;
  ASSERT_EQ(edgevl_model_load(text_model().c_str(), &mo, &m), EDGEVL_OK) << edgevl_last_error();
  EXPECT_EQ(edgevl_model_has_vision(m), 0);
  EXPECT_EQ(edgevl_model_threads(m), 2);
  edgevl_session* s = nullptr;
  ASSERT_EQ(edgevl_session_create(m, 0, &s), EDGEVL_OK);
  EXPECT_EQ(edgevl_session_add_image_file(s, "x.png"), EDGEVL_ERR_IMAGE);
  EXPECT_NE(std::string(edgevl_last_error()).find("text-only"), std::string::npos);

  const edgevl_generate_options g = greedy(6);
  Collected a;
  ASSERT_EQ(edgevl_session_chat(s, "Tell me a story.", &g, collect, &a), EDGEVL_OK)
      << edgevl_last_error();
  EXPECT_EQ(a.text, edgevl_session_last_text(s));
  edgevl_stats st1, st2;
  ASSERT_EQ(edgevl_session_stats(s, &st1), EDGEVL_OK);
  EXPECT_EQ(st1.reused_tokens, 0);
  EXPECT_EQ(st1.generated_tokens, 6);
  EXPECT_STREQ(st1.stop_reason, "length");

  Collected b;
  ASSERT_EQ(edgevl_session_chat(s, "Another one.", &g, collect, &b), EDGEVL_OK);
  ASSERT_EQ(edgevl_session_stats(s, &st2), EDGEVL_OK);
  EXPECT_GE(st2.reused_tokens, st1.prompt_tokens);

  // The same two turns on a fresh session give the same second answer.
  edgevl_session* fresh = nullptr;
  ASSERT_EQ(edgevl_session_create(m, 0, &fresh), EDGEVL_OK);
  Collected a2, b2;
  ASSERT_EQ(edgevl_session_chat(fresh, "Tell me a story.", &g, collect, &a2), EDGEVL_OK);
  ASSERT_EQ(edgevl_session_chat(fresh, "Another one.", &g, collect, &b2), EDGEVL_OK);
  EXPECT_EQ(b.text, b2.text);

  // Stopping from the callback.
  Collected c;
  c.stop_after = 1;
  const edgevl_generate_options g20 = greedy(20);
  ASSERT_EQ(edgevl_session_chat(s, "Stop soon.", &g20, collect, &c), EDGEVL_OK);
  edgevl_stats st3;
  edgevl_session_stats(s, &st3);
  EXPECT_STREQ(st3.stop_reason, "cancelled");
  EXPECT_EQ(c.calls, 1);
  EXPECT_LT(st3.generated_tokens, 20);

  // Past the context: a clear status, and the session still works afterwards.
  edgevl_generate_options huge = greedy(1 << 20);
  EXPECT_EQ(edgevl_session_chat(s, "More.", &huge, nullptr, nullptr), EDGEVL_ERR_CONTEXT_FULL);
  EXPECT_NE(std::string(edgevl_last_error()).find("context"), std::string::npos);
  edgevl_generate_options bad = greedy(4);
  bad.top_p = 0;
  EXPECT_EQ(edgevl_session_chat(s, "More.", &bad, nullptr, nullptr), EDGEVL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgevl_session_chat(s, "More.", &g, nullptr, nullptr), EDGEVL_OK);
  EXPECT_EQ(edgevl_session_reset(s), EDGEVL_OK);
  EXPECT_EQ(edgevl_session_complete(s, "Once upon a time", &g, nullptr, nullptr), EDGEVL_OK);

  edgevl_session_free(fresh);
  edgevl_session_free(s);
  edgevl_model_free(m);
}

TEST(CApi, ImagesByPathBytesAndRgbAgree) {
  edgevl_model* m = nullptr;
  ASSERT_EQ(edgevl_model_load(vision_model().c_str(), nullptr, &m), EDGEVL_OK)
      << edgevl_last_error();
  EXPECT_EQ(edgevl_model_has_vision(m), 1);
  const auto path = fixtures_dir() / "images" / "src" / "square_64.png";
  const std::vector<uint8_t> bytes = edgevl::vision::read_image_file(path);
  const edgevl::vision::Image img = edgevl::vision::decode_image_memory(bytes, "square");
  const edgevl_generate_options g = greedy(4);
  std::vector<std::string> answers;
  for (int how = 0; how < 3; ++how) {
    edgevl_session* s = nullptr;
    ASSERT_EQ(edgevl_session_create(m, 0, &s), EDGEVL_OK);
    edgevl_status st = how == 0 ? edgevl_session_add_image_file(s, path.c_str())
                       : how == 1
                           ? edgevl_session_add_image_bytes(s, bytes.data(), bytes.size())
                           : edgevl_session_add_image_rgb(s, img.rgb.data(), img.width, img.height);
    ASSERT_EQ(st, EDGEVL_OK) << edgevl_last_error();
    Collected c;
    ASSERT_EQ(edgevl_session_chat(s, "What is it?", &g, collect, &c), EDGEVL_OK)
        << edgevl_last_error();
    edgevl_stats stats;
    edgevl_session_stats(s, &stats);
    EXPECT_EQ(stats.images, 1);
    EXPECT_GE(stats.tiles, 1);
    answers.push_back(c.text);
    edgevl_session_free(s);
  }
  EXPECT_EQ(answers[0], answers[1]);
  EXPECT_EQ(answers[0], answers[2]);

  edgevl_session* s = nullptr;
  ASSERT_EQ(edgevl_session_create(m, 0, &s), EDGEVL_OK);
  const uint8_t junk[4] = {1, 2, 3, 4};
  EXPECT_EQ(edgevl_session_add_image_bytes(s, junk, sizeof junk), EDGEVL_ERR_IMAGE);
  EXPECT_EQ(edgevl_session_add_image_rgb(s, junk, 0, 1), EDGEVL_ERR_INVALID_ARGUMENT);
  // Two images attached, one placeholder written: the prompt is refused, nothing runs.
  ASSERT_EQ(edgevl_session_add_image_file(s, path.c_str()), EDGEVL_OK);
  ASSERT_EQ(edgevl_session_add_image_file(s, path.c_str()), EDGEVL_OK);
  EXPECT_EQ(edgevl_session_chat(s, "<image> only one", &g, nullptr, nullptr), EDGEVL_ERR_PROMPT);
  EXPECT_NE(std::string(edgevl_last_error()).find("placeholder"), std::string::npos);
  edgevl_session_free(s);
  edgevl_model_free(m);
}

// A Qwen3-VL binary through the C API: an image as RGB pixels and as encoded bytes gives the
// runtime's in-process reply (whose ids are transformers': qwen3vl_conversation_test); the
// second turn reuses the image's prefix; corrupt bytes are EDGEVL_ERR_IMAGE.
TEST(CApi, Qwen3VlImages) {
  const auto prompts = edgevl::test::qwen3vl_image_prompts();
  ASSERT_FALSE(prompts.empty());
  const auto& q = prompts.front();
  const std::vector<uint8_t> bmp = edgevl::test::bmp_bytes(q.image);
  const std::string evb = edgevl::test::compiled_path(edgevl::test::qwen3vl_dir(), "f32").string();
  std::string want1, want2;
  {
    edgevl::AssistantOptions ao;
    ao.threads = 2;
    edgevl::Assistant a(evb, ao);
    edgevl::Chat chat(a);
    edgevl::GenerateOptions g;
    g.n_predict = 6;
    g.sampling.temperature = 0;
    chat.add_image(a.image_bytes(bmp, "image"));
    want1 = chat.send("What is this?", g).text;
    want2 = chat.send("And then?", g).text;
  }
  edgevl_model_options mo;
  edgevl_model_options_init(&mo);
  mo.threads = 2;
  edgevl_model* m = nullptr;
  ASSERT_EQ(edgevl_model_load(evb.c_str(), &mo, &m), EDGEVL_OK) << edgevl_last_error();
  EXPECT_EQ(edgevl_model_has_vision(m), 1);
  const edgevl_generate_options g = greedy(6);
  for (int how = 0; how < 2; ++how) {
    edgevl_session* s = nullptr;
    ASSERT_EQ(edgevl_session_create(m, 0, &s), EDGEVL_OK);
    const edgevl_status st = how == 0 ? edgevl_session_add_image_rgb(s, q.image.rgb.data(),
                                                                     q.image.width, q.image.height)
                                      : edgevl_session_add_image_bytes(s, bmp.data(), bmp.size());
    ASSERT_EQ(st, EDGEVL_OK) << edgevl_last_error();
    Collected c1, c2;
    ASSERT_EQ(edgevl_session_chat(s, "What is this?", &g, collect, &c1), EDGEVL_OK)
        << edgevl_last_error();
    EXPECT_EQ(c1.text, want1);
    edgevl_stats stats;
    edgevl_session_stats(s, &stats);
    EXPECT_EQ(stats.images, 1);
    EXPECT_EQ(stats.prompt_tokens, int32_t(q.prompt_ids.size()));
    ASSERT_EQ(edgevl_session_chat(s, "And then?", &g, collect, &c2), EDGEVL_OK)
        << edgevl_last_error();
    EXPECT_EQ(c2.text, want2);
    edgevl_session_stats(s, &stats);
    EXPECT_GE(stats.reused_tokens, int32_t(q.prompt_ids.size()));
    edgevl_session_free(s);
  }
  edgevl_session* s = nullptr;
  ASSERT_EQ(edgevl_session_create(m, 0, &s), EDGEVL_OK);
  std::vector<uint8_t> broken = bmp;
  broken.resize(40);  // a BMP header cut short
  EXPECT_EQ(edgevl_session_add_image_bytes(s, broken.data(), broken.size()), EDGEVL_ERR_IMAGE);
  EXPECT_NE(std::string(edgevl_last_error()).find("image"), std::string::npos);
  edgevl_session_free(s);
  edgevl_model_free(m);
}

// A video through the C API (edgevl_session_add_video_file): the reply of the in-process
// conversation, whose greedy ids are transformers' (golden_qwen3vl_video_test); a file that is
// not a video is EDGEVL_ERR_IMAGE naming it.
TEST(CApi, Qwen3VlVideo) {
  if (!edgevl::vision::video_supported()) GTEST_SKIP() << "built without FFmpeg's libraries";
  const auto dir = edgevl::test::qwen3vl_dir();
  const auto v = nlohmann::json::parse(edgevl::read_text_file(dir / "video.json"));
  const std::string clip = (fixtures_dir() / "video" / "gradient_88x60_6fps.mp4").string();
  const std::string question = v["question"];
  const std::string evb = edgevl::test::compiled_path(dir, "f32").string();
  std::string want;
  {
    edgevl::AssistantOptions ao;
    ao.threads = 2;
    edgevl::Assistant a(evb, ao);
    edgevl::Chat chat(a);
    edgevl::GenerateOptions g;
    g.n_predict = 6;
    g.sampling.temperature = 0;
    chat.add_image(a.video_file(clip));
    const edgevl::GenerateResult r = chat.send(question, g);
    const std::vector<int32_t> ref = v["tokens"];
    EXPECT_EQ(r.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + 6));
    want = r.text;
  }
  edgevl_model_options mo;
  edgevl_model_options_init(&mo);
  mo.threads = 2;
  edgevl_model* m = nullptr;
  ASSERT_EQ(edgevl_model_load(evb.c_str(), &mo, &m), EDGEVL_OK) << edgevl_last_error();
  const edgevl_generate_options g = greedy(6);
  edgevl_session* s = nullptr;
  ASSERT_EQ(edgevl_session_create(m, 0, &s), EDGEVL_OK);
  ASSERT_EQ(edgevl_session_add_video_file(s, clip.c_str()), EDGEVL_OK) << edgevl_last_error();
  Collected c;
  ASSERT_EQ(edgevl_session_chat(s, question.c_str(), &g, collect, &c), EDGEVL_OK)
      << edgevl_last_error();
  EXPECT_EQ(c.text, want);
  edgevl_stats stats;
  edgevl_session_stats(s, &stats);
  EXPECT_EQ(stats.images, 1);
  EXPECT_EQ(stats.prompt_tokens, int32_t(v["prompt_ids"].size()));
  EXPECT_EQ(edgevl_session_add_video_file(s, (dir / "config.json").c_str()), EDGEVL_ERR_IMAGE);
  EXPECT_NE(std::string(edgevl_last_error()).find("config.json"), std::string::npos);
  EXPECT_EQ(edgevl_session_add_video_file(s, nullptr), EDGEVL_ERR_INVALID_ARGUMENT);
  edgevl_session_free(s);
  edgevl_model_free(m);
}

TEST(CApi, TheC99ExampleRuns) {
  const std::string cmd = std::string(EDGEVL_C_EXAMPLE) + " " + vision_model() + " -i " +
                          (fixtures_dir() / "images" / "src" / "square_64.png").string() +
                          " -n 4 'What is it?' 'And then?' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("1 image(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("reused"), std::string::npos) << out;
  // A failing call ends with status 2 and the library's message.
  FILE* q = popen((std::string(EDGEVL_C_EXAMPLE) + " /nonexistent.evb hi 2>&1").c_str(), "r");
  std::string err;
  for (size_t n; (n = fread(buf, 1, sizeof buf, q)) > 0;) err.append(buf, n);
  EXPECT_EQ(WEXITSTATUS(pclose(q)), 2);
  EXPECT_NE(err.find("/nonexistent.evb"), std::string::npos) << err;
}

}  // namespace

namespace {

// Penalties and logit bias reach the sampler through the session setters (ABI 1 unchanged).
TEST(CApi, PenaltiesAndLogitBias) {
  edgevl_model* m = nullptr;
  ASSERT_EQ(edgevl_model_load(text_model().c_str(), nullptr, &m), EDGEVL_OK) << edgevl_last_error();
  edgevl_session* s = nullptr;
  ASSERT_EQ(edgevl_session_create(m, 0, &s), EDGEVL_OK);
  const edgevl_generate_options g = greedy(12);
  auto complete = [&] {
    Collected c;
    EXPECT_EQ(edgevl_session_complete(s, "Once upon", &g, collect, &c), EDGEVL_OK)
        << edgevl_last_error();
    return c.text;
  };
  const std::string plain = complete();
  // The greedy first token, found with the C++ runtime, banned through the C API.
  const edgevl::Model& model =
      edgevl::test::compiled_model(fixtures_dir() / "golden" / "qwen2", "f32");
  edgevl::Session ref(model, edgevl::SessionOptions{1, 0});
  const auto ids = edgevl::encode_raw(model, "Once upon");
  const int32_t first = edgevl::argmax(ref.eval_tokens(ids));
  const float ban = -INFINITY;
  ASSERT_EQ(edgevl_session_set_logit_bias(s, &first, &ban, 1), EDGEVL_OK) << edgevl_last_error();
  const std::string banned = complete();
  EXPECT_NE(banned, plain);
  ASSERT_EQ(edgevl_session_set_logit_bias(s, nullptr, nullptr, 0), EDGEVL_OK);
  EXPECT_EQ(complete(), plain);
  const int32_t bad = 1 << 20;
  const float one = 1;
  EXPECT_EQ(edgevl_session_set_logit_bias(s, &bad, &one, 1), EDGEVL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(edgevl_last_error()).find("outside the vocabulary"), std::string::npos);
  // A strong presence penalty over the whole context changes the greedy text; off again, back.
  ASSERT_EQ(edgevl_session_set_penalties(s, 50.f, 0.f, -1), EDGEVL_OK);
  EXPECT_NE(complete(), plain);
  ASSERT_EQ(edgevl_session_set_penalties(s, 0.f, 0.f, 64), EDGEVL_OK);
  EXPECT_EQ(complete(), plain);
  EXPECT_EQ(edgevl_session_set_penalties(s, NAN, 0.f, 64), EDGEVL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(edgevl_session_set_penalties(s, 0.f, 0.f, -5), EDGEVL_ERR_INVALID_ARGUMENT);
  edgevl_session_free(s);
  edgevl_model_free(m);
}

// Constrained output through the C API: a JSON schema and a grammar hold sampled replies to
// their language, NULL clears, and bad input is EDGEVL_ERR_INVALID_ARGUMENT naming the problem.
TEST(CApi, JsonSchemaAndGrammarConstraints) {
  edgevl_model* m = nullptr;
  ASSERT_EQ(edgevl_model_load(text_model().c_str(), nullptr, &m), EDGEVL_OK) << edgevl_last_error();
  edgevl_session* s = nullptr;
  ASSERT_EQ(edgevl_session_create(m, 0, &s), EDGEVL_OK);
  const edgevl_generate_options plain_opts = greedy(12);
  Collected plain;
  ASSERT_EQ(edgevl_session_complete(s, "JSON:", &plain_opts, collect, &plain), EDGEVL_OK)
      << edgevl_last_error();

  const char* schema = R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":8},"n":{"type":"integer"}},"required":["name","n"]})";
  ASSERT_EQ(edgevl_session_set_json_schema(s, schema), EDGEVL_OK) << edgevl_last_error();
  edgevl_generate_options o;
  edgevl_generate_options_init(&o);
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0;
  o.max_tokens = 40;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    o.seed = seed;
    Collected c;
    ASSERT_EQ(edgevl_session_complete(s, "JSON:", &o, collect, &c), EDGEVL_OK)
        << edgevl_last_error();
    EXPECT_EQ(c.text, edgevl_session_last_text(s));
    nlohmann::json doc;
    ASSERT_NO_THROW(doc = nlohmann::json::parse(c.text)) << c.text;
    ASSERT_TRUE(doc.is_object() && doc.size() == 2) << c.text;
    ASSERT_TRUE(doc["name"].is_string()) << c.text;
    EXPECT_TRUE(doc["n"].is_number_integer()) << c.text;
  }
  Collected chat;
  ASSERT_EQ(edgevl_session_chat(s, "Describe yourself", &o, collect, &chat), EDGEVL_OK)
      << edgevl_last_error();
  EXPECT_TRUE(nlohmann::json::accept(chat.text)) << chat.text;
  edgevl_stats st;
  ASSERT_EQ(edgevl_session_stats(s, &st), EDGEVL_OK);
  EXPECT_STREQ(st.stop_reason, "stop_token");  // the document ended it
  o.max_tokens = 2;                            // below the shortest document
  EXPECT_EQ(edgevl_session_complete(s, "JSON:", &o, nullptr, nullptr), EDGEVL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(edgevl_last_error()).find("too small"), std::string::npos)
      << edgevl_last_error();
  o.max_tokens = 40;

  // A grammar replaces the schema.
  ASSERT_EQ(edgevl_session_set_grammar(s, "root ::= (\"yes\" | \"no\") \" sir\"?"), EDGEVL_OK)
      << edgevl_last_error();
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    o.seed = seed;
    Collected c;
    ASSERT_EQ(edgevl_session_complete(s, "Answer:", &o, collect, &c), EDGEVL_OK)
        << edgevl_last_error();
    EXPECT_TRUE(c.text == "yes" || c.text == "no" || c.text == "yes sir" || c.text == "no sir")
        << c.text;
  }

  // Bad input: refused, the constraint in force unchanged.
  EXPECT_EQ(edgevl_session_set_json_schema(s, "{"), EDGEVL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(edgevl_last_error()).find("not valid JSON"), std::string::npos);
  EXPECT_EQ(edgevl_session_set_json_schema(s, R"({"type":"string","pattern":"a+"})"),
            EDGEVL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(edgevl_last_error()).find("unsupported keyword 'pattern'"),
            std::string::npos)
      << edgevl_last_error();
  EXPECT_EQ(edgevl_session_set_grammar(s, "root ::= missing"), EDGEVL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(edgevl_last_error()).find("undefined rule 'missing'"), std::string::npos)
      << edgevl_last_error();
  EXPECT_EQ(edgevl_session_set_grammar(nullptr, "root ::= \"a\""), EDGEVL_ERR_INVALID_ARGUMENT);
  Collected still;
  ASSERT_EQ(edgevl_session_complete(s, "Answer:", &o, collect, &still), EDGEVL_OK);
  EXPECT_TRUE(still.text.rfind("yes", 0) == 0 || still.text.rfind("no", 0) == 0) << still.text;

  // NULL clears: greedy output is the unconstrained one again.
  ASSERT_EQ(edgevl_session_set_grammar(s, nullptr), EDGEVL_OK);
  Collected again;
  ASSERT_EQ(edgevl_session_complete(s, "JSON:", &plain_opts, collect, &again), EDGEVL_OK);
  EXPECT_EQ(again.text, plain.text);
  edgevl_session_free(s);
  edgevl_model_free(m);
}

}  // namespace
