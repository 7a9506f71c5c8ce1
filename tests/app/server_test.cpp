// `edgevl serve` driven over HTTP as clients drive it: the real binary on a free loopback
// port. Plain, streamed, image and completion requests; stop strings; follow-up turns reusing
// the KV prefix; image features from the cache; a client leaving mid-stream; every error
// status; two parallel greedy streams equal to the same requests run alone; beam search equal to
// the runtime's; clean shutdown.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "compiler/compile.h"
#include "core/mapped_file.h"
#include "core/temp_dir.h"
#include "runtime/assistant.h"
#include "runtime/chat/conversation.h"
#include "runtime/decoding/beam_search.h"
#include "support/model_fixture.h"
#include "support/qwen3vl_fixture.h"
#include "support/server_process.h"
#include "support/test_paths.h"
#include "text/tokenizer.h"
#include "vision/image.h"
#include "vision/video.h"

namespace edgevl {
namespace {

using nlohmann::json;
using namespace test;  // NOLINT: the server helpers (support/server_process.h)

TEST(Server, PlainStreamedImageCompletionAndFollowUp) {
  ServerProcess srv(vlm(), {"--parallel", "2"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  ASSERT_TRUE(srv.wait_ready()) << srv.log();
  auto c = srv.client();

  int status = 0;
  const json plain = post(c, "/v1/chat/completions", chat_body("Hello there", 12), &status);
  ASSERT_EQ(status, 200) << plain.dump();
  EXPECT_EQ(plain["object"], "chat.completion");
  EXPECT_EQ(plain["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(plain["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(plain["usage"]["completion_tokens"], 12);
  const std::string text = plain["choices"][0]["message"]["content"];

  // The same request streamed: the same text, a finish reason, usage last, then [DONE].
  json sb = chat_body("Hello there", 12, true);
  sb["stream_options"] = {{"include_usage", true}};
  auto r = c.Post("/v1/chat/completions", sb.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const Streamed st = parse_sse(r->body);
  EXPECT_TRUE(st.done);
  EXPECT_EQ(st.text, text);
  EXPECT_EQ(st.finish, "length");
  EXPECT_EQ(st.usage["completion_tokens"], 12);
  EXPECT_GT(st.usage["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);

  // A follow-up turn keeps the conversation's prefix in the cache.
  json follow = chat_body("", 6);
  follow["messages"] = json::array({{{"role", "user"}, {"content", "Hello there"}},
                                    {{"role", "assistant"}, {"content", text}},
                                    {{"role", "user"}, {"content", "And then?"}}});
  const json fr = post(c, "/v1/chat/completions", follow, &status);
  ASSERT_EQ(status, 200) << fr.dump();
  EXPECT_GE(fr["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            plain["usage"]["prompt_tokens"].get<int>());

  // Stop strings: cut before the first occurrence, finish "stop".
  // (One ASCII character of the reply: random weights write any bytes.)
  size_t pick = 1;
  while (pick < text.size() && !std::isalnum(static_cast<unsigned char>(text[pick]))) ++pick;
  if (pick < text.size()) {
    json stop = chat_body("Hello there", 12);
    const std::string s = text.substr(pick, 1);
    stop["stop"] = s;
    const json sr = post(c, "/v1/chat/completions", stop, &status);
    ASSERT_EQ(status, 200);
    EXPECT_EQ(sr["choices"][0]["message"]["content"], text.substr(0, text.find(s)));
    EXPECT_EQ(sr["choices"][0]["finish_reason"], "stop");
  }

  // An image as a data: URI, twice: the second comes from the feature cache.
  const auto png = vision::read_image_file(fixtures_dir() / "images" / "src" / "square_64.png");
  const std::string uri = "data:image/png;base64," + base64(png);
  json img = chat_body("", 6);
  img["messages"][0]["content"] =
      json::array({{{"type", "image_url"}, {"image_url", {{"url", uri}}}},
                   {{"type", "text"}, {"text", "What?"}}});
  const json i1 = post(c, "/v1/chat/completions", img, &status);
  ASSERT_EQ(status, 200) << i1.dump();
  EXPECT_GT(i1["usage"]["prompt_tokens"].get<int>(), 256);
  const json i2 = post(c, "/v1/chat/completions", img, &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(i1["choices"][0]["message"]["content"], i2["choices"][0]["message"]["content"]);
  EXPECT_EQ(metric(c, "edgevl_image_cache_hits_total"), 1);

  // Raw completions, plain and streamed.
  const json comp =
      post(c, "/v1/completions",
           {{"prompt", "Once upon a time"}, {"max_tokens", 5}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200) << comp.dump();
  EXPECT_EQ(comp["object"], "text_completion");
  auto cs = c.Post(
      "/v1/completions",
      json{{"prompt", "Once upon a time"}, {"max_tokens", 5}, {"temperature", 0}, {"stream", true}}
          .dump(),
      "application/json");
  ASSERT_TRUE(cs);
  EXPECT_EQ(parse_sse(cs->body).text, comp["choices"][0]["text"]);

  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["vision"], true);
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_NE(page->body.find("edgevl"), std::string::npos);
  EXPECT_GE(metric(c, "edgevl_generated_tokens_total"), 12 + 12 + 6);
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

// Qwen3-VL through the server: an image_url data: URL, then a follow-up turn that reuses the
// image's prefix (and its rope delta), each reply equal to the runtime's in-process answer
// (whose ids are transformers': qwen3vl_conversation_test); num_beams with the image equals the
// runtime's beam search of it; a corrupt image is a 400.
TEST(Server, Qwen3VlImageDataUrlAndFollowUp) {
  const auto prompts = test::qwen3vl_image_prompts();
  ASSERT_FALSE(prompts.empty());
  const test::Qwen3VlImagePrompt& q = prompts.front();
  const std::vector<uint8_t> bmp = test::bmp_bytes(q.image);
  const std::string evb = test::compiled_path(test::qwen3vl_dir(), "f32").string();
  GenerateOptions g;
  g.sampling.temperature = 0;
  g.ignore_eos = true;
  std::vector<Message> msgs;
  std::string first, second, beam_text;
  {
    AssistantOptions ao;
    ao.threads = 2;
    Assistant a(evb, ao);
    msgs = {{"user", "What is this?", {a.image_bytes(bmp, "image")}}};
    Session s(a.engine());
    Conversation conv(s, a.vision());
    g.n_predict = int32_t(q.tokens.size());
    const GenerateResult r1 = conv.reply(msgs, g);
    ASSERT_EQ(r1.tokens, q.tokens);
    first = r1.text;
    msgs.push_back({"assistant", first, {}});
    msgs.push_back({"user", "And then?", {}});
    Session fresh(a.engine());
    Conversation conv2(fresh, a.vision());
    g.n_predict = 8;
    second = conv2.reply(msgs, g).text;
    const Prompt p =
        build_chat_prompt(a.model(), {{"user", "What is this?", {a.image_bytes(bmp, "image")}}});
    BeamOptions b;
    b.num_beams = 2;
    b.max_new_tokens = 6;
    b.eos_ids = {-1};  // ignore_eos, as chat_body asks
    b.prefill = [&](Session& s) { return eval_prompt(s, a.vision(), p); };
    beam_text =
        beam_reply(a.model(), beam_search(a.engine(), p.ids, b).hypotheses.front(), b.eos_ids).text;
  }

  ServerProcess srv(evb, {"--parallel", "1"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  ASSERT_TRUE(srv.wait_ready()) << srv.log();
  auto c = srv.client();
  const json image_part = {{"type", "image_url"},
                           {"image_url", {{"url", "data:image/bmp;base64," + base64(bmp)}}}};
  json body = chat_body("", int(q.tokens.size()));
  body["messages"][0]["content"] =
      json::array({image_part, {{"type", "text"}, {"text", "What is this?"}}});
  int status = 0;
  const json r1 = post(c, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r1.dump();
  EXPECT_EQ(r1["choices"][0]["message"]["content"], first);
  EXPECT_EQ(r1["usage"]["prompt_tokens"], q.prompt_ids.size());

  json follow = chat_body("", 8);
  follow["messages"] = json::array({body["messages"][0],
                                    {{"role", "assistant"}, {"content", first}},
                                    {{"role", "user"}, {"content", "And then?"}}});
  const json r2 = post(c, "/v1/chat/completions", follow, &status);
  ASSERT_EQ(status, 200) << r2.dump();
  EXPECT_EQ(r2["choices"][0]["message"]["content"], second);
  EXPECT_GE(r2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            int(q.prompt_ids.size()));

  // The follow-up streamed: the same text.
  follow["stream"] = true;
  auto st = c.Post("/v1/chat/completions", follow.dump(), "application/json");
  ASSERT_TRUE(st);
  EXPECT_EQ(parse_sse(st->body).text, second);

  // num_beams with the image: the runtime's beam search from the image prompt's rows.
  json beams = chat_body("", 6);
  beams["messages"] = body["messages"];
  beams["num_beams"] = 2;
  const json rb = post(c, "/v1/chat/completions", beams, &status);
  ASSERT_EQ(status, 200) << rb.dump();
  EXPECT_EQ(rb["choices"][0]["message"]["content"], beam_text);
  EXPECT_EQ(rb["usage"]["prompt_tokens"], q.prompt_ids.size());

  json bad = body;
  bad["messages"][0]["content"][0]["image_url"]["url"] = "data:image/png;base64,aGVsbG8gd29ybGQ=";
  const json e = post(c, "/v1/chat/completions", bad, &status);
  EXPECT_EQ(status, 400) << e.dump();
  EXPECT_NE(e.dump().find("messages[0] image"), std::string::npos) << e.dump();
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

// A video_url part (vLLM's form) with a data: URL on Qwen3-VL: the greedy ids of the reference
// (golden_qwen3vl_video_test) as text, its prompt length; a video_url whose bytes are not a
// video is a 400 naming the part.
TEST(Server, Qwen3VlVideoDataUrl) {
  if (!vision::video_supported()) GTEST_SKIP() << "built without FFmpeg's libraries";
  const auto dir = test::qwen3vl_dir();
  const json v = json::parse(read_text_file(dir / "video.json"));
  const std::string clip =
      read_text_file(test::fixtures_dir() / "video" / "gradient_88x60_6fps.mp4");
  const std::vector<uint8_t> bytes(clip.begin(), clip.end());
  const std::string evb = test::compiled_path(dir, "f32").string();
  const std::vector<int32_t> tokens = v["tokens"];
  std::string want;
  {
    AssistantOptions ao;
    ao.threads = 2;
    Assistant a(evb, ao);
    want = text::decode(a.model().tokenizer(), tokens);
  }
  ServerProcess srv(evb, {"--parallel", "1"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  ASSERT_TRUE(srv.wait_ready()) << srv.log();
  auto c = srv.client();
  json body = chat_body("", int(tokens.size()));
  body["ignore_eos"] = true;
  body["messages"][0]["content"] = json::array(
      {{{"type", "video_url"}, {"video_url", {{"url", "data:video/mp4;base64," + base64(bytes)}}}},
       {{"type", "text"}, {"text", v["question"]}}});
  int status = 0;
  const json r = post(c, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["choices"][0]["message"]["content"], want);
  EXPECT_EQ(r["usage"]["prompt_tokens"], v["prompt_ids"].size());
  json bad = body;
  bad["messages"][0]["content"][0]["video_url"]["url"] = "data:video/mp4;base64,aGVsbG8gd29ybGQ=";
  const json e = post(c, "/v1/chat/completions", bad, &status);
  EXPECT_EQ(status, 400) << e.dump();
  EXPECT_NE(e.dump().find("messages[0] video"), std::string::npos) << e.dump();
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(Server, EveryErrorStatus) {
  ServerProcess srv(
      vlm(), {"--parallel", "1", "--queue", "0", "--max-body", "20000", "--max-images", "1"});
  ASSERT_TRUE(srv.wait_ready()) << srv.log();
  auto c = srv.client();
  const auto expect = [&](const std::string& body, int want, const std::string& needle,
                          const std::string& path = "/v1/chat/completions") {
    auto r = c.Post(path, body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, want) << body.substr(0, 200) << " -> " << r->body;
    const json j = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r->body;
  };
  expect("{not json", 400, "not valid JSON");
  expect(R"({"messages": []})", 400, "non-empty");
  expect(R"({"messages": [{"role": "user", "content": "x"}], "temperature": 7})", 400,
         "temperature");
  expect(R"({"messages": [{"role": "robot", "content": "x"}]})", 400, "role");
  expect(R"({"messages": [{"role": "user", "content": "x"}], "n": 2})", 400, "n = 1");
  expect(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 999999})", 400,
         "context");
  expect(R"({"messages": [{"role": "user", "content": [{"type": "image_url",
           "image_url": {"url": "https://example.com/a.png"}}]}]})",
         400, "remote image");
  expect(R"({"messages": [{"role": "user", "content": [{"type": "image_url",
           "image_url": {"url": "data:image/png;base64,%%%%"}}]}]})",
         400, "malformed");
  expect(R"({"messages": [{"role": "user", "content": [{"type": "image_url",
           "image_url": {"url": "data:image/png;base64,aGVsbG8gd29ybGQ="}}]}]})",
         400, "messages[0] image");
  expect(R"({"prompt": 5})", 400, "prompt", "/v1/completions");
  expect(std::string(30000, ' '), 413, "--max-body");
  auto missing = c.Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);

  // 429: one slot, no queue, a long generation running (streamed, and cancelled by its client
  // once the 429 was seen).
  std::atomic<bool> seen_429{false}, streaming{false};
  std::thread busy([&] {
    auto c2 = srv.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = chat_body("long", 3000, true).dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      streaming = true;
      return !seen_429;
    };
    c2.send(req);
  });
  while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int status = 0;
  post(c, "/v1/chat/completions", chat_body("x", 1), &status);
  EXPECT_EQ(status, 429);
  seen_429 = true;
  busy.join();
  EXPECT_EQ(srv.stop(), 0);
}

