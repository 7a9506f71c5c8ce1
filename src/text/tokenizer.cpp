// Tokenizer front end: construction, added-token splitting and per-id accessors. Reading
// the section is tokenizer_view.cpp; the model specific encoders live in bytelevel_bpe.cpp
// and sentencepiece_bpe.cpp.

#include "text/tokenizer_impl.h"

namespace edgevl::text {
namespace {

bool is_space_byte(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

size_t utf8_valid_len(std::string_view s, size_t i) {
  const auto c = uint8_t(s[i]);
  size_t n;
  uint32_t min;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto cc = uint8_t(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

Tokenizer::Tokenizer(const TokenizerData& d) {
  ByteWriter w;
  write_tokenizer(d, w);
  impl_ = std::make_shared<const Impl>(w.buffer(), "tokenizer", true);
}

Tokenizer Tokenizer::from_section(std::span<const uint8_t> bytes, const std::string& what) {
  Tokenizer t;
  t.impl_ = std::make_shared<const Impl>(bytes, what, false);
  return t;
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(const Tokenizer&) = default;
Tokenizer& Tokenizer::operator=(const Tokenizer&) = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  auto emit_text = [&](std::string_view seg, bool at_start) {
    if (seg.empty()) return;
    if (m.kind == TokenizerKind::ByteLevelBpe)
      m.encode_bytelevel(seg, out);
    else
      m.encode_sentencepiece(seg, at_start, out);
  };
  // Leftmost-longest scan for added tokens; the text between them goes to the model.
  size_t seg_begin = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (uint32_t k : m.added_by_byte[uint8_t(text[i])]) {
      const AddedToken& t = m.added[k];
      if (t.special && !parse_special) continue;
      if (text.compare(i, t.content.size(), t.content) == 0) {
        hit = &t;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    size_t seg_end = i;
    if (hit->lstrip)
      while (seg_end > seg_begin && is_space_byte(text[seg_end - 1])) --seg_end;
    emit_text(text.substr(seg_begin, seg_end - seg_begin), seg_begin == 0);
    out.push_back(hit->id);
    i += hit->content.size();
    if (hit->rstrip)
      while (i < text.size() && is_space_byte(text[i])) ++i;
    seg_begin = i;
  }
  emit_text(text.substr(seg_begin), seg_begin == 0);
  return out;
}

int32_t Tokenizer::bos_id() const {
  return impl_->bos_id;
}
int32_t Tokenizer::eos_id() const {
  return impl_->eos_id;
}
bool Tokenizer::add_bos() const {
  return impl_->flag(section::kAddBos) && impl_->bos_id >= 0;
}
bool Tokenizer::add_dummy_prefix() const {
  return impl_->flag(section::kDummyPrefix);
}
int32_t Tokenizer::vocab_size() const {
  return int32_t(impl_->n);
}
TokenizerKind Tokenizer::kind() const {
  return impl_->kind;
}

std::optional<int32_t> Tokenizer::find_token(std::string_view content) const {
  const int32_t id = impl_->find_piece(content);
  if (id < 0) return std::nullopt;
  return id;
}

std::optional<std::pair<int32_t, int32_t>> Tokenizer::merge_rule(int32_t left,
                                                                 int32_t right) const {
  const MergeSlot* s = impl_->merge_table.find(left, right);
  if (!s) return std::nullopt;
  return std::pair(s->rank, s->result);
}

std::string Tokenizer::token_bytes(int32_t id) const {
  check(id >= 0 && id < vocab_size(), "token id {} is outside the vocabulary (size {})", id,
        vocab_size());
  return std::string(impl_->bytes_of(id));
}

std::string Tokenizer::piece(int32_t id) const {
  check(id >= 0 && id < vocab_size(), "token id {} is outside the vocabulary (size {})", id,
        vocab_size());
  return std::string(impl_->piece(id));
}

TokenType Tokenizer::token_type(int32_t id) const {
  check(id >= 0 && id < vocab_size(), "token id {} is outside the vocabulary (size {})", id,
        vocab_size());
  return impl_->type(id);
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->special[id];
}

}  // namespace edgevl::text
