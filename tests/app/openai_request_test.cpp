// The server's sampling fields as OpenAI and llama.cpp name them, parsed into the one sampler's
// parameters; bad values are 400s naming the field.
#include <gtest/gtest.h>

#include "app/server/openai_request.h"

namespace edgevl::server {
namespace {

SamplingRequest parse(const std::string& fields) {
  const std::string body = R"({"messages":[{"role":"user","content":"hi"}])" +
                           (fields.empty() ? "" : "," + fields) + "}";
  return parse_chat_request(body, RequestLimits{}).sampling;
}

std::string param_of_error(const std::string& fields) {
  try {
    parse(fields);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.param;
  }
  return "(accepted)";
}

TEST(OpenAiRequest, SamplingFields) {
  const SamplingRequest s = parse(
      R"("temperature":0.5,"top_p":0.9,"top_k":20,"min_p":0.1,"seed":9,"presence_penalty":1.5,)"
      R"("frequency_penalty":-0.5,"repeat_penalty":1.2,"repeat_last_n":-1,"stop":["a","bc"],)"
      R"("logit_bias":{"42":-100,"7":3.5})");
  EXPECT_FLOAT_EQ(s.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 20);
  EXPECT_FLOAT_EQ(s.min_p, 0.1f);
  EXPECT_EQ(s.seed, 9u);
  EXPECT_FLOAT_EQ(s.presence_penalty, 1.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(s.repeat_penalty, 1.2f);
  EXPECT_EQ(s.repeat_last_n, -1);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"a", "bc"}));
  ASSERT_EQ(s.logit_bias.size(), 2u);
  std::map<int32_t, float> lb(s.logit_bias.begin(), s.logit_bias.end());
  EXPECT_FLOAT_EQ(lb[42], -100.f);
  EXPECT_FLOAT_EQ(lb[7], 3.5f);
  // transformers' name for the repetition penalty is accepted too.
  EXPECT_FLOAT_EQ(parse(R"("repetition_penalty":1.1)").repeat_penalty, 1.1f);
  const SamplingRequest d = parse("");
  EXPECT_EQ(d.presence_penalty, 0.f);
  EXPECT_EQ(d.frequency_penalty, 0.f);
  EXPECT_TRUE(d.logit_bias.empty());
}

TEST(OpenAiRequest, BadSamplingFieldsNameTheField) {
  EXPECT_EQ(param_of_error(R"("presence_penalty":2.5)"), "presence_penalty");
  EXPECT_EQ(param_of_error(R"("frequency_penalty":"high")"), "frequency_penalty");
  EXPECT_EQ(param_of_error(R"("logit_bias":{"x":1})"), "logit_bias");
  EXPECT_EQ(param_of_error(R"("logit_bias":{"5":101})"), "logit_bias");
  EXPECT_EQ(param_of_error(R"("logit_bias":{"-3":1})"), "logit_bias");
  EXPECT_EQ(param_of_error(R"("logit_bias":[1,2])"), "logit_bias");
  EXPECT_EQ(param_of_error(R"("repeat_last_n":-2)"), "repeat_last_n");
  EXPECT_EQ(param_of_error(R"("repeat_penalty":0)"), "repeat_penalty");
}

}  // namespace
}  // namespace edgevl::server

