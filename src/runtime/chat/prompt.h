#pragma once
// Text -> token ids the way the reference prepares a prompt: through the chat template, or
// raw (BOS only when the tokenizer config says the reference adds it).
#include <string>
#include <vector>

#include "runtime/execution/model.h"

namespace edgevl {

std::vector<int32_t> encode_chat(const Model& m, const std::vector<text::ChatMessage>& messages,
                                 bool add_generation_prompt = true);
// Text the chat template rendered, with the BOS rules of encode_chat.
std::vector<int32_t> encode_rendered(const Model& m, std::string rendered);
std::vector<int32_t> encode_raw(const Model& m, const std::string& text, bool add_bos = true);

}  // namespace edgevl
