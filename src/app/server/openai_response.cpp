#include "app/server/openai_response.h"

namespace edgevl::server {

using nlohmann::json;

const char* finish_reason(StopReason r) {
  switch (r) {
    case StopReason::StopToken:
    case StopReason::StopString: return "stop";
    case StopReason::Length: return "length";
    case StopReason::Cancelled: return "cancelled";
  }
  return "stop";
}

json usage_json(const GenerateResult& r) {
  const auto completion = int64_t(r.tokens.size());
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", r.prompt_tokens + completion},
          {"prompt_tokens_details", {{"cached_tokens", r.reused_tokens}}}};
}

json timings_json(const Timings& t, const GenerateResult& r) {
  const size_t decoded = r.tokens.empty() ? 0 : r.tokens.size() - 1;
  return {{"ttft_ms", t.ttft_ms},
          {"vision_ms", t.vision_ms},
          {"prefill_ms", t.prefill_ms},
          {"prefill_tokens", r.prompt_tokens - r.reused_tokens},
          {"decode_ms", t.decode_ms},
          {"decode_tokens_per_s", t.decode_ms > 0 ? double(decoded) * 1000.0 / t.decode_ms : 0.0}};
}

json error_json(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

namespace {

json bytes_json(const std::string& b) {
  json a = json::array();
  for (const char c : b) a.push_back(int(uint8_t(c)));
  return a;
}

}  // namespace

json chat_logprobs_json(std::span<const TokenLogprob> lp, const TokenBytes& bytes_of) {
  json content = json::array();
  for (const TokenLogprob& t : lp) {
    const std::string b = bytes_of(t.id);
    json top = json::array();
    for (const auto& [id, l] : t.top) {
      const std::string tb = bytes_of(id);
      top.push_back({{"token", tb}, {"logprob", l}, {"bytes", bytes_json(tb)}});
    }
    content.push_back(
        {{"token", b}, {"logprob", t.logprob}, {"bytes", bytes_json(b)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json completion_logprobs_json(std::span<const TokenLogprob> lp, const TokenBytes& bytes_of,
                              size_t text_offset) {
  json tokens = json::array(), logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprob& t : lp) {
    const std::string b = bytes_of(t.id);
    tokens.push_back(b);
    logprobs.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, l] : t.top) top[bytes_of(id)] = l;
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += b.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", logprobs},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json chat_completion_json(const ResponseIds& ids, const GenerateResult& r, const Timings& t,
                          const json& logprobs) {
  return {{"id", ids.id},
          {"object", "chat.completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array({{{"index", 0},
                                    {"message", {{"role", "assistant"}, {"content", r.text}}},
                                    {"logprobs", logprobs},
                                    {"finish_reason", finish_reason(r.stop)}}})},
          {"usage", usage_json(r)},
          {"timings", timings_json(t, r)}};
}

json chat_chunk_json(const ResponseIds& ids, const json& delta, const char* finish,
                     const json& logprobs) {
  return {{"id", ids.id},
          {"object", "chat.completion.chunk"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array({{{"index", 0},
                                    {"delta", delta},
                                    {"logprobs", logprobs},
                                    {"finish_reason", finish ? json(finish) : json(nullptr)}}})}};
}

json completion_json(const ResponseIds& ids, const GenerateResult& r, const Timings& t,
                     const json& logprobs) {
  return {{"id", ids.id},
          {"object", "text_completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array({{{"index", 0},
                                    {"text", r.text},
                                    {"logprobs", logprobs},
                                    {"finish_reason", finish_reason(r.stop)}}})},
          {"usage", usage_json(r)},
          {"timings", timings_json(t, r)}};
}

json completion_chunk_json(const ResponseIds& ids, const std::string& text, const char* finish,
                           const json& logprobs) {
  return {{"id", ids.id},
          {"object", "text_completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array({{{"index", 0},
                                    {"text", text},
                                    {"logprobs", logprobs},
                                    {"finish_reason", finish ? json(finish) : json(nullptr)}}})}};
}

json usage_chunk_json(const ResponseIds& ids, const char* object, const GenerateResult& r,
                      const Timings& t) {
  return {{"id", ids.id},
          {"object", object},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array()},
          {"usage", usage_json(r)},
          {"timings", timings_json(t, r)}};
}

std::string sse(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace edgevl::server
