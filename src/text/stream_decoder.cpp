// Detokenization. Tokens may end in the middle of a UTF-8 character (byte pieces, byte-level
// BPE), so text is released only up to the last complete character; invalid bytes become
// U+FFFD the way Python's errors="replace" does (one per maximal invalid subpart).
#include "text/tokenizer_impl.h"

namespace edgevl::text {
namespace {

// Bytes from s[i] that could still begin a valid sequence, and the full length it needs.
std::pair<size_t, size_t> valid_prefix(std::string_view s, size_t i) {
  const auto c = uint8_t(s[i]);
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return {0, 0};
  }
  size_t k = 1;
  for (; k < need && i + k < s.size(); ++k) {
    const auto cc = uint8_t(s[i + k]);
    const bool ok = k == 1 ? (cc >= lo && cc <= hi) : (cc >= 0x80 && cc <= 0xBF);
    if (!ok) break;
  }
  return {k, need};
}

}  // namespace

std::string take_complete_utf8(std::string& bytes, bool final) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t n = utf8_valid_len(bytes, i);
    if (n) {
      out.append(bytes, i, n);
      i += n;
      continue;
    }
    const auto [k, need] = valid_prefix(bytes, i);
    if (k > 0 && k < need && i + k == bytes.size() && !final) break;  // wait for the rest
    out.append(kReplacement);
    i += std::max<size_t>(k, 1);
  }
  bytes.erase(0, i);
  return out;
}

StreamDecoder::StreamDecoder(const Tokenizer& t, bool skip_special)
    : tok_(&t), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) {
  if (tok_->is_special(id)) {
    if (skip_special_) return {};
    // Special text never splits a character, so pending bytes are finished first.
    std::string out = take_complete_utf8(pending_, true);
    return out + tok_->token_bytes(id);
  }
  std::string b = tok_->token_bytes(id);
  if (first_ && !b.empty()) {
    // sentencepiece drops the space its dummy prefix put before the first word.
    const TokenType type = tok_->token_type(id);
    if (tok_->add_dummy_prefix() && b[0] == ' ' && type != TokenType::Byte &&
        type != TokenType::Unknown)
      b.erase(0, 1);
    first_ = false;
  }
  pending_ += b;
  return take_complete_utf8(pending_, false);
}

std::string StreamDecoder::flush() {
  return take_complete_utf8(pending_, true);
}

std::string decode(const Tokenizer& t, std::span<const int32_t> ids, bool skip_special) {
  StreamDecoder dec(t, skip_special);
  std::string out;
  for (int32_t id : ids) out += dec.push(id);
  out += dec.flush();
  return out;
}

}  // namespace edgevl::text
