// TokenizerData validation and its serialized form (the .evb "tokenizer" section, laid out
// in tokenizer_impl.h): the compiler resolves every lookup the runtime needs here, once.
#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "text/tokenizer_impl.h"

namespace edgevl::text {
namespace {

void check_id(int32_t id, size_t n, const char* what) {
  check(id >= -1 && id < int64_t(n), "tokenizer: {} id {} is outside the vocabulary (size {})",
        what, id, n);
}

}  // namespace

std::string byte_to_unicode(uint8_t b) {
  // Printable Latin-1 bytes stand for themselves; the rest are shifted to U+0100 and up in
  // byte order, which is how GPT-2 made every byte a visible character.
  auto printable = [](int c) {
    return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
  };
  uint32_t cp = b;
  if (!printable(b)) {
    uint32_t n = 0;
    for (int c = 0; c < b; ++c) n += printable(c) ? 0 : 1;
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(char(cp));
  } else {
    s.push_back(char(0xC0 | (cp >> 6)));
    s.push_back(char(0x80 | (cp & 0x3F)));
  }
  return s;
}

void validate_tokenizer(const TokenizerData& d) {
  const size_t n = d.pieces.size();
  check(d.kind == TokenizerKind::ByteLevelBpe || d.kind == TokenizerKind::SentencePieceBpe,
        "tokenizer: unknown kind {}", uint32_t(d.kind));
  check(n > 0 && n <= section::kMaxPieces, "tokenizer: vocabulary size {} is out of range", n);
  check(d.types.size() == n, "tokenizer: {} token types for {} pieces", d.types.size(), n);
  for (size_t i = 0; i < n; ++i)
    check(section::valid_type(uint8_t(d.types[i])), "tokenizer: token {} has invalid type {}", i,
          int(d.types[i]));
  if (d.kind == TokenizerKind::SentencePieceBpe)
    check(d.scores.size() == n, "tokenizer: {} scores for {} pieces", d.scores.size(), n);
  else
    check(d.scores.empty() || d.scores.size() == n, "tokenizer: {} scores for {} pieces",
          d.scores.size(), n);
  check_id(d.bos_id, n, "BOS");
  check_id(d.eos_id, n, "EOS");
  check_id(d.unk_id, n, "UNK");
  check_id(d.pad_id, n, "PAD");
  for (const auto& [a, b] : d.merges)
    check(a >= 0 && b >= 0 && a < int64_t(n) && b < int64_t(n),
          "tokenizer: merge ({}, {}) refers to ids outside the vocabulary (size {})", a, b, n);
  for (const auto& t : d.added) {
    check(t.id >= 0 && t.id < int64_t(n), "tokenizer: added token '{}' has id {} outside 0..{}",
          t.content, t.id, n - 1);
    check(!t.content.empty(), "tokenizer: added token {} is empty", t.id);
    check(d.pieces[t.id] == t.content,
          "tokenizer: added token {} '{}' does not match the vocabulary piece '{}'", t.id,
          t.content, d.pieces[t.id]);
  }
}

namespace {

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

std::string sentencepiece_bytes(const TokenizerData& d, size_t i) {
  const std::string& p = d.pieces[i];
  switch (d.types[i]) {
    case TokenType::Byte: {
      unsigned v = 0;
      if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%2X>", &v) == 1 && v < 256)
        return std::string(1, char(v));
      return p;
    }
    case TokenType::Control: return p;
    case TokenType::Unknown: return " \xE2\x81\x87 ";  // sentencepiece's surface for <unk>
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
      return s;
    }
  }
}

// Strings as one offsets array (n + 1 entries) and one byte array.
void put_strings(ByteWriter& w, const std::vector<std::string>& v) {
  std::vector<uint32_t> off(v.size() + 1, 0);
  size_t total = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    total += v[i].size();
    check(total < (uint64_t(1) << 32), "tokenizer: pieces exceed 4 GiB");
    off[i + 1] = uint32_t(total);
  }
  std::vector<uint8_t> chars;
  chars.reserve(total);
  for (const auto& s : v) chars.insert(chars.end(), s.begin(), s.end());
  w.put_array<uint32_t>(off);
  w.put_array<uint8_t>(chars);
}

// piece -> id with the runtime's precedence: the first id of a spelling, except that added
// tokens win over regular pieces spelled the same.
std::unordered_map<std::string_view, int32_t> piece_map(const TokenizerData& d) {
  std::unordered_map<std::string_view, int32_t> m;
  m.reserve(d.pieces.size());
  for (size_t i = 0; i < d.pieces.size(); ++i)
    if (!d.pieces[i].empty()) m.emplace(d.pieces[i], int32_t(i));
  for (const auto& t : d.added) m[d.pieces[t.id]] = t.id;
  return m;
}

