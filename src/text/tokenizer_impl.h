#pragma once
// Lookup tables built once from TokenizerData. Everything here is read-only after
// construction, so one Tokenizer can encode from many threads.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer.h"

namespace edgevl::text {

// Owns a compiled PCRE2 pattern (opaque here so pcre2.h stays private to one file).
class SplitRegex {
 public:
  explicit SplitRegex(const std::string& pattern);
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;
  // Calls fn(begin, end) for every piece of `text`: the matches and the gaps between them.
  template <class Fn>
  void split(std::string_view text, Fn&& fn) const {
    std::vector<std::pair<size_t, size_t>> spans;
    split_spans(text, spans);
    for (auto [b, e] : spans) fn(text.substr(b, e - b));
  }
  void split_spans(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  void* code_ = nullptr;
};

struct MergeRule {
  int32_t rank;
  int32_t result;
};

struct Tokenizer::Impl {
  TokenizerData d;
  // Views point into d.pieces, which never moves once the Impl is built.
  std::unordered_map<std::string_view, int32_t> piece_to_id;
  std::vector<std::string> bytes_of;   // id -> decoded bytes
  std::vector<uint8_t> special;        // id -> 1 when skipped by decode(skip_special)
  std::array<int32_t, 256> byte_id{};  // byte -> id of its byte piece (-1 when absent)
  // Added tokens by first byte, longest first, as indices into d.added.
  std::array<std::vector<uint32_t>, 256> added_by_byte;

  // byte-level BPE
  std::unordered_map<uint64_t, MergeRule> merges;  // (left << 32 | right) -> rule
  std::unique_ptr<SplitRegex> regex;

  // sentencepiece: pieces that may result from a merge (normal, user-defined, unused)
  std::unordered_map<std::string_view, int32_t> sp_pieces;
  std::array<std::vector<int32_t>, 256> user_defined_by_byte;  // longest first

  explicit Impl(TokenizerData data);

  void encode_bytelevel(std::string_view text, std::vector<int32_t>& out) const;
  void bpe_word(std::string_view word, std::vector<int32_t>& out) const;
  void encode_sentencepiece(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
};

// Length of the UTF-8 sequence starting at s[i] if it is complete and valid, else 0.
size_t utf8_valid_len(std::string_view s, size_t i);

}  // namespace edgevl::text
