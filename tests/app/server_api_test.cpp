// The server's API edges as an OpenAI client and an operator meet them: logprobs in both
// endpoints' shapes (streamed and not), fields it does not implement refused by name,
// --max-tokens as the default of a request without max_tokens, 405 and CORS, /metrics labels
// and gauges, one access-log line per request, and SIGTERM ending running streams properly.
#include <gtest/gtest.h>

#include <cmath>

#include "support/server_process.h"

namespace edgevl {
namespace {

using nlohmann::json;
using namespace test;  // NOLINT: the server helpers (support/server_process.h)

// Greedy: the chosen token is the most likely one, so it heads its own top list.
void expect_greedy_chat_logprobs(const json& content, size_t tokens, size_t top) {
  ASSERT_TRUE(content.is_array());
  ASSERT_EQ(content.size(), tokens);
  for (const json& e : content) {
    ASSERT_EQ(e["top_logprobs"].size(), top) << e.dump();
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
    double mass = 0, prev = 0;
    for (size_t i = 0; i < top; ++i) {
      const double l = e["top_logprobs"][i]["logprob"];
      if (i > 0) {
        EXPECT_LE(l, prev) << "top_logprobs not most likely first: " << e.dump();
      }
      prev = l;
      mass += std::exp(l);
    }
    EXPECT_LE(mass, 1.0 + 1e-4);
    if (top > 0) {
      EXPECT_EQ(e["token"], e["top_logprobs"][0]["token"]) << e.dump();
      EXPECT_NEAR(e["logprob"].get<double>(), e["top_logprobs"][0]["logprob"].get<double>(), 1e-6);
    }
    // "bytes" are the token's own; "token" is their text, a lone byte of a UTF-8 sequence
    // shown as U+FFFD (random weights pick such tokens often).
    std::string bytes;
    for (const json& b : e["bytes"]) bytes += char(b.get<int>());
    EXPECT_FALSE(bytes.empty());
    if (e["token"].get<std::string>().find("\xEF\xBF\xBD") == std::string::npos) {
      EXPECT_EQ(bytes, e["token"].get<std::string>());
    }
  }
}

// The same tokens with log-probabilities within float noise (a request that reuses a cached
// prefix evaluates fewer prompt rows per chunk, so the sums run in another order).
void expect_same_logprobs(const json& got, const json& want) {
  ASSERT_EQ(got.size(), want.size()) << got.dump() << "\n" << want.dump();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].is_number()) {
      EXPECT_NEAR(got[i].get<double>(), want[i].get<double>(), 1e-3);
      continue;
    }
    EXPECT_EQ(got[i]["token"], want[i]["token"]);
    EXPECT_NEAR(got[i]["logprob"].get<double>(), want[i]["logprob"].get<double>(), 1e-3);
    ASSERT_EQ(got[i]["top_logprobs"].size(), want[i]["top_logprobs"].size());
    for (size_t k = 0; k < got[i]["top_logprobs"].size(); ++k)
      EXPECT_EQ(got[i]["top_logprobs"][k]["token"], want[i]["top_logprobs"][k]["token"]);
  }
}

