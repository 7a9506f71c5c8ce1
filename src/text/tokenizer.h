#pragma once
// Tokenizers as stored in the model binary: byte-level BPE (GPT-2 / Qwen2 family) and
// sentencepiece BPE with byte fallback (Llama / InternLM2). The runtime only ever sees the
// serialized TokenizerData; hub files are turned into it by the compiler
// (compiler/tokenizer_import.h). Encoding must match the reference implementation id for id.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/byte_io.h"

namespace edgevl::text {

enum class TokenizerKind : uint32_t { ByteLevelBpe = 0, SentencePieceBpe = 1 };

// Numbering follows sentencepiece's ModelProto.SentencePiece.Type so imports copy it as is.
enum class TokenType : uint8_t {
  Normal = 1,
  Unknown = 2,
  Control = 3,      // bos/eos/pad and special added tokens: never produced from plain text
  UserDefined = 4,  // matched whole in the text, but an ordinary token otherwise
  Unused = 5,
  Byte = 6,  // sentencepiece <0xAB> fallback pieces
};

// A token matched literally in the input before the model runs (HF "added tokens").
struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;  // skipped by decode(skip_special) and not parsed when parse_special=false
  bool lstrip = false;   // swallows whitespace on its left
  bool rstrip = false;   // swallows whitespace on its right
};

struct TokenizerData {
  TokenizerKind kind = TokenizerKind::ByteLevelBpe;
  // id -> piece as the vocabulary spells it (byte-level alphabet for BPE, "▁" for spaces in
  // sentencepiece). Ids without a piece (holes) are empty strings of type Unused.
  std::vector<std::string> pieces;
  std::vector<TokenType> types;  // same length as pieces
  std::vector<float> scores;     // sentencepiece: same length as pieces; byte-level: empty
  // Byte-level BPE merges in rank order as (left id, right id); the result is the piece
  // spelled left+right, which must exist.
  std::vector<std::pair<int32_t, int32_t>> merges;
  std::vector<AddedToken> added;
  // Byte-level pre-tokenizer split pattern (PCRE2 syntax, matched with UTF + UCP).
  std::string pretokenizer_regex;
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool ignore_merges = false;  // byte-level: a word that is itself a piece skips the merges
  bool nfc = false;            // byte-level: NFC-normalize text outside added tokens (Qwen2)
  // sentencepiece normalizer (identity normalization only)
  bool add_dummy_prefix = false;
  bool remove_extra_whitespaces = false;
  bool escape_whitespaces = true;
  bool byte_fallback = false;
};

// Throws edgevl::Error when ids, counts or pieces are inconsistent.
void validate_tokenizer(const TokenizerData& d);
// The .evb tokenizer section: the data plus the lookup tables the runtime probes in place
// (piece -> id, byte-level merges as id pairs, decoded bytes), resolved here once.
void write_tokenizer(const TokenizerData& d, ByteWriter& w);
// Reads the rest of `r` as a tokenizer section back into TokenizerData (tests, tools).
TokenizerData read_tokenizer(ByteReader& r);

// The GPT-2 byte <-> printable-character table used by byte-level vocabularies.
std::string byte_to_unicode(uint8_t b);  // UTF-8 of the printable stand-in for byte b

class Tokenizer {
 public:
  // Builds the section in memory (write_tokenizer) and reads it: for the compiler and tests.
  explicit Tokenizer(const TokenizerData& d);
  // Uses a serialized section in place, without copying or re-deriving its tables: the bytes
  // must outlive the Tokenizer and all its copies (a Model keeps its mapping). Misaligned
  // bytes are copied first. Throws edgevl::Error prefixed with `what` when inconsistent.
  static Tokenizer from_section(std::span<const uint8_t> bytes, const std::string& what);
  ~Tokenizer();
  Tokenizer(const Tokenizer&);
  Tokenizer& operator=(const Tokenizer&);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Encodes text WITHOUT adding BOS. parse_special: recognise special added tokens in the
  // text and emit their ids (non-special added tokens are always recognised, as in HF).
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  bool add_bos() const;
  bool add_dummy_prefix() const;  // sentencepiece: decode drops the leading space it added
  TokenizerKind kind() const;
  std::optional<int32_t> find_token(std::string_view content) const;
  // Byte-level BPE: (rank, result id) of the rule merging `left` then `right`, if any.
  std::optional<std::pair<int32_t, int32_t>> merge_rule(int32_t left, int32_t right) const;
  std::string token_bytes(int32_t id) const;
  std::string piece(int32_t id) const;
  TokenType token_type(int32_t id) const;
  bool is_special(int32_t id) const;
  int32_t vocab_size() const;
  // Everything the tokenizer was made from, copied out (slow: for tools and tests).
  TokenizerData to_data() const;

  struct Impl;

 private:
  Tokenizer() = default;
  std::shared_ptr<const Impl> impl_;  // immutable after construction: encode is thread-safe
};

// Streaming detokenizer: text returned is always complete UTF-8; bytes of an unfinished
// multi-byte sequence are held back until completed (or until flush()).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& t, bool skip_special = true);
  std::string push(int32_t id);
  std::string flush();

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  bool first_ = true;
  std::string pending_;
};

std::string decode(const Tokenizer& t, std::span<const int32_t> ids, bool skip_special = true);

// Splits `bytes` into the longest prefix that is valid UTF-8 (invalid sequences replaced by
// U+FFFD) and keeps in `bytes` only an incomplete trailing sequence. With final=true the
// incomplete tail is replaced too.
std::string take_complete_utf8(std::string& bytes, bool final);

}  // namespace edgevl::text