namespace edgevl::server {
namespace {

TEST(OpenAiRequest, ResponseFormat) {
  EXPECT_EQ(parse("").response_schema, nullptr);
  EXPECT_EQ(parse(R"("response_format":{"type":"text"})").response_schema, nullptr);
  const auto obj = parse(R"("response_format":{"type":"json_object"})").response_schema;
  ASSERT_NE(obj, nullptr);
  EXPECT_EQ(obj->type, JsonSchema::Type::Object);
  EXPECT_TRUE(obj->props.empty());  // any object
  EXPECT_TRUE(parse(R"("response_format":{"type":"json_object"})").response_any_object);
  const auto s = parse(R"("response_format":{"type":"json_schema","json_schema":{"name":"p",)"
                       R"("strict":true,"schema":{"type":"object","properties":{)"
                       R"("b":{"type":"string"},"a":{"type":"integer"}},"required":["a"]}}})")
                     .response_schema;
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->names, (std::vector<std::string>{"b", "a"}));  // declared order, not sorted
  EXPECT_EQ(s->required, (std::vector<bool>{false, true}));
  EXPECT_FALSE(parse(R"("response_format":{"type":"json_schema","json_schema":{"name":"p",)"
                     R"("schema":{"type":"object"}}})")
                   .response_any_object);
  EXPECT_EQ(param_of_error(R"("response_format":{"type":"xml"})"), "response_format");
  EXPECT_EQ(param_of_error(R"("response_format":"json")"), "response_format");
  EXPECT_EQ(param_of_error(R"("response_format":{"type":"json_schema"})"), "response_format");
  try {
    parse(R"("response_format":{"type":"json_schema","json_schema":{"name":"p","schema":)"
          R"({"type":"string","format":"date-time"}}})");
    FAIL() << "an unsupported keyword was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(std::string(e.what()).find("unsupported keyword 'format' at #"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace edgevl::server

namespace edgevl::server {
namespace {

// num_beams on a server whose batched decode step is 4 rows wide.
SamplingRequest parse_beams(const std::string& fields) {
  RequestLimits lim;
  lim.max_beams = 4;
  const std::string body = R"({"messages":[{"role":"user","content":"hi"}],)" + fields + "}";
  return parse_chat_request(body, lim).sampling;
}

ApiError beam_error(const std::string& fields) {
  try {
    parse_beams(fields);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "", "(accepted)");
}

TEST(OpenAiRequest, BeamFields) {
  const SamplingRequest d = parse("");
  EXPECT_EQ(d.num_beams, 1);
  EXPECT_FLOAT_EQ(d.length_penalty, 1.f);
  EXPECT_EQ(d.early_stopping, "false");
  const SamplingRequest s =
      parse_beams(R"("num_beams":4,"length_penalty":-0.5,"early_stopping":"never")");
  EXPECT_EQ(s.num_beams, 4);
  EXPECT_FLOAT_EQ(s.length_penalty, -0.5f);
  EXPECT_EQ(s.early_stopping, "never");
  EXPECT_EQ(parse_beams(R"("num_beams":2,"early_stopping":true)").early_stopping, "true");
  EXPECT_EQ(parse_beams(R"("num_beams":2,"early_stopping":false)").early_stopping, "false");
  // Deterministic: greedy settings, a seed, streaming and ignore_eos go with it.
  const SamplingRequest g = parse_beams(
      R"("num_beams":3,"temperature":0,"top_p":1,"top_k":0,"min_p":0,"repeat_penalty":1,)"
      R"("seed":5,"stream":true,"ignore_eos":true,"response_format":{"type":"text"})");
  EXPECT_EQ(g.num_beams, 3);
  EXPECT_TRUE(g.stream);
  // num_beams 1 is no beam search: sampling fields stay allowed.
  EXPECT_FLOAT_EQ(parse_beams(R"("num_beams":1,"temperature":0.7,"top_k":5)").temperature, 0.7f);
}

TEST(OpenAiRequest, BadBeamFieldsNameTheField) {
  const ApiError over = beam_error(R"("num_beams":5)");
  EXPECT_EQ(over.status, 400);
  EXPECT_EQ(over.param, "num_beams");
  EXPECT_NE(std::string(over.what()).find("limit of 4"), std::string::npos) << over.what();
  // Without a batched decode step (the default limits) beam search is refused.
  EXPECT_EQ(param_of_error(R"("num_beams":2)"), "num_beams");
  EXPECT_EQ(param_of_error(R"("num_beams":1)"), "(accepted)");
  EXPECT_EQ(beam_error(R"("num_beams":0)").param, "num_beams");
  EXPECT_EQ(beam_error(R"("num_beams":-3)").param, "num_beams");
  EXPECT_EQ(beam_error(R"("num_beams":2.5)").param, "num_beams");
  EXPECT_EQ(beam_error(R"("num_beams":"2")").param, "num_beams");
  EXPECT_EQ(beam_error(R"("num_beams":2,"length_penalty":"long")").param, "length_penalty");
  EXPECT_EQ(beam_error(R"("num_beams":2,"length_penalty":11)").param, "length_penalty");
  EXPECT_EQ(beam_error(R"("num_beams":2,"early_stopping":"sometimes")").param, "early_stopping");
  EXPECT_EQ(beam_error(R"("num_beams":2,"early_stopping":"true")").param, "early_stopping");
  EXPECT_EQ(beam_error(R"("num_beams":2,"early_stopping":1)").param, "early_stopping");
  // What beam search would silently ignore is refused, naming the other field.
  for (const auto& [fields, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("temperature":0.8)", "temperature"},
           {R"("temperature":1)", "temperature"},
           {R"("top_p":0.9)", "top_p"},
           {R"("top_k":40)", "top_k"},
           {R"("min_p":0.05)", "min_p"},
           {R"("repeat_penalty":1.1)", "repeat_penalty"},
           {R"("repetition_penalty":1.1)", "repetition_penalty"},
           {R"("presence_penalty":0.5)", "presence_penalty"},
           {R"("frequency_penalty":0.5)", "frequency_penalty"},
           {R"("logit_bias":{"3":1})", "logit_bias"},
           {R"("stop":"x")", "stop"},
           {R"("response_format":{"type":"json_object"})", "response_format"},
           {R"("n":2)", "n"}}) {
    const ApiError e = beam_error(R"("num_beams":2,)" + fields);
    EXPECT_EQ(e.status, 400) << fields;
    EXPECT_EQ(e.param, param) << fields;
  }
  // Images: the search starts from the image prompt's rows, as the CLI's --beams.
  RequestLimits lim;
  lim.max_beams = 4;
  const ChatRequest with_image = parse_chat_request(
      R"({"num_beams":2,"messages":[{"role":"system","content":"s"},{"role":"user","content":[)"
      R"({"type":"image_url","image_url":{"url":"data:image/png;base64,aGk="}}]}]})",
      lim);
  EXPECT_EQ(with_image.sampling.num_beams, 2);
  EXPECT_EQ(with_image.messages[1].images.size(), 1u);
  // The same fields on /v1/completions.
  const std::string body = R"({"prompt":"p","num_beams":3,"length_penalty":2})";
  const CompletionRequest c = parse_completion_request(body, lim);
  EXPECT_EQ(c.sampling.num_beams, 3);
  EXPECT_FLOAT_EQ(c.sampling.length_penalty, 2.f);
  try {
    parse_completion_request(R"({"prompt":"p","num_beams":3,"top_k":3})", lim);
    ADD_FAILURE() << "top_k was accepted with num_beams";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "top_k");
  }
}

}  // namespace
}  // namespace edgevl::server

namespace edgevl::server {
namespace {

// chat_template_kwargs.enable_thinking (vLLM's and SGLang's field): Qwen3.5's thinking switch.
TEST(OpenAiRequest, EnableThinking) {
  auto chat = [](const std::string& fields) {
    return parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}])" + fields + "}",
                              RequestLimits{});
  };
  EXPECT_TRUE(chat("").thinking);
  EXPECT_FALSE(chat(R"(,"chat_template_kwargs":{"enable_thinking":false})").thinking);
  EXPECT_TRUE(chat(R"(,"chat_template_kwargs":{"enable_thinking":true})").thinking);
  EXPECT_TRUE(chat(R"(,"chat_template_kwargs":{})").thinking);
  EXPECT_EQ(param_of_error(R"("chat_template_kwargs":{"enable_thinking":"no"})"),
            "chat_template_kwargs.enable_thinking");
  EXPECT_EQ(param_of_error(R"("chat_template_kwargs":[1])"), "chat_template_kwargs");
}

}  // namespace
}  // namespace edgevl::server

