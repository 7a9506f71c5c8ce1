// Tokenizer front end: lookup tables, added-token splitting and per-id decoding. The model
// specific encoders live in bytelevel_bpe.cpp and sentencepiece_bpe.cpp.
#include <algorithm>
#include <cstdio>

#include "text/tokenizer_impl.h"

namespace edgevl::text {
namespace {

bool is_space_byte(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Inverse of byte_to_unicode, keyed by the stand-in code point.
std::unordered_map<uint32_t, uint8_t> unicode_to_byte_table() {
  std::unordered_map<uint32_t, uint8_t> m;
  for (int b = 0; b < 256; ++b) {
    const std::string s = byte_to_unicode(uint8_t(b));
    uint32_t cp = uint8_t(s[0]);
    if (s.size() == 2) cp = ((uint8_t(s[0]) & 0x1F) << 6) | (uint8_t(s[1]) & 0x3F);
    m[cp] = uint8_t(b);
  }
  return m;
}

// Byte-level pieces spell bytes with stand-in characters; anything else passes through.
std::string unmap_bytelevel(std::string_view piece,
                            const std::unordered_map<uint32_t, uint8_t>& table) {
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    const size_t n = utf8_valid_len(piece, i);
    if (n == 0) {
      out.push_back(piece[i++]);
      continue;
    }
    uint32_t cp = 0;
    if (n == 1) cp = uint8_t(piece[i]);
    if (n == 2) cp = ((uint8_t(piece[i]) & 0x1F) << 6) | (uint8_t(piece[i + 1]) & 0x3F);
    auto it = n <= 2 ? table.find(cp) : table.end();
    if (it != table.end())
      out.push_back(char(it->second));
    else
      out.append(piece.substr(i, n));
    i += n;
  }
  return out;
}

std::string byte_piece_name(int b) {
  return fmt::format("<0x{:02X}>", b);
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

Tokenizer::Impl::Impl(TokenizerData data) : d(std::move(data)) {
  validate_tokenizer(d);
  const size_t n = d.pieces.size();
  piece_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (!d.pieces[i].empty()) piece_to_id.emplace(d.pieces[i], int32_t(i));
  // Added tokens win over regular pieces with the same spelling.
  for (const auto& t : d.added) piece_to_id[d.pieces[t.id]] = t.id;

  special.assign(n, 0);
  for (size_t i = 0; i < n; ++i) special[i] = d.types[i] == TokenType::Control;
  for (const auto& t : d.added) special[t.id] = t.special ? 1 : 0;

  for (uint32_t i = 0; i < d.added.size(); ++i)
    added_by_byte[uint8_t(d.added[i].content[0])].push_back(i);
  for (auto& v : added_by_byte)
    std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) {
      return d.added[a].content.size() > d.added[b].content.size();
    });

