#pragma once
// Tokenizer files for random-weight checkpoints (`edgevl synth`): plausible vocabularies
// (bytes, then merges learned from a built-in English paragraph, then deterministic filler)
// written in the hub formats so they go through the same importer as real models.
#include <cstdint>
#include <filesystem>

namespace edgevl::synth {

// Qwen2-style vocab.json + merges.txt + tokenizer_config.json. <|endoftext|>, <|im_start|>,
// <|im_end|> sit at 151643..151645 when model_vocab_size allows, else at its top three ids;
// the regular vocabulary fills the ids below them (Qwen leaves the rest as padding).
void write_bytelevel_bpe_tokenizer(const std::filesystem::path& dir, int32_t model_vocab_size);

// tokenizer.model (sentencepiece BPE with byte fallback) + tokenizer_config.json covering
// model_vocab_size ids. internlm2_chat: InternLM2's normalizer settings and the
// [UNUSED_TOKEN_*] -> <|im_start|> (92543) / <|im_end|> (92542) mapping (top ids when the
// vocabulary is smaller).
void write_sentencepiece_tokenizer(const std::filesystem::path& dir, int32_t model_vocab_size,
                                   bool internlm2_chat);

}  // namespace edgevl::synth
