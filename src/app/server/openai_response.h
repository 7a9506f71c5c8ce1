#pragma once
// Response bodies in OpenAI's shapes: chat.completion, chat.completion.chunk, text_completion,
// the error object, and the usage block.
#include <nlohmann/json.hpp>

#include <functional>
#include <span>
#include <string>

#include "app/server/openai_request.h"
#include "runtime/decoding/generate.h"

namespace edgevl::server {

// "stop" for a stop token or string, "length" at max_tokens, "cancelled" otherwise.
const char* finish_reason(StopReason r);
nlohmann::json usage_json(const GenerateResult& r);
// Not OpenAI's: the server's own timings (llama.cpp's server has the same idea), in ms.
struct Timings {
  double ttft_ms = 0;  // from arrival to the first token, queueing, vision and prefill included
  double vision_ms = 0, prefill_ms = 0, decode_ms = 0;
};
nlohmann::json timings_json(const Timings& t, const GenerateResult& r);
nlohmann::json error_json(const std::string& message, const std::string& type,
                          const std::string& param = {}, const std::string& code = {});

struct ResponseIds {
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;
  std::string model;
};

// A token id's bytes as the tokenizer decodes them (the logprobs blocks' "token" / "bytes").
using TokenBytes = std::function<std::string(int32_t)>;
// The choice's "logprobs" of tokens `lp`. Chat: {"content": [{"token", "logprob", "bytes",
// "top_logprobs": [...]}]}. Completions (OpenAI's legacy shape): {"tokens", "token_logprobs",
// "top_logprobs": [{token: logprob}], "text_offset"}, offsets counted from `text_offset`.
nlohmann::json chat_logprobs_json(std::span<const TokenLogprob> lp, const TokenBytes& bytes_of);
nlohmann::json completion_logprobs_json(std::span<const TokenLogprob> lp,
                                        const TokenBytes& bytes_of, size_t text_offset = 0);

// `logprobs`: the choice's logprobs block (null when not asked for).
nlohmann::json chat_completion_json(const ResponseIds& ids, const GenerateResult& r,
                                    const Timings& t, const nlohmann::json& logprobs = nullptr);
// One streamed chunk: `delta` {"role": ...} / {"content": ...} / {}, finish reason or null.
nlohmann::json chat_chunk_json(const ResponseIds& ids, const nlohmann::json& delta,
                               const char* finish, const nlohmann::json& logprobs = nullptr);
nlohmann::json completion_json(const ResponseIds& ids, const GenerateResult& r, const Timings& t,
                               const nlohmann::json& logprobs = nullptr);
nlohmann::json completion_chunk_json(const ResponseIds& ids, const std::string& text,
                                     const char* finish, const nlohmann::json& logprobs = nullptr);
// The usage-only chunk sent last when stream_options.include_usage is set.
nlohmann::json usage_chunk_json(const ResponseIds& ids, const char* object, const GenerateResult& r,
                                const Timings& t);

// A data: event line of a server-sent event stream.
std::string sse(const nlohmann::json& j);

}  // namespace edgevl::server