TEST(ServerApi, LogprobsChatAndCompletionsStreamedOrNot) {
  ServerProcess srv(vlm(), {"--parallel", "1"});
  ASSERT_TRUE(srv.wait_ready()) << srv.log();
  auto c = srv.client();
  int status = 0;
  json body = chat_body("Count with me", 8);
  body["logprobs"] = true;
  body["top_logprobs"] = 3;
  const json r = post(c, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  const json& content = r["choices"][0]["logprobs"]["content"];
  expect_greedy_chat_logprobs(content, 8, 3);
  EXPECT_EQ(r["usage"]["completion_tokens"], 8);

  // Streamed: the same entries, spread over the chunks.
  body["stream"] = true;
  auto st = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(st);
  const Streamed s = parse_sse(st->body);
  EXPECT_TRUE(s.done);
  expect_same_logprobs(s.logprobs, content);

  // Without logprobs the field stays null.
  const json plain = post(c, "/v1/chat/completions", chat_body("Count with me", 2), &status);
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null()) << plain.dump();

  // /v1/completions: the legacy shape; offsets count the bytes of the tokens before; the
  // tokens spell the text (where none is a lone byte of a UTF-8 sequence, shown as U+FFFD).
  const json cb = {{"prompt", "Once upon a time"},
                   {"max_tokens", 6},
                   {"temperature", 0},
                   {"ignore_eos", true},
                   {"logprobs", 2}};
  const json cr = post(c, "/v1/completions", cb, &status);
  ASSERT_EQ(status, 200) << cr.dump();
  const json& lp = cr["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 6u) << lp.dump();
  std::string spelled;
  bool whole = true;
  EXPECT_EQ(lp["text_offset"][0], 0);
  for (size_t i = 0; i < 6; ++i) {
    const std::string t = lp["tokens"][i];
    const bool lone = t.find("\xEF\xBF\xBD") != std::string::npos;
    whole = whole && !lone;
    if (i + 1 < 6 && !lone) {
      EXPECT_EQ(lp["text_offset"][i + 1].get<size_t>() - lp["text_offset"][i].get<size_t>(),
                t.size());
    }
    spelled += t;
    EXPECT_EQ(lp["top_logprobs"][i].size(), 2u);
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
  }
  if (whole) {
    EXPECT_EQ(spelled, cr["choices"][0]["text"].get<std::string>());
  }
  json cs = cb;
  cs["stream"] = true;
  auto cst = c.Post("/v1/completions", cs.dump(), "application/json");
  ASSERT_TRUE(cst);
  expect_same_logprobs(parse_sse(cst->body).logprobs, lp["token_logprobs"]);

  const auto refused = [&](json b, const char* path, const std::string& param) {
    const json e = post(c, path, b, &status);
    EXPECT_EQ(status, 400) << e.dump();
    EXPECT_EQ(e["error"]["param"], param) << e.dump();
  };
  json bad = chat_body("x", 2);
  bad["top_logprobs"] = 2;  // without logprobs: true
  refused(bad, "/v1/chat/completions", "top_logprobs");
  bad = chat_body("x", 2);
  bad["logprobs"] = true;
  bad["top_logprobs"] = 21;
  refused(bad, "/v1/chat/completions", "top_logprobs");
  bad = chat_body("x", 2);
  bad["tools"] = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  refused(bad, "/v1/chat/completions", "tools");
  bad = chat_body("x", 2);
  bad["tool_choice"] = "required";
  refused(bad, "/v1/chat/completions", "tool_choice");
  bad = chat_body("x", 2);
  bad["tool_choice"] = "none";  // nothing to refuse: no tools, no calls
  post(c, "/v1/chat/completions", bad, &status);
  EXPECT_EQ(status, 200);
  refused({{"prompt", "x"}, {"echo", true}}, "/v1/completions", "echo");
  EXPECT_EQ(srv.stop(), 0) << srv.log();
}

TEST(ServerApi, MaxTokensIsTheDefaultOfARequestWithout) {
  ServerProcess srv(vlm(), {"--max-tokens", "5"});
  ASSERT_TRUE(srv.wait_ready()) << srv.log();
  auto c = srv.client();
  json body = chat_body("Talk", 5);
  body.erase("max_tokens");
  int status = 0;
  const json r = post(c, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["usage"]["completion_tokens"], 5);  // ignore_eos: exactly the cap
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  body["max_tokens"] = 6;
  const json e = post(c, "/v1/chat/completions", body, &status);
  EXPECT_EQ(status, 400) << e.dump();
  EXPECT_EQ(e["error"]["param"], "max_tokens");
}

TEST(ServerApi, MethodsCorsLabelsAndAccessLog) {
  ServerProcess srv(vlm(), {"--cors-origin", "http://app.example"});
  ASSERT_TRUE(srv.wait_ready()) << srv.log();
  auto c = srv.client();
  auto r = c.Get("/v1/chat/completions");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "POST");
  EXPECT_NE(r->body.find("takes POST"), std::string::npos) << r->body;
  r = c.Get("/random22171");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);

  // A preflight from the admitted origin, and one from another.
  httplib::Headers from_app = {{"Origin", "http://app.example"},
                               {"Access-Control-Request-Method", "POST"}};
  r = c.Options("/v1/chat/completions", from_app);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(r->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  r = c.Options("/v1/chat/completions", {{"Origin", "http://evil.example"}});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
  int status = 0;
  auto p = c.Post("/v1/chat/completions", from_app, chat_body("hi", 2).dump(), "application/json");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, 200);
  EXPECT_EQ(p->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  post(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"ignore_eos", true}}, &status);
  EXPECT_EQ(status, 200);

  // Labels come from the route table: the random path is "unmatched", not a series of its own.
  r = c.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body.find("random22171"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find(R"(endpoint="unmatched",status="404")"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find(R"(endpoint="/v1/chat/completions",status="405")"), std::string::npos);
  EXPECT_NE(r->body.find(R"(endpoint="/v1/chat/completions",status="200")"), std::string::npos);
  EXPECT_EQ(srv.stop(), 0);
  const std::string log = srv.log();
  EXPECT_NE(log.find("POST /v1/chat/completions 200 prompt "), std::string::npos) << log;
  EXPECT_NE(log.find(" generated 2 "), std::string::npos) << log;
  EXPECT_NE(log.find("POST /v1/completions 200 prompt "), std::string::npos) << log;
  EXPECT_NE(log.find("GET /random22171 404"), std::string::npos) << log;
  EXPECT_NE(log.find("OPTIONS /v1/chat/completions 204"), std::string::npos) << log;
}

// Two streams on --parallel 2: the gauges say 2 generating, none queued (they were read before
// the fix as queue 1 / active 1: admission did not update them). SIGTERM then ends both streams
// with finish_reason "cancelled" and [DONE] before the process exits 0.
TEST(ServerApi, GaugesOnAdmissionAndStreamsEndCleanlyOnSigterm) {
  ServerProcess srv(vlm(), {"--parallel", "2"});
  ASSERT_TRUE(srv.wait_ready()) << srv.log();
  std::promise<void> first_a, first_b;
  Streamed a, b;
  std::thread ta = stream_in_background(srv, chat_body("one", 3000, true), &first_a, &a);
  std::thread tb = stream_in_background(srv, chat_body("two", 3000, true), &first_b, &b);
  first_a.get_future().wait();
  first_b.get_future().wait();
  // The first chunk (the role) comes before admission: wait for both to be admitted. Before
  // the fix the gauges kept their submit-time values until a generation ended (3000 tokens).
  auto c = srv.client();
  int64_t active = 0, queued = -1;
  for (int i = 0; i < 500 && !(active == 2 && queued == 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    active = metric(c, "edgevl_active_slots");
    queued = metric(c, "edgevl_queue_depth");
  }
  EXPECT_EQ(active, 2);
  EXPECT_EQ(queued, 0);
  EXPECT_EQ(srv.stop(), 0) << srv.log();
  ta.join();
  tb.join();
  for (const Streamed* s : {&a, &b}) {
    EXPECT_EQ(s->finish, "cancelled");
    EXPECT_TRUE(s->done);
    EXPECT_FALSE(s->text.empty());
  }
}

}  // namespace
}  // namespace edgevl