  byte_id.fill(-1);
  bytes_of.resize(n);
  if (d.kind == TokenizerKind::ByteLevelBpe) {
    for (int b = 0; b < 256; ++b) {
      auto it = piece_to_id.find(byte_to_unicode(uint8_t(b)));
      check(it != piece_to_id.end(),
            "tokenizer: byte-level vocabulary has no piece for byte {:#04x} ('{}')", b,
            byte_to_unicode(uint8_t(b)));
      byte_id[b] = it->second;
    }
    const auto table = unicode_to_byte_table();
    for (size_t i = 0; i < n; ++i)
      bytes_of[i] =
          d.types[i] == TokenType::Control ? d.pieces[i] : unmap_bytelevel(d.pieces[i], table);
    for (const auto& t : d.added) bytes_of[t.id] = t.content;
    merges.reserve(d.merges.size());
    std::string joined;
    for (size_t r = 0; r < d.merges.size(); ++r) {
      const auto [a, b] = d.merges[r];
      joined = d.pieces[a] + d.pieces[b];
      auto it = piece_to_id.find(joined);
      check(it != piece_to_id.end(), "tokenizer: merge {} ('{}' + '{}') makes '{}', not in vocab",
            r, d.pieces[a], d.pieces[b], joined);
      // The first (lowest-rank) rule for a pair is the one that applies.
      merges.emplace((uint64_t(uint32_t(a)) << 32) | uint32_t(b),
                     MergeRule{int32_t(r), it->second});
    }
    if (!d.pretokenizer_regex.empty()) regex = std::make_unique<SplitRegex>(d.pretokenizer_regex);
  } else {
    for (size_t i = 0; i < n; ++i) {
      const auto t = d.types[i];
      if (t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Unused)
        sp_pieces.emplace(d.pieces[i], int32_t(i));
      if (t == TokenType::UserDefined && !d.pieces[i].empty())
        user_defined_by_byte[uint8_t(d.pieces[i][0])].push_back(int32_t(i));
    }
    for (auto& v : user_defined_by_byte)
      std::stable_sort(v.begin(), v.end(), [&](int32_t a, int32_t b) {
        return d.pieces[a].size() > d.pieces[b].size();
      });
    if (d.byte_fallback) {
      for (int b = 0; b < 256; ++b) {
        auto it = piece_to_id.find(byte_piece_name(b));
        check(it != piece_to_id.end() && d.types[it->second] == TokenType::Byte,
              "tokenizer: byte fallback is on but piece {} is missing", byte_piece_name(b));
        byte_id[b] = it->second;
      }
    }
    check(d.unk_id >= 0 && d.types[d.unk_id] == TokenType::Unknown,
          "tokenizer: sentencepiece model needs an unknown piece (unk id {})", d.unk_id);
    for (size_t i = 0; i < n; ++i) {
      const std::string& p = d.pieces[i];
      switch (d.types[i]) {
        case TokenType::Byte: {
          unsigned v = 0;
          if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%2X>", &v) == 1 && v < 256)
            bytes_of[i] = std::string(1, char(v));
          else
            bytes_of[i] = p;
          break;
        }
        case TokenType::Control:
          bytes_of[i] = p;
          break;
        case TokenType::Unknown:
          bytes_of[i] = " \xE2\x81\x87 ";  // sentencepiece's surface for <unk>
          break;
        default: {
          std::string s;
          for (size_t k = 0; k < p.size(); ++k) {
            if (d.escape_whitespaces && p.compare(k, 3, "\xE2\x96\x81") == 0) {
              s.push_back(' ');
              k += 2;
            } else {
              s.push_back(p[k]);
            }
          }
          bytes_of[i] = std::move(s);
        }
      }
    }
    for (const auto& t : d.added) bytes_of[t.id] = t.content;
  }
}

Tokenizer::Tokenizer(TokenizerData d) : impl_(std::make_shared<const Impl>(std::move(d))) {}
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
    if (m.d.kind == TokenizerKind::ByteLevelBpe)
      m.encode_bytelevel(seg, out);
    else
      m.encode_sentencepiece(seg, at_start, out);
  };
  // Leftmost-longest scan for added tokens; the text between them goes to the model.
  size_t seg_begin = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (uint32_t k : m.added_by_byte[uint8_t(text[i])]) {
      const AddedToken& t = m.d.added[k];
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
  return impl_->d.bos_id;
}
int32_t Tokenizer::eos_id() const {
  return impl_->d.eos_id;
}
bool Tokenizer::add_bos() const {
  return impl_->d.add_bos && impl_->d.bos_id >= 0;
}
int32_t Tokenizer::vocab_size() const {
  return int32_t(impl_->d.pieces.size());
}
const TokenizerData& Tokenizer::data() const {
  return impl_->d;
}

std::optional<int32_t> Tokenizer::find_token(std::string_view content) const {
  auto it = impl_->piece_to_id.find(content);
  if (it == impl_->piece_to_id.end()) return std::nullopt;
  return it->second;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  check(id >= 0 && id < vocab_size(), "token id {} is outside the vocabulary (size {})", id,
        vocab_size());
  return impl_->bytes_of[id];
}

std::string Tokenizer::piece(int32_t id) const {
  check(id >= 0 && id < vocab_size(), "token id {} is outside the vocabulary (size {})", id,
        vocab_size());
  return impl_->d.pieces[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->special[id];
}

}  // namespace edgevl::text