TEST(Server, LoadingAnswers503) {
  ServerProcess srv(vlm(), {}, "EDGEVL_SERVE_LOAD_DELAY_MS=1500");
  ASSERT_GT(srv.port(), 0) << srv.log();
  auto c = srv.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  int status = 0;
  const json j = post(c, "/v1/chat/completions", chat_body("x", 1), &status);
  EXPECT_EQ(status, 503);
  EXPECT_TRUE(j.contains("error"));
  EXPECT_TRUE(srv.wait_ready());
}

TEST(Server, ClientLeavingMidStreamCancels) {
  ServerProcess srv(vlm(), {"--parallel", "1"});
  ASSERT_TRUE(srv.wait_ready()) << srv.log();
  {
    auto c = srv.client();
    int chunks = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = chat_body("go on", 3000, true).dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
    c.send(req);  // the receiver stops after 3 chunks: the client closes the connection
  }
  auto c = srv.client();
  int64_t cancelled = 0;
  for (int i = 0; i < 300 && cancelled < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cancelled = metric(c, "edgevl_cancelled_total");
  }
  EXPECT_EQ(cancelled, 1);
  EXPECT_LT(metric(c, "edgevl_generated_tokens_total"), 3000);
  int status = 0;
  post(c, "/v1/chat/completions", chat_body("still there?", 2), &status);
  EXPECT_EQ(status, 200);
}

