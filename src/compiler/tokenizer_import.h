#pragma once
// Hub tokenizer files -> TokenizerData. Looks, in order, for tokenizer.model (sentencepiece),
// tokenizer.json (HF tokenizers, byte-level BPE) and vocab.json + merges.txt; in every case
// tokenizer_config.json (when present) supplies added tokens, bos/eos and add_bos.
#include <filesystem>
#include <optional>
#include <string>

#include "text/tokenizer.h"

namespace edgevl::compiler {

text::TokenizerData load_tokenizer_dir(const std::filesystem::path& dir);

// tokenizer_config.json's chat_template (or chat_template.jinja), when there is one.
std::optional<std::string> load_chat_template_string(const std::filesystem::path& dir);

// Qwen2's pre-tokenizer pattern and GPT-2's, as PCRE2 patterns.
extern const char* const kQwen2SplitPattern;
extern const char* const kGpt2SplitPattern;

}  // namespace edgevl::compiler