void put_piece_table(ByteWriter& w, const std::unordered_map<std::string_view, int32_t>& m) {
  std::vector<std::pair<std::string_view, int32_t>> entries(m.begin(), m.end());
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  uint32_t max_probe = 0;
  const auto slots = build_piece_table(entries, max_probe);
  w.put<uint32_t>(max_probe);
  w.put_array<PieceSlot>(slots);
}

}  // namespace

std::vector<std::string> decoded_bytes(const TokenizerData& d) {
  std::vector<std::string> out(d.pieces.size());
  if (d.kind == TokenizerKind::ByteLevelBpe) {
    const auto table = unicode_to_byte_table();
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = d.types[i] == TokenType::Control ? d.pieces[i] : unmap_bytelevel(d.pieces[i], table);
  } else {
    for (size_t i = 0; i < out.size(); ++i) out[i] = sentencepiece_bytes(d, i);
  }
  for (const auto& t : d.added) out[t.id] = t.content;
  return out;
}

void write_tokenizer(const TokenizerData& d, ByteWriter& w) {
  using namespace section;
  validate_tokenizer(d);
  const auto pieces = piece_map(d);
  // Byte-level merges resolved to ids now, so loading does no string work; the first
  // (lowest-rank) rule for a pair is the one that applies.
  std::vector<MergeSlot> rules;
  if (d.kind == TokenizerKind::ByteLevelBpe) {
    std::unordered_map<uint64_t, bool> seen;
    seen.reserve(d.merges.size());
    rules.reserve(d.merges.size());
    std::string joined;
    for (size_t r = 0; r < d.merges.size(); ++r) {
      const auto [a, b] = d.merges[r];
      joined = d.pieces[a] + d.pieces[b];
      auto it = pieces.find(joined);
      check(it != pieces.end(), "tokenizer: merge {} ('{}' + '{}') makes '{}', not in vocab", r,
            d.pieces[a], d.pieces[b], joined);
      if (seen.emplace((uint64_t(uint32_t(a)) << 32) | uint32_t(b), true).second)
        rules.push_back({a, b, int32_t(r), it->second});
    }
  }
  std::unordered_map<std::string_view, int32_t> sp;
  if (d.kind == TokenizerKind::SentencePieceBpe)
    for (size_t i = 0; i < d.pieces.size(); ++i) {
      const auto t = d.types[i];
      if (!d.pieces[i].empty() &&
          (t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Unused))
        sp.emplace(d.pieces[i], int32_t(i));
    }

  w.put<uint32_t>(kMagic);
  w.put<uint32_t>(kVersion);
  w.put<uint32_t>(uint32_t(d.kind));
  uint32_t flags = 0;
  if (d.add_bos) flags |= kAddBos;
  if (d.add_eos) flags |= kAddEos;
  if (d.ignore_merges) flags |= kIgnoreMerges;
  if (d.add_dummy_prefix) flags |= kDummyPrefix;
  if (d.remove_extra_whitespaces) flags |= kRemoveExtraWs;
  if (d.escape_whitespaces) flags |= kEscapeWs;
  if (d.byte_fallback) flags |= kByteFallback;
  if (d.nfc) flags |= kNfc;
  w.put<uint32_t>(flags);
  for (int32_t id : {d.bos_id, d.eos_id, d.unk_id, d.pad_id}) w.put<int32_t>(id);
  w.put<uint32_t>(uint32_t(d.pieces.size()));
  put_strings(w, d.pieces);
  w.put_array<uint8_t>({reinterpret_cast<const uint8_t*>(d.types.data()), d.types.size()});
  w.put<uint32_t>(d.scores.empty() ? 0 : 1);
  w.put_array<float>(d.scores);
  std::vector<int32_t> flat;
  flat.reserve(d.merges.size() * 2);
  for (const auto& [a, b] : d.merges) {
    flat.push_back(a);
    flat.push_back(b);
  }
  w.put_array<int32_t>(flat);
  w.put<uint32_t>(uint32_t(d.added.size()));
  for (const auto& t : d.added) {
    w.put<int32_t>(t.id);
    w.put<uint8_t>(
        uint8_t((t.special ? kSpecial : 0) | (t.lstrip ? kLstrip : 0) | (t.rstrip ? kRstrip : 0)));
    w.put_string(t.content);
  }
  w.put_string(d.pretokenizer_regex);
  put_strings(w, decoded_bytes(d));
  put_piece_table(w, pieces);
  put_piece_table(w, sp);
  uint32_t max_probe = 0;
  const auto merge_slots = build_merge_table(rules, max_probe);
  w.put<uint32_t>(max_probe);
  w.put_array<MergeSlot>(merge_slots);
}

TokenizerData read_tokenizer(ByteReader& r) {
  const Tokenizer t = Tokenizer::from_section(r.data().subspan(r.pos()), r.what());
  r.get_bytes(r.remaining());
  return t.to_data();
}

}  // namespace edgevl::text
