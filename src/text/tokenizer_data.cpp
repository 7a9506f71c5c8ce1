// Serialized form of TokenizerData (the .evb "tokenizer" section) and its validation.
// The reader trusts nothing: every count is checked against the bytes left before anything
// is allocated, and every id against the vocabulary.
#include <array>

#include "text/tokenizer.h"

namespace edgevl::text {
namespace {

constexpr uint32_t kMagic = 0x4B545645;  // "EVTK"
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxPieces = 1u << 24;

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

bool valid_type(uint8_t t) {
  return t >= 1 && t <= 6;
}

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
  check(n > 0 && n <= kMaxPieces, "tokenizer: vocabulary size {} is out of range", n);
  check(d.types.size() == n, "tokenizer: {} token types for {} pieces", d.types.size(), n);
  for (size_t i = 0; i < n; ++i)
    check(valid_type(uint8_t(d.types[i])), "tokenizer: token {} has invalid type {}", i,
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

void write_tokenizer(const TokenizerData& d, ByteWriter& w) {
  validate_tokenizer(d);
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
  for (const auto& p : d.pieces) w.put_string(p);
  w.put_bytes(d.types.data(), d.types.size());
  w.put<uint32_t>(d.scores.empty() ? 0 : 1);
  w.put_vector(d.scores);
  std::vector<int32_t> flat;
  flat.reserve(d.merges.size() * 2);
  for (const auto& [a, b] : d.merges) {
    flat.push_back(a);
    flat.push_back(b);
  }
  w.put_vector(flat);
  w.put<uint32_t>(uint32_t(d.added.size()));
  for (const auto& t : d.added) {
    w.put<int32_t>(t.id);
    w.put<uint8_t>(
        uint8_t((t.special ? kSpecial : 0) | (t.lstrip ? kLstrip : 0) | (t.rstrip ? kRstrip : 0)));
    w.put_string(t.content);
  }
  w.put_string(d.pretokenizer_regex);
}

TokenizerData read_tokenizer(ByteReader& r) {
  TokenizerData d;
  const uint32_t magic = r.get<uint32_t>();
  check(magic == kMagic, "{}: not a tokenizer section (magic {:#x})", r.what(), magic);
  const uint32_t version = r.get<uint32_t>();
  check(version == kVersion, "{}: tokenizer format version {} is not supported (expected {})",
        r.what(), version, kVersion);
  const uint32_t kind = r.get<uint32_t>();
  check(kind <= 1, "{}: unknown tokenizer kind {}", r.what(), kind);
  d.kind = TokenizerKind(kind);
  const uint32_t flags = r.get<uint32_t>();
  check(flags < 256, "{}: unknown tokenizer flags {:#x}", r.what(), flags);
  d.add_bos = flags & kAddBos;
  d.add_eos = flags & kAddEos;
  d.ignore_merges = flags & kIgnoreMerges;
  d.add_dummy_prefix = flags & kDummyPrefix;
  d.remove_extra_whitespaces = flags & kRemoveExtraWs;
  d.escape_whitespaces = flags & kEscapeWs;
  d.byte_fallback = flags & kByteFallback;
  d.nfc = flags & kNfc;
  d.bos_id = r.get<int32_t>();
  d.eos_id = r.get<int32_t>();
  d.unk_id = r.get<int32_t>();
  d.pad_id = r.get<int32_t>();
  const uint32_t n = r.get<uint32_t>();
  check(n > 0 && n <= kMaxPieces, "{}: vocabulary size {} is out of range", r.what(), n);
  // Each piece costs at least its 4-byte length, so a lying count fails before allocating.
  r.need(size_t(n) * 4, "piece lengths");
  d.pieces.reserve(n);
  for (uint32_t i = 0; i < n; ++i) d.pieces.push_back(r.get_string());
  auto types = r.get_bytes(n);
  d.types.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    check(valid_type(types[i]), "{}: token {} has invalid type {}", r.what(), i, types[i]);
    d.types[i] = TokenType(types[i]);
  }
  const uint32_t has_scores = r.get<uint32_t>();
  check(has_scores <= 1, "{}: bad score marker {}", r.what(), has_scores);
  d.scores = r.get_vector<float>();
  check(d.scores.size() == (has_scores ? n : 0), "{}: {} scores for {} pieces", r.what(),
        d.scores.size(), n);
  auto flat = r.get_vector<int32_t>();
  check(flat.size() % 2 == 0, "{}: odd merge table length {}", r.what(), flat.size());
  d.merges.reserve(flat.size() / 2);
  for (size_t i = 0; i < flat.size(); i += 2) d.merges.emplace_back(flat[i], flat[i + 1]);
  const uint32_t n_added = r.get<uint32_t>();
  r.need(size_t(n_added) * 9, "added tokens");
  d.added.reserve(n_added);
  for (uint32_t i = 0; i < n_added; ++i) {
    AddedToken t;
    t.id = r.get<int32_t>();
    const uint8_t f = r.get<uint8_t>();
    check(f < 8, "{}: added token {} has unknown flags {:#x}", r.what(), i, f);
    t.special = f & kSpecial;
    t.lstrip = f & kLstrip;
    t.rstrip = f & kRstrip;
    t.content = r.get_string();
    d.added.push_back(std::move(t));
  }
  d.pretokenizer_regex = r.get_string();
  try {
    validate_tokenizer(d);
  } catch (const Error& e) {
    fail("{}: {}", r.what(), e.what());
  }
  return d;
}

}  // namespace edgevl::text
