#pragma once
// The token loop: a prefilled Generator (generate.h) driven to its end, one token at a time or
// through speculative verification (speculative.h) when the options ask for it. Apart from
// generate.h so that the generator and the speculative loop built on it do not include each
// other.
#include <functional>
#include <span>
#include <string_view>

#include "runtime/decoding/generate.h"

namespace edgevl {

// Drives a prefilled generator to its end on its own session: sample, hand the text to
// `on_text`, evaluate the next token (or the speculative loop when the options ask for it).
// `on_text` returning false stops the generation there (StopReason::Cancelled). The one
// token loop of generate(), Conversation::run and the C API.
void run_to_end(Generator& g, const std::function<bool(std::string_view)>& on_text);

// The first `reused` prompt tokens are already in the session (a kept prefix: the session
// holds exactly them); the rest is evaluated. `prompt_embeds` (optional, [prompt.size() -
// reused, hidden]) replaces the embedding lookup of those rows: how images spliced into
// <IMG_CONTEXT> positions reach the LLM.
GenerateResult generate(Session& s, std::span<const int32_t> prompt, const GenerateOptions& o,
                        const std::function<void(std::string_view)>& on_text = {},
                        const float* prompt_embeds = nullptr, int32_t reused = 0);

}  // namespace edgevl