namespace edgevl::server {
namespace {

// video_url parts (vLLM's form): data:video/... bytes, marked as a video; the image_url checks
// hold for them (a data: URI of another type, a remote URL without --allow-remote-images), and
// num_beams takes them as it takes images.
TEST(OpenAiRequest, VideoUrlParts) {
  const auto body = [](const std::string& part, const std::string& extra = "") {
    return R"({)" + extra + R"("messages":[{"role":"user","content":[)" + part +
           R"(,{"type":"text","text":"What happens?"}]}]})";
  };
  const ChatRequest r = parse_chat_request(
      body(R"({"type":"video_url","video_url":{"url":"data:video/mp4;base64,aGk="}})"), {});
  ASSERT_EQ(r.messages[0].images.size(), 1u);
  EXPECT_TRUE(r.messages[0].images[0].video);
  EXPECT_EQ(r.messages[0].images[0].bytes, (std::vector<uint8_t>{'h', 'i'}));
  EXPECT_EQ(r.messages[0].text, "What happens?");
  const ChatRequest i = parse_chat_request(
      body(R"({"type":"image_url","image_url":{"url":"data:image/png;base64,aGk="}})"), {});
  EXPECT_FALSE(i.messages[0].images[0].video);
  const auto message = [&](const std::string& b, const RequestLimits& lim = {}) -> std::string {
    try {
      parse_chat_request(b, lim);
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << b;
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_NE(
      message(body(R"({"type":"video_url","video_url":{"url":"data:image/png;base64,aGk="}})"))
          .find("is not a video"),
      std::string::npos);
  EXPECT_NE(
      message(body(R"({"type":"image_url","image_url":{"url":"data:video/mp4;base64,aGk="}})"))
          .find("is not an image"),
      std::string::npos);
  EXPECT_NE(message(body(R"({"type":"video_url","video_url":{"url":"https://x/v.mp4"}})"))
                .find("remote video URLs"),
            std::string::npos);
  EXPECT_NE(
      message(body(R"({"type":"video_url","image_url":{"url":"data:video/mp4;base64,aGk="}})"))
          .find("needs 'video_url'"),
      std::string::npos);
  RequestLimits lim;
  lim.max_beams = 4;
  EXPECT_EQ(message(body(R"({"type":"video_url","video_url":{"url":"data:video/mp4;base64,aGk="}})",
                         R"("num_beams":2,)"),
                    lim),
            "(accepted)");
}

}  // namespace
}  // namespace edgevl::server
