#pragma once
// The request bodies of the OpenAI-compatible endpoints, parsed and validated without touching
// the model: a malformed or hostile body ends here as an ApiError with its HTTP status (the
// fuzz target tests/fuzz/openai_request_fuzz.cpp drives this file alone).
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/constraints/json_constraint.h"

namespace edgevl::server {

// An error answered in OpenAI's error-object shape.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string type, const std::string& message, std::string param = {},
           std::string code = {})
      : std::runtime_error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type;   // "invalid_request_error", "server_error", ...
  std::string param;  // the offending field, when there is one
  std::string code;   // e.g. "context_length_exceeded"
};

struct RequestLimits {
  int max_images = 8;                  // per request
  size_t max_image_bytes = 20u << 20;  // one decoded data: URI
  int max_stop = 4;                    // stop strings (OpenAI allows 4)
  int32_t max_tokens_cap = 0;          // 0 = none (the context is the cap)
  // Most num_beams: the server sets the engine's batched decode width (Engine::max_batch()),
  // so that a beam search step is one pass over the weights; 1 = beam search refused.
  int32_t max_beams = 1;
  bool allow_remote_images = false;
};

// One image part (or video part: {"type": "video_url", "video_url": {"url": ...}}, vLLM's
// form): the bytes of a data: URI, or a remote URL when those are allowed.
struct ImagePart {
  std::vector<uint8_t> bytes;
  std::string url;     // remote (http/https) only; empty for data: URIs
  bool video = false;  // a video_url part (Qwen-VL)
};

struct ChatTurn {
  std::string role, text;
  std::vector<ImagePart> images;
};

struct SamplingRequest {
  std::optional<int32_t> max_tokens;  // max_completion_tokens or max_tokens
  float temperature = 1.0f;           // OpenAI's default
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  float repeat_penalty = 1.0f;     // repetition_penalty / repeat_penalty (llama.cpp)
  int32_t repeat_last_n = 64;      // llama.cpp's window of the three penalties (-1: all)
  float presence_penalty = 0.0f;   // OpenAI, -2..2
  float frequency_penalty = 0.0f;  // OpenAI, -2..2
  std::vector<std::pair<int32_t, float>> logit_bias;  // OpenAI: {"id": -100..100}
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool ignore_eos = false;  // llama.cpp's extension: keep going past stop tokens (benchmarks)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // response_format json_object / json_schema: the schema the answer must follow (null: text).
  std::shared_ptr<const JsonSchema> response_schema;
  bool response_any_object = false;  // it is any object (json_object): the server shares one
  // Beam search (runtime/decoding/beam_search.h, transformers' semantics); 1 = off. Deterministic:
  // the parser refuses sampling fields, stop strings, response_format and images along with it.
  int32_t num_beams = 1;
  float length_penalty = 1.0f;
  std::string early_stopping = "false";  // "true" / "false" / "never" (parse_early_stopping)
  // Per-token log-probabilities with this many alternatives (-1: none): chat's logprobs +
  // top_logprobs, completions' logprobs. Refused with num_beams > 1.
  int32_t logprobs = -1;
};

struct ChatRequest {
  std::string model;
  std::vector<ChatTurn> messages;
  SamplingRequest sampling;
  bool thinking = true;  // chat_template_kwargs.enable_thinking (vLLM / SGLang's field)
};

struct CompletionRequest {
  std::string model;
  std::string prompt;
  SamplingRequest sampling;
};

ChatRequest parse_chat_request(std::string_view body, const RequestLimits& lim);
CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& lim);

// "data:image/png;base64,...." -> bytes; throws ApiError 400 on anything else. video: the
// same for "data:video/...;base64,..." (a video_url part).
std::vector<uint8_t> decode_data_uri(std::string_view uri, size_t max_bytes, bool video = false);
// Strict base64 (RFC 4648, padding optional, no whitespace other than none); nullopt when bad.
std::optional<std::vector<uint8_t>> base64_decode(std::string_view s, size_t max_bytes);

}  // namespace edgevl::server