TEST(Server, ParallelGreedyStreamsEqualTheSameRequestsAlone) {
  ServerProcess srv(vlm_w8a8(), {"--parallel", "2"});
  ASSERT_TRUE(srv.wait_ready()) << srv.log();
  const std::vector<std::string> prompts = {"Tell me about rivers", "Why do cats purr"};
  // The first stream is much longer, so it is still generating when the second arrives even on
  // a loaded CI machine.
  const std::vector<int> tokens = {2000, 300};
  std::vector<std::string> alone, together(2);
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto c = srv.client();
    auto r = c.Post("/v1/chat/completions", chat_body(prompts[i], tokens[i], true).dump(),
                    "application/json");
    ASSERT_TRUE(r);
    alone.push_back(parse_sse(r->body).text);
  }
  // Fresh slots for the parallel run: a new server, so no prefix is shared with the above.
  // The second request is sent once the first has streamed its first chunk, so their decode
  // steps overlap.
  ServerProcess srv2(vlm_w8a8(), {"--parallel", "2"});
  ASSERT_TRUE(srv2.wait_ready());
  std::promise<void> first_chunk;
  Streamed first;
  std::thread a =
      stream_in_background(srv2, chat_body(prompts[0], tokens[0], true), &first_chunk, &first);
  first_chunk.get_future().wait();
  auto c = srv2.client();
  auto r = c.Post("/v1/chat/completions", chat_body(prompts[1], tokens[1], true).dump(),
                  "application/json");
  ASSERT_TRUE(r);
  together[1] = parse_sse(r->body).text;
  a.join();
  together[0] = first.text;
  // Some decode steps ran both sequences.
  EXPECT_GT(metric(c, "edgevl_decode_rows_total"), metric(c, "edgevl_decode_steps_total"));
  EXPECT_EQ(together, alone);
}

