#pragma once
// The tokenizer section layout and the run-time view of it. The Impl reads the section in
// place (the mapped .evb, or a buffer it owns): pieces, decoded bytes and the lookup tables
// are spans into those bytes, so constructing it is validation plus a few small tables.
// Everything is read-only after construction, so one Tokenizer can encode from many threads.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"
#include "text/tokenizer_tables.h"

namespace edgevl::text {

// U+FFFD, what invalid UTF-8 decodes to.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Tokenizer section, version 2 (little-endian; "array" = ByteWriter::put_array, 8-aligned):
//   u32 magic "EVTK", u32 version, u32 kind, u32 flags, i32 bos, eos, unk, pad, u32 n
//   array u32 piece_off[n+1], array u8 piece_bytes   pieces as the vocabulary spells them
//   array u8 types[n], u32 has_scores, array f32 scores[n or 0]
//   array i32 merges[2m]                            (left, right) in rank order
//   u32 n_added, per token: i32 id, u8 flags, string content
//   string pretokenizer_regex
//   array u32 bytes_off[n+1], array u8 bytes        what each id decodes to
//   u32 max_probe, array PieceSlot                  piece -> id (added tokens win)
//   u32 max_probe, array PieceSlot                  sentencepiece merge candidates
//   u32 max_probe, array MergeSlot                  byte-level (left, right) -> rank, result
namespace section {
inline constexpr uint32_t kMagic = 0x4B545645;  // "EVTK"
inline constexpr uint32_t kVersion = 2;         // 2: precomputed lookup tables
inline constexpr uint32_t kMaxPieces = 1u << 24;
enum Flag : uint32_t {
  kAddBos = 1,
  kAddEos = 2,
  kIgnoreMerges = 4,
  kDummyPrefix = 8,
  kRemoveExtraWs = 16,
  kEscapeWs = 32,
  kByteFallback = 64,
  kNfc = 128,
};
enum AddedFlag : uint8_t { kSpecial = 1, kLstrip = 2, kRstrip = 4 };
inline bool valid_type(uint8_t t) {
  return t >= 1 && t <= 6;
}
}  // namespace section

// Owns a compiled PCRE2 pattern (opaque here so pcre2.h stays private to one file).
class SplitRegex {
 public:
  explicit SplitRegex(const std::string& pattern);
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;
  // Appends (begin, end) for every piece of `text`: the matches and the gaps between them.
  void split_spans(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  void* code_ = nullptr;
};

struct Tokenizer::Impl {
  // The section bytes when they had to be copied (misaligned input, or built from
  // TokenizerData); empty when the caller's bytes are used in place.
  std::vector<uint64_t> owned;

  TokenizerKind kind = TokenizerKind::ByteLevelBpe;
  uint32_t flags = 0;
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  uint32_t n = 0;
  std::span<const uint32_t> piece_off, bytes_off;  // n + 1 offsets, validated monotone
  std::span<const uint8_t> piece_chars, byte_chars;
  std::span<const uint8_t> types;
  std::span<const float> scores;    // n for sentencepiece, else 0 or n
  std::span<const int32_t> merges;  // rank-ordered pairs, only for to_data()
  std::vector<AddedToken> added;    // a handful; copied
  std::string pretokenizer_regex;
  PieceTable piece_table;  // piece -> id
  PieceTable sp_table;     // sentencepiece: normal, user-defined and unused pieces
  MergeTable merge_table;  // byte-level BPE

  // Derived at load from the above (O(n) byte scans, no string work).
  std::vector<uint8_t> special;        // id -> 1 when skipped by decode(skip_special)
  std::array<int32_t, 256> byte_id{};  // byte -> id of its byte piece (-1 when absent)
  // Added tokens by first byte, longest first, as indices into `added`.
  std::array<std::vector<uint32_t>, 256> added_by_byte;
  std::array<std::vector<int32_t>, 256> user_defined_by_byte;  // sentencepiece, longest first
  std::unique_ptr<SplitRegex> regex;

  // Reads a section in place, or a copy of it when `copy` or when `bytes` is not 8-byte
  // aligned; throws edgevl::Error prefixed with `what` when it is inconsistent.
  Impl(std::span<const uint8_t> bytes, const std::string& what, bool copy);

  bool flag(uint32_t f) const { return flags & f; }
  std::string_view piece(int32_t id) const {
    return {reinterpret_cast<const char*>(piece_chars.data()) + piece_off[id],
            piece_off[id + 1] - piece_off[id]};
  }
  std::string_view bytes_of(int32_t id) const {
    return {reinterpret_cast<const char*>(byte_chars.data()) + bytes_off[id],
            bytes_off[id + 1] - bytes_off[id]};
  }
  TokenType type(int32_t id) const { return TokenType(types[id]); }
  int32_t find_piece(std::string_view s) const {
    return piece_table.find(s, [this](int32_t id) { return piece(id); });
  }
  int32_t find_sp_piece(std::string_view s) const {
    return sp_table.find(s, [this](int32_t id) { return piece(id); });
  }

  void encode_bytelevel(std::string_view text, std::vector<int32_t>& out) const;
  void bpe_word(std::string_view word, std::vector<int32_t>& out) const;
  void encode_sentencepiece(std::string_view text, bool at_start, std::vector<int32_t>& out) const;

 private:
  void parse(std::span<const uint8_t> bytes, const std::string& what);
  void derive(const std::string& what);
};

// Length of the UTF-8 sequence starting at s[i] if it is complete and valid, else 0.
size_t utf8_valid_len(std::string_view s, size_t i);

// What each id decodes to (compile side; stored as the bytes_off / bytes arrays).
std::vector<std::string> decoded_bytes(const TokenizerData& d);

}  // namespace edgevl::text
