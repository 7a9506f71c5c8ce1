#pragma once
// The token loop: prefill the prompt, then sample / decode until n tokens, a stop token or
// a stop string. Streams text that is always whole UTF-8 and never shows a stop string.
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/session.h"

namespace edgevl {

struct GenerateOptions {
  int32_t n_predict = 128;
  SamplerParams sampling;
  std::vector<std::string> stop_strings;  // in addition to the model's stop tokens
  bool ignore_eos = false;                // keep going past stop tokens (tests, benchmarks)
};

enum class StopReason { Length, StopToken, StopString };
const char* stop_reason_name(StopReason r);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (a stop token is not included)
  std::string text;
  int32_t prompt_tokens = 0;
  int32_t reused_tokens = 0;  // of prompt_tokens, kept in the KV cache from before
  double prefill_ms = 0;
  double decode_ms = 0;  // for tokens after the first
  StopReason stop = StopReason::Length;
};

// Checks prompt + n_predict against the session's free context; throws a clear message.
void check_fits_context(const Session& s, int64_t prompt_tokens, int64_t n_predict,
                        const std::string& model_path);

// The first `reused` prompt tokens are already in the session (a kept prefix: the session
// holds exactly them); the rest is evaluated. `prompt_embeds` (optional, [prompt.size() -
// reused, hidden]) replaces the embedding lookup of those rows: how images spliced into
// <IMG_CONTEXT> positions reach the LLM.
GenerateResult generate(Session& s, std::span<const int32_t> prompt, const GenerateOptions& o,
                        const std::function<void(std::string_view)>& on_text = {},
                        const float* prompt_embeds = nullptr, int32_t reused = 0);

}  // namespace edgevl