// num_beams: the answer is the runtime's beam search of the same prompt on the same model,
// computed here as `edgevl run --beams` does; plain, streamed (the text in one chunk) and chat.
// A search runs alone on the engine: a stream generating when it arrives and a request sent
// while it waits both complete. --timeout ends a search.
TEST(Server, BeamSearchEqualsTheRuntimes) {
  const std::string path = vlm_w8a8();
  ServerProcess srv(path, {"--parallel", "2"});
  ASSERT_TRUE(srv.wait_ready()) << srv.log();
  Model model(path);
  Engine engine(model, EngineOptions{2});
  // The expected choice and usage: {text, finish_reason, prompt_tokens, completion_tokens}.
  const auto expected = [&](const Prompt& p, const BeamOptions& b) {
    std::vector<int32_t> toks = beam_search(engine, p.ids, b).hypotheses.front().tokens;
    const std::vector<int32_t> stops = b.eos_ids.empty() ? model.stop_ids() : b.eos_ids;
    const bool eos = std::find(stops.begin(), stops.end(), toks.back()) != stops.end();
    if (eos) toks.pop_back();
    std::vector<int32_t> shown;
    for (int32_t t : toks)
      if (t < model.tokenizer().vocab_size()) shown.push_back(t);
    return json::array({text::decode(model.tokenizer(), shown), eos ? "stop" : "length",
                        p.ids.size(), toks.size()});
  };
  const auto answer = [](const json& j) {
    const json& ch = j["choices"][0];
    return json::array({ch.contains("text") ? ch["text"] : ch["message"]["content"],
                        ch["finish_reason"], j["usage"]["prompt_tokens"],
                        j["usage"]["completion_tokens"]});
  };
  auto c = srv.client();
  int status = 0;
  const std::string story = "Once upon a time";
  const Prompt raw = build_raw_prompt(model, story, true);
  BeamOptions b;
  b.num_beams = 2;
  b.max_new_tokens = 10;
  json j =
      post(c, "/v1/completions",
           {{"prompt", story}, {"max_tokens", 10}, {"num_beams", 2}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(answer(j), expected(raw, b));

  b.num_beams = 4;
  b.max_new_tokens = 12;
  b.length_penalty = 0.5f;
  b.early_stopping = EarlyStopping::Never;
  b.eos_ids = {-1};  // ignore_eos
  const json e4 = expected(raw, b);
  json body = {{"prompt", story},       {"max_tokens", 12},          {"num_beams", 4},
               {"length_penalty", 0.5}, {"early_stopping", "never"}, {"ignore_eos", true}};
  j = post(c, "/v1/completions", body, &status);
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(answer(j), e4);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  const Streamed st = parse_sse(r->body);
  EXPECT_TRUE(st.done);
  EXPECT_EQ(
      json::array({st.text, st.finish, st.usage["prompt_tokens"], st.usage["completion_tokens"]}),
      e4);

  // Chat, sent while an ordinary stream generates; a plain request sent while it waits.
  b.max_new_tokens = 8;
  b.length_penalty = 1.0f;
  b.early_stopping = EarlyStopping::True;
  b.eos_ids.clear();
  const json ec = expected(build_chat_prompt(model, {{"user", "Tell me about rivers", {}}}), b);
  std::promise<void> first_chunk;
  Streamed ordinary;
  std::thread a =
      stream_in_background(srv, chat_body("Why do cats purr", 200, true), &first_chunk, &ordinary);
  first_chunk.get_future().wait();
  json bj = chat_body("Tell me about rivers", 8);
  bj.erase("ignore_eos");
  bj["num_beams"] = 4;
  bj["early_stopping"] = true;
  std::future<json> beam = std::async(std::launch::async, [&] {
    auto c2 = srv.client();
    return post(c2, "/v1/chat/completions", bj);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const json plain = post(c, "/v1/chat/completions", chat_body("Hello there", 5), &status);
  EXPECT_EQ(status, 200) << plain.dump();
  EXPECT_EQ(plain["usage"]["completion_tokens"], 5);
  EXPECT_EQ(answer(beam.get()), ec);
  a.join();
  EXPECT_TRUE(ordinary.done);
  EXPECT_EQ(ordinary.finish, "length");

  // Above the batched decode width (compile --batch): a 400 naming the limit.
  const int32_t width = compiler::CompileOptions{}.decode_batch;
  j = post(c, "/v1/completions", {{"prompt", story}, {"num_beams", width + 1}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(j["error"]["param"], "num_beams");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("limit of " + std::to_string(width)),
            std::string::npos);
  EXPECT_EQ(srv.stop(), 0) << srv.log();

  // 4000 tokens x 4 beams take far longer than 0.1 s.
  ServerProcess slow(path, {"--timeout", "0.1"});
  ASSERT_TRUE(slow.wait_ready()) << slow.log();
  auto cs = slow.client();
  j = post(cs, "/v1/completions",
           {{"prompt", story}, {"max_tokens", 4000}, {"num_beams", 4}, {"ignore_eos", true}},
           &status);
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["choices"][0]["finish_reason"], "cancelled");
  EXPECT_LT(j["usage"]["completion_tokens"].get<int>(), 4000);
  EXPECT_EQ(metric(cs, "edgevl_cancelled_total"), 1);
}

// response_format: answers (plain and streamed, two slots at once) are documents of the schema;
// an unsupported keyword or too small a max_tokens is a 400 naming it.
TEST(Server, ResponseFormatJsonSchema) {
  ServerProcess srv(vlm(), {"--parallel", "2"});
  ASSERT_TRUE(srv.wait_ready()) << srv.log();
  const json schema = json::parse(R"({"type":"object","properties":{
      "city":{"type":"string","maxLength":8},
      "tags":{"type":"array","items":{"enum":["x","y"]},"maxItems":2},
      "n":{"type":"integer"}},"required":["city","n"]})");
  auto body_for = [&](int seed, bool stream) {
    json b = chat_body("Answer in JSON", 40, stream);
    b["temperature"] = 1;
    b["seed"] = seed;
    b.erase("ignore_eos");
    b["response_format"] = {
        {"type", "json_schema"},
        {"json_schema", {{"name", "place"}, {"strict", true}, {"schema", schema}}}};
    return b;
  };
  auto check_doc = [&](const std::string& text) {
    const json d = json::parse(text, nullptr, false);
    ASSERT_TRUE(d.is_object()) << text;
    ASSERT_TRUE(d.contains("city") && d["city"].is_string()) << text;
    ASSERT_TRUE(d.contains("n") && d["n"].is_number_integer()) << text;
    for (const auto& [k, v] : d.items())
      EXPECT_TRUE(k == "city" || k == "n" || k == "tags") << text;
    if (d.contains("tags")) {
      ASSERT_TRUE(d["tags"].is_array());
      EXPECT_LE(d["tags"].size(), 2u);
      for (const auto& t : d["tags"]) EXPECT_TRUE(t == "x" || t == "y") << text;
    }
  };
  std::vector<std::thread> clients;
  for (int k = 0; k < 2; ++k)
    clients.emplace_back([&, k] {
      auto c = srv.client();
      for (int seed = 1; seed <= 4; ++seed) {
        const bool stream = (seed + k) % 2 == 0;
        auto r = c.Post("/v1/chat/completions", body_for(10 * k + seed, stream).dump(),
                        "application/json");
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200) << r->body;
        if (stream) {
          const Streamed sse = parse_sse(r->body);
          check_doc(sse.text);
          EXPECT_EQ(sse.finish, "stop");
        } else {
          const json j = json::parse(r->body);
          check_doc(j["choices"][0]["message"]["content"].get<std::string>());
          EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
        }
      }
    });
  for (auto& t : clients) t.join();

  auto c = srv.client();
  int status = 0;
  json bad = body_for(1, false);
  bad["response_format"]["json_schema"]["schema"]["properties"]["city"]["pattern"] = "^A";
  json e = post(c, "/v1/chat/completions", bad, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "response_format");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("'pattern' at #/properties/city"),
            std::string::npos)
      << e.dump();
  json tiny = body_for(1, false);
  tiny["max_tokens"] = 2;
  e = post(c, "/v1/chat/completions", tiny, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "max_tokens");
  json any = chat_body("x", 30);
  any["response_format"] = {{"type", "json_object"}};
  e = post(c, "/v1/chat/completions", any, &status);
  EXPECT_EQ(status, 200) << e.dump();
  EXPECT_TRUE(json::parse(e["choices"][0]["message"]["content"].get<std::string>(), nullptr, false)
                  .is_object())
      << e.dump();
  EXPECT_EQ(srv.stop(), 0);
}

}  // namespace
}  // namespace edgevl
